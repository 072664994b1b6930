"""`nearmetal trace`: run a program as `run` would, with nm-trace.so preloaded into its ranks
(never the launcher), then write the trace directory and its report; and `trace report DIR`.

The ranks write into a staging directory under /tmp/nearmetal-<uid> — the path every
runtime shows unchanged inside a container, as the witness uses — and the files are moved
into --out afterwards, with meta.json (what was run, how) and report.html beside them.
"""

import json
import os
import shutil
import sys
import time

from .. import safe_write
from ..errors import NearmetalError
from ..safe_read import load_json
from . import build, callpath, reader, render

META = "meta.json"
MAX_META_BYTES, MAX_META_DEPTH = 4 << 20, 16  # what nearmetal writes there: a few KiB, 3 levels


def check_program(program, mode):
    """A native program must be a dynamically linked ELF file: preloading cannot reach a
    static one. (In a container the file is the image's: the runtime resolves it there.)"""
    from ..models import in_container
    from ..program_paths import is_kernel

    if in_container(mode) or is_kernel(program):  # nearmetal's kernels are dynamically linked
        return
    path = program if os.sep in program else shutil.which(program)
    if not path or not os.path.isfile(path):
        raise NearmetalError(f"program not found: {program}")
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic != b"\x7fELF":
        return  # a script: its interpreter is what runs, and is dynamically linked as a rule
    from ..elf import read_elf

    if read_elf(path).interp is None:
        raise NearmetalError(f"{program} is statically linked: preloading the tracer cannot work "
                             f"(rebuild it dynamically linked)")


def out_dir(out):
    """(the trace directory, whether this call created it); refused when it already holds a trace."""
    path = out or time.strftime("trace-%Y%m%d-%H%M%S")
    if os.path.isdir(path) and any(f.endswith(".nmt") or f == META for f in os.listdir(path)):
        raise NearmetalError(f"{path} already holds a trace: choose another --out")
    created = not os.path.lexists(path)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise NearmetalError(f"cannot create trace directory {path}: {e.strerror}") from None
    return path, created


def discard_if_empty(out, created):
    """Remove a trace directory this run created when its ranks traced no call at all (a
    program that stopped at its own argument check): True when removed."""
    if not created or any(len(p.events) for p in reader.read(out).processes):
        return False
    names = os.listdir(out)
    if not all((n.startswith("trace-") and n.endswith(".nmt")) or n == META for n in names):
        return False  # something else was put there meanwhile: all kept
    for name in names:
        os.unlink(os.path.join(out, name))
    try:
        os.rmdir(out)
    except OSError:  # a file arrived since: the directory stays, without the empty trace
        pass
    return True


def staging(other_account=False):
    """A fresh directory for the ranks' trace files; writable by any account (sticky, not
    listable) when the ranks run as another one (`trace --user`): else they could write none."""
    shared = os.path.dirname(build.library())  # /tmp/nearmetal-<uid>, checked to be this user's
    from ..supervise import stage_dir

    stage = stage_dir("trace", shared)
    if other_account:
        os.chmod(stage, 0o1733)
    return stage


def collect(stage, out, meta):
    """Move the ranks' files into `out`, write meta.json; the number of trace files."""
    moved = 0
    try:
        for name in sorted(os.listdir(stage)):
            if name.startswith("trace-") and name.endswith(".nmt"):
                why = take(os.path.join(stage, name), os.path.join(out, name))
                if why:
                    print(f"nearmetal trace: {name} left out: {why}", file=sys.stderr)
                else:
                    moved += 1
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    safe_write.write_text(os.path.join(out, META), json.dumps(meta, indent=1, sort_keys=True), "trace metadata")
    return moved


SPARSE_FROM = 64 << 20  # a trace file this large with under half its bytes on disk is a hole, not a trace


