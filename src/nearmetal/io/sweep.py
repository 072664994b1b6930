"""From an I/O study to regular studies, and running them through the study engine.

The space is expanded into configurations (cross product -> normalize -> dedupe, plus the
serial reference), and each set of configurations is compiled into a regular study file:
one [[benchmark]] per configuration (kernel iobench, name = the configuration's label,
args = its nm-iobench arguments, env = its MPI-IO component), the variants as the matrix,
the target directory as the working directory. The compiled TOML is what the store keeps,
so `--resume` checks it like any study file and reports read it like any study.
"""

import itertools
import json

from ..errors import NearmetalError
from ..study.plan import study_file
from .space import Configuration

PARAMETERS = ("pattern", "library", "io_layout", "aggregators", "stripes", "buffer", "chunk", "read", "mpiio")


def space_values(space):
    """{parameter: [Configuration field values]} ("default" -> None)."""
    return {p: space.values(p) for p in PARAMETERS}


def make(fields):
    """A Configuration from a full set of parameter values; None when the combination is
    impossible (posix writing one shared file)."""
    try:
        return Configuration(**fields)
    except ValueError:
        return None


def group_by_mpi(configs, mpis):
    """[(normalized Configuration, (mpi, ...))]: each raw configuration normalized for each
    MPI family (the MPI-IO component is a choice only under Open MPI), deduplicated, in
    first-seen order; the tuple says under which MPIs that configuration runs."""
    order, where = [], {}
    for raw in configs:
        for mpi in mpis:
            cfg = raw.normalize(mpi)
            if cfg not in where:
                where[cfg] = []
                order.append(cfg)
            if mpi not in where[cfg]:
                where[cfg].append(mpi)
    return [(c, tuple(m for m in mpis if m in where[c])) for c in order]


def reference(space):
    """The serial reference every sweep contains: one writer, one file. Through posix when
    the space lists it (a plain write of the gathered field, like FMS's single-threaded
    output without MPI-IO), else through the first library; first read mode; no hints."""
    lib = "posix" if "posix" in space.library else space.library[0]
    return Configuration("serial", lib, read=space.read[0]).normalize()


def expand(space, mpis, fixed=None):
    """The sweep's configurations: the cross product of the space (parameters in `fixed`
    pinned to one value), normalized, deduplicated, the serial reference first."""
    values = space_values(space)
    for p, v in (fixed or {}).items():
        values[p] = [v]
    raws = [reference(space)]
    for combo in itertools.product(*(values[p] for p in PARAMETERS)):
        cfg = make(dict(zip(PARAMETERS, combo)))
        if cfg is not None:
            raws.append(cfg)
    return group_by_mpi(raws, mpis)


# -- compiling to a regular study ------------------------------------------------------------

def _toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a JSON string is a valid TOML basic string
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def _table(name, items, array=False):
    lines = [f"[[{name}]]" if array else f"[{name}]"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in items.items() if v is not None]
    return "\n".join(lines)


def compile_study(io_study, name, repetitions, configs):
    """The regular study (TOML text) measuring `configs` [(Configuration, mpis)]. The text
    depends only on the I/O study's content (not on its path), so --resume can compare it."""
    s, io = io_study.study, io_study.io
    study = {"name": name, "description": s.description or f"I/O tuning study {s.name}",
             "repetitions": repetitions, "warmup": s.warmup, "timeout": s.timeout, "seed": s.seed,
             "order": s.order, "margin": s.margin, "pin": s.pin, "scheduler": s.scheduler, "workdir": io.dir}
    parts = ["# compiled by `nearmetal io sweep` from an I/O study; a regular study file (docs/io-tuning.md)",
             _table("study", study)]
    baseline = io_study.baseline.model_dump() if io_study.baseline else {"mode": io.mode[0]}
    parts.append(_table("baseline", baseline))
    slurm = {k: v for k, v in io_study.slurm.model_dump().items() if v is not None}
    if slurm:
        parts.append(_table("slurm", slurm))
    parts.append(_table("matrix", {"mode": io.mode, "runtime": io.runtime, "mpi": io.mpi, "image": io.image,
                                   "ranks": [io.ranks], "threads": [1]}))
    for cfg, mpis in configs:
        bench = {"kernel": "iobench", "name": cfg.label(),
                 "args": cfg.kernel_args(io.grid, io.steps, io.layout, io.types, io.nodes)}
        if cfg.env():
            bench["env"] = cfg.env()
        if list(mpis) != list(io.mpi):
            bench["mpi"] = list(mpis)
        parts.append(_table("benchmark", bench, array=True))
    text = "\n\n".join(parts) + "\n"
    return study_file.parse(text, source=f"compiled study '{name}'"), text


def run_study(cfg, text, db, resume, console, progress, resume_hint, intro=None):
    """Plan a compiled study into the store (or find it there) and run what is pending.
    Returns (store, study_id). KeyboardInterrupt prints how to resume, then propagates."""
    from ..study.execute import runner
    from ..study.execute.executor import Executor

    store, study_id, _ = runner.open_study(cfg, text, db, resume, say=lambda m: console.print(m, highlight=False, soft_wrap=True))
    if intro:
        console.print(intro, highlight=False, soft_wrap=True)
    counts = store.counts(study_id)
    total, pending = sum(counts.values()), counts.get("planned", 0)
    console.print(f"study [bold]{cfg.study.name}[/]: {len(cfg.benchmark)} configurations, {total} runs, "
                  f"{pending} to run; results in {db}", highlight=False, soft_wrap=True)
    ex = Executor(cfg, store, study_id, console=console, progress=progress)
    try:
        ex.run_all()
    except KeyboardInterrupt:
        finished = total - store.counts(study_id).get("planned", 0)
        console.print(f"interrupted: {finished} of {total} runs of '{cfg.study.name}' finished and stored; "
                      f"resume with: {resume_hint}", highlight=False, soft_wrap=True)
        store.close()
        raise
    finally:  # the cells' staging directories (evidence, traces) go with it, however the runs ended
        ex.close()
    return store, study_id


def max_rank_values(store, study_id, metric):
    """{(benchmark label, variant): {block: value}} of `metric` at rank "max" (non-warm-up, ok runs)."""
    out = {}
    for rec in store.records(study_id):
        if rec["metric"] != metric:
            continue
        if json.loads(rec["point_json"]).get("rank") != "max":
            continue
        bucket = out.setdefault((rec["benchmark"], rec["variant"]), {})
        block = rec["block"]
        while block in bucket:  # one value per block; a second one (never expected) is kept apart
            block = (block, len(bucket))
        bucket[block] = rec["value"]
    return out
