"""`nearmetal study`: plan a study into the store, then execute what is still pending."""

import os
import random
import shlex
from datetime import datetime, timezone
from pathlib import Path

from .. import __version__
from ..errors import NearmetalError
from . import config as config_mod
from .plan import baseline_of, make_plan, variant_id
from .lock import lock_for_writing
from .store import Store


def default_db(name):
    return Path("results") / name / "study.db"


def load(path):
    if path is None:
        return config_mod.builtin_quickstart()
    return config_mod.load(path)


def prepare(cfg, text, db_path, resume, builtin=False, say=print):
    """Open the store and make sure the study's planned runs are in it; returns (store, study_id, new).

    The returned store holds the database's writer lock (study/lock.py) until it is
    closed or the process ends: opening, creating, planning and running all happen under
    it, so a second runner of the same database is refused with the holder's PID.

    For the built-in quickstart, a database planned from an older quickstart is kept aside
    (renamed) rather than refused, so the README's first command always works."""
    what = f"study '{cfg.study.name}'"
    with lock_for_writing(db_path, what):   # held across the rename below; the store keeps its own hold
        opened = [Store(db_path, what=what)]
        try:
            return _prepare(opened, cfg, text, db_path, resume, builtin, say, what)
        except BaseException:
            opened[-1].close()
            raise


def _prepare(opened, cfg, text, db_path, resume, builtin, say, what):
    store = opened[-1]
    row = store.study(cfg.study.name)
    if builtin and row is not None and row["config_toml"] != text:
        store.close()
        kept = Path(db_path).with_name(f"{Path(db_path).stem}-{row['created'].replace(':', '')}.db")
        for suffix in ("", "-wal", "-shm"):
            src = Path(str(db_path) + suffix)
            if src.exists():
                src.rename(str(kept) + suffix)
        say(f"the built-in quickstart changed since {row['created']}: previous results kept in {kept}")
        store = Store(db_path, what=what)
        opened.append(store)
        row = None
    if row is not None:
        if not resume:
            raise NearmetalError(f"study '{cfg.study.name}' already exists in {db_path}: use --resume to complete it, "
                                 f"or --db for a new database")
        if row["config_toml"] != text:
            raise NearmetalError(f"study '{cfg.study.name}' in {db_path} was planned from a different study file; "
                                 f"resume needs the same file (or use a new --db)")
        return store, row["id"], False
    seed = cfg.study.seed if cfg.study.seed is not None else random.SystemRandom().randrange(2**31)
    runs = make_plan(cfg, seed)
    created = datetime.now(timezone.utc).isoformat(timespec="seconds")
    study_id = store.create_study(cfg.study.name, text, seed, cfg.study.margin, cfg.baseline.model_dump(),
                                  __version__, created, planned=[_row(r) for r in runs])
    return store, study_id, True


def _row(r):
    c = r.cell
    return {"run_key": r.key, "position": r.position, "block": r.block, "repetition": r.repetition,
            "warmup": r.warmup, "benchmark": c.benchmark.label, "kernel": c.benchmark.kernel,
            "variant": variant_id(c.variant), "variant_json": c.variant, "ranks": c.ranks, "threads": c.threads}


def dry_run(cfg, out):
    """Print every run, in order, with its argv — without touching a database."""
    from .executor import Executor

    seed = cfg.study.seed if cfg.study.seed is not None else 0
    runs = make_plan(cfg, seed)
    ex = Executor(cfg, store=None, study_id=None, progress=False)
    out(f"# study {cfg.study.name}: {len(runs)} runs ({cfg.study.warmup} warm-up rounds, "
        f"{cfg.study.repetitions} randomized blocks, seed {seed}{'' if cfg.study.seed is not None else ' (a random seed is drawn at run time)'})")
    for bench in cfg.benchmark:  # shown resolved: a relative path was taken from the current directory
        workdir = cfg.workdir_of(bench)
        if workdir:
            state = "exists" if os.path.isdir(workdir) else "created when the study runs; nothing is created now"
            out(f"# benchmark {bench.label}: working directory {workdir} ({state})")
    for r in runs:
        row = {"run_key": r.key, "variant_json": _json(r.cell.variant), "benchmark": r.cell.benchmark.label,
               "ranks": r.cell.ranks, "threads": r.cell.threads}
        _, planned = ex.plan_for(row)
        tag = "warmup" if r.warmup else f"block {r.block}"
        vs = variant_id(baseline_of(cfg, r.cell.variant))
        if isinstance(planned, NearmetalError):
            out(f"{r.position:5d} {tag:9s} {r.cell.key}  (vs {vs})\n      cannot run: {planned}")
        else:
            out(f"{r.position:5d} {tag:9s} {r.cell.key}  (vs {vs})\n      {shlex.join(planned[0].argv)}")
    return len(runs)


def _json(v):
    import json

    return json.dumps(v)