def take(src, dest):
    """One rank's trace file into `dest`: None, or why it was left out. Ranks run as another
    account (`trace --user`) write into a directory any account may write, where that account
    could leave a link to a file only root may read, a hard link to one, a FIFO, a directory or
    a sparse file of terabytes: only a regular file with one link is taken, through a
    descriptor opened without following a link or waiting, and another account's is copied
    (the size it had when opened, if it fits) into a file of nearmetal's own."""
    import stat

    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        return e.strerror
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            return "not a regular file with one link"
        if st.st_uid == os.geteuid():  # nearmetal's own: no other account can make one, or rebind its name
            os.close(fd)
            fd = -1
            safe_write.move_into(src, dest, "trace file")
            return None
        if st.st_size >= SPARSE_FROM and st.st_blocks * 512 < st.st_size // 2:
            return f"a sparse file of {st.st_size} bytes"
        free = os.statvfs(os.path.dirname(dest))
        if st.st_size > free.f_bavail * free.f_frsize:
            return f"{st.st_size} bytes, more than the free space in {os.path.dirname(dest)}"
        with os.fdopen(os.dup(fd), "rb") as f, safe_write.replacing(dest, "trace file") as copy:
            left = st.st_size
            while left > 0 and (chunk := f.read(min(left, 1 << 20))):
                copy.write(chunk)
                left -= len(chunk)
        return None
    finally:
        if fd >= 0:
            os.close(fd)


def kept_line(files, out):
    """What an interrupted trace kept, and how to read it."""
    import shlex

    if files:
        return f"{files} trace files kept in {out} ({shlex.join(['nearmetal', 'trace', 'report', str(out)])})"
    return (f"the ranks were ended before they wrote any trace (a rank writes its events once a second while it "
            f"makes traced calls, and when it ends), so none was kept: {out} holds meta.json only")


def report(trace_dir, fmt="html", out=None, threshold=callpath.THRESHOLD):
    """Analyse a trace directory; md/json go to `out` (a stream), html to DIR/report.html.
    Returns the path written, or None. threshold: the share of the largest node's time
    under which a call path is left out of the graph (0: none left out)."""
    if fmt not in render.FORMATS:
        raise NearmetalError(f"unknown report format {fmt} (choose from: {', '.join(render.FORMATS)})")
    if not os.path.isdir(trace_dir):
        what = "a file, not a directory" if os.path.lexists(trace_dir) else "no such directory"
        raise NearmetalError(f"{trace_dir} is not a trace directory ({what})")
    analysis = callpath.analyze(reader.read(trace_dir), threshold=threshold)
    meta_path = os.path.join(trace_dir, META)
    if os.path.lexists(meta_path):
        analysis["run"] = load_json(meta_path, MAX_META_BYTES, MAX_META_DEPTH, "trace metadata")
    if fmt == "json":
        (out or sys.stdout).write(render.as_json(analysis))
        return None
    if fmt == "md":
        (out or sys.stdout).write(render.markdown(analysis))
        return None
    path = os.path.join(trace_dir, "report.html")
    safe_write.write_text(path, render.page(analysis), "trace report")
    return path


def report_done(out, fmt, threshold):
    """After a traced run: its summary line and the page's path (on stderr when md or json is
    asked: stdout is then that report's alone, after the program's own output), and that report."""
    said = sys.stdout if fmt == "html" else sys.stderr
    print(f"trace: {summary_line(out)} in {out}", file=said)
    print(f"report: {report(out, 'html', threshold=threshold)}", file=said)
    if fmt != "html":
        report(out, fmt, threshold=threshold)


def summary_line(trace_dir):
    t = reader.read(trace_dir)
    events = sum(len(p.events) for p in t.processes)
    ranks = sorted(p.rank for p in t.processes if p.rank >= 0)
    n = len(t.processes)
    which = f"ranks {', '.join(map(str, ranks))}" if ranks else "not MPI ranks"
    return f"{events} I/O calls traced in {n} process{'es' * (n != 1)} ({which})"
