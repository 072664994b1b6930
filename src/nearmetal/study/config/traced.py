"""`trace = true` for a study benchmark: each run's ranks preload the I/O tracer (trace/),
and its trace directory is kept beside the database, one per run, with its own report.html;
the study's report links them.

    [[benchmark]]
    kernel = "iobench"
    args = ["-p", "shared", "-L", "netcdf4"]
    trace = true                      # or a list of layers: ["netcdf", "hdf5", "mpiio", "posix"]

The ranks write into a staging directory under /tmp/nearmetal-<uid> (the path every runtime
shows unchanged in a container), one per cell; after each run its files move to
<database directory>/traces/<study>.<run>/ with meta.json. A run whose tracer wrote nothing (it
failed to start, say) keeps an empty directory with meta.json saying so.
"""

import json
import os
from typing import Literal, Union

from pydantic import BaseModel, StrictBool

from ...trace import ALL_LAYERS

Layer = Literal[ALL_LAYERS]


class TraceFields(BaseModel):
    """The key of a traced benchmark (mixed into config.Benchmark)."""

    trace: Union[StrictBool, list[Layer]] = False

    def trace_layers(self):
        """None: not traced; () : the default layers; else the layers named."""
        if self.trace is False or self.trace == []:
            return None
        return () if self.trace is True else tuple(self.trace)


def safe_name(run_key):
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in run_key)[:200]


def traces_dir(db_path):
    return os.path.join(os.path.dirname(os.path.abspath(db_path)), "traces")


def staging_env(env, layers, dry):
    """(rank environment with the tracer, staging directory); a dry run creates nothing."""
    from ...trace import build, command

    stage = os.path.join(os.path.dirname(build.library()), "trace-DIR") if dry else command.staging()
    return build.rank_env(stage, layers or None, env), stage


def keep(stage, db_path, study, row, status, exit_status, layers):
    """Move a run's trace files from the cell's staging directory into traces/<run>/ and write
    its meta.json and report.html; returns the directory. A report that cannot be made (no
    trace files) is said in meta.json, never fails the run."""
    from ...errors import NearmetalError
    from ...safe_write import write_text
    from ...trace import DEFAULT_LAYERS, command

    dest = os.path.join(traces_dir(db_path), safe_name(f"{study}.{row['run_key']}"))
    if os.path.isdir(dest):  # a resumed run measured again: its earlier trace gives way
        import shutil

        shutil.rmtree(dest)
    os.makedirs(dest)
    meta = {"study": study, "run_key": row["run_key"], "benchmark": row["benchmark"], "variant": row["variant"],
            "block": row["block"], "status": status, "exit_status": exit_status,
            "layers": list(layers or DEFAULT_LAYERS)}
    files, left_out = _move(stage, dest)
    meta["trace_files"] = files
    if left_out:  # not a regular file with one link (trace/command.py take)
        meta["left_out"] = left_out
    write_text(os.path.join(dest, command.META), json.dumps(meta, indent=1, sort_keys=True), "trace metadata")
    if files:
        try:
            command.report(dest, "html")
        except NearmetalError as e:
            meta["report_error"] = str(e)
            write_text(os.path.join(dest, command.META), json.dumps(meta, indent=1, sort_keys=True), "trace metadata")
    return dest


def _move(stage, dest):
    """(files moved, {name: why} of those left out) from a cell's staging directory."""
    from ...trace.command import take

    n, left_out = 0, {}
    for name in sorted(os.listdir(stage)) if os.path.isdir(stage) else ():
        if name.startswith("trace-") and name.endswith(".nmt"):
            why = take(os.path.join(stage, name), os.path.join(dest, name))
            if why:
                left_out[name] = why
            else:
                n += 1
    return n, left_out


def listing(db_path, study):
    """[{run_key, benchmark, variant, block, status, dir, report, files}] of the kept traces,
    for the study's report (absolute paths; report None where there is none)."""
    from ...errors import NearmetalError
    from ...safe_read import load_json
    from ...trace.command import MAX_META_BYTES, MAX_META_DEPTH

    root = traces_dir(db_path)
    out = []
    for name in sorted(os.listdir(root)) if os.path.isdir(root) else ():
        meta_path = os.path.join(root, name, "meta.json")
        try:  # bounded: a database handed over may come with a crafted traces/ beside it
            meta = load_json(meta_path, MAX_META_BYTES, MAX_META_DEPTH, "trace metadata")
        except NearmetalError:
            continue
        if not isinstance(meta, dict) or meta.get("study") != study:
            continue
        report = os.path.join(root, name, "report.html")
        out.append({k: meta.get(k) for k in ("run_key", "benchmark", "variant", "block", "status")}
                   | {"dir": os.path.join(root, name), "report": report if os.path.isfile(report) else None,
                      "files": meta.get("trace_files", 0)})
    return out
