"""`nearmetal io sweep` and `nearmetal io best`: the command-line side of the I/O tuner."""

import json
import shlex
import sys
from pathlib import Path

from .. import safe_write
from ..errors import NearmetalError

BUILTIN_NAME = "io-tune"


def add_parser(sub, parser_class):
    """The `io` subcommand's argparse definition (called from cli_parser)."""
    from ..cli_parser import study_name_arg
    io = sub.add_parser("io", help="tune parallel I/O: sweep a parameter space, pick the fastest configuration",
                        description="See docs/io-tuning.md.")
    isub = io.add_subparsers(dest="io_command", metavar="ACTION", parser_class=parser_class)
    isub.required = True
    s = isub.add_parser("sweep", help="pre-select the parameters that matter, then sweep them (a study)",
                        description="Without IO_STUDY.toml, runs the built-in I/O study.")
    s.add_argument("file", nargs="?", metavar="IO_STUDY.toml", help="I/O study file (default: the built-in one)")
    s.add_argument("--db", help="results database (default: results/<study name>/study.db)")
    s.add_argument("--resume", action="store_true", help="complete an interrupted sweep: run exactly the missing runs")
    s.add_argument("--dry-run", action="store_true",
                   help="validate and print the configurations (pre-selection and the full space); run nothing")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    b = isub.add_parser("best", help="the fastest configuration, its speed-up over serial, a hints file and FMS namelist")
    b.add_argument("--db", help=f"results database (default: results/STUDY/study.db with --study, else "
                                f"results/{BUILTIN_NAME}/study.db)")
    b.add_argument("--study", type=study_name_arg,
                   help="the sweep's study name (needed when the database holds several sweeps)")
    b.add_argument("--metric", choices=("write", "total"), default="total",
                   help="rank by the max-over-ranks write time or total time (default: total)")
    b.add_argument("--variant", metavar="VARIANT",
                   help="the fastest among one variant's configurations (e.g. the container you will run in); "
                        "it writes the files")
    b.add_argument("--json", action="store_true", help="print the result as JSON")


def command(args):
    if args.io_command == "sweep":
        return sweep(args)
    return best(args)


def best(args):
    from . import best as best_mod

    from ..study.execute.runner import default_db

    # where `io sweep` put the sweep named (results/NAME/study.db), else the built-in sweep's
    db = Path(args.db) if args.db else default_db(args.study or BUILTIN_NAME)
    best_mod.run(db, args.study, args.metric, as_json=args.json, variant=args.variant)
    return 0


def sweep(args):
    from ..study.store.lock import lock_for_writing
    from ..study.execute.runner import default_db
    from . import config

    if args.file:
        s, _ = config.load(args.file)
        source = args.file
    else:
        s, _ = config.builtin()
        source = "built-in I/O study"
    config.check_environment(s, source)
    if args.dry_run:
        return _dry_run(s)
    db = Path(args.db) if args.db else default_db(s.study.name)
    # One writer per database, from the checks below to the end of the sweep (study/store/lock.py).
    with lock_for_writing(db, f"I/O sweep '{s.study.name}'"):
        return _sweep_locked(args, s, db)


def _sweep_locked(args, s, db):
    from ..console import Console

    from . import best as best_mod
    from . import preselect
    from ..study.config.config import make_workdir
    from .sweep import compile_study, expand, run_study

    io = s.io
    err = Console(stderr=True, width=None if sys.stderr.isatty() else 160)
    say = lambda m: err.print(m, highlight=False, soft_wrap=True)
    if not args.resume:
        _refuse_existing(db, [f"{s.study.name}-preselect", s.study.name])
    else:
        _check_resumable(db, s)
    make_workdir(io.dir, "I/O directory")
    resume_hint = shlex.join(["nearmetal", "io", "sweep"] + ([args.file] if args.file else [])
                             + ["--resume", "--db", str(db)])
    progress = not args.no_progress
    fixed = {}
    pre = io.preselect
    if pre.enabled:
        compiled = _preselect_study(s)
        if compiled:
            cfg, text = compiled
            name = cfg.study.name
            intro = (f"pre-selection: one parameter at a time around "
                     f"{preselect.base_configuration(io.space).label()}")
            store, sid = run_study(cfg, text, db, args.resume, err, progress, resume_hint, intro)
            try:
                _check_failures(store, sid, name, say)
                decision = preselect.decide(io.space, store, sid, pre, io.metric)
            finally:
                store.close()
            preselect.render(decision, err)
            path = db.parent / f"{name}.json"
            safe_write.write_text(path, json.dumps(decision, indent=1) + "\n", "pre-selection decisions")
            say(f"pre-selection decisions: {path}")
            fixed = preselect.fixed_values(io.space, decision)
        else:
            say("pre-selection: every parameter has one value; nothing to pre-select")
    configs = expand(io.space, io.mpi, fixed)
    cfg, text = compile_study(s, s.study.name, s.study.repetitions, configs)
    store, sid = run_study(cfg, text, db, args.resume, err, progress, resume_hint)
    try:
        _check_failures(store, sid, s.study.name, say)
    finally:
        store.close()
    best_mod.run(db, s.study.name, io.metric)
    say(f"results: {db}")
    say(f"next: nearmetal io best --db {shlex.quote(str(db))} --metric write   |   "
        f"nearmetal report --db {shlex.quote(str(db))} --study {s.study.name}")
    return 0


def _preselect_study(s):
    """(StudyConfig, TOML text) of the pre-selection study, or None when there is nothing to pre-select."""
    from . import preselect
    from .sweep import compile_study

    if not s.io.preselect.enabled:
        return None
    configs = preselect.configurations(s.io.space, s.io.mpi)
    if len(configs) < 2:
        return None
    return compile_study(s, f"{s.study.name}-preselect", s.io.preselect.repetitions, configs)


def _check_resumable(db, s):
    """With --resume, every study already in the database must have been compiled from the
    same I/O study: checked before anything is printed or run. The sweep's text depends on
    the pre-selection's decision, which is recomputed from the stored runs."""
    from ..study.store.store import Store
    from . import preselect
    from .sweep import compile_study, expand

    if not db.exists():
        return
    from ..study.execute.runner import check_resume

    check_resume(db, [f"{s.study.name}-preselect", s.study.name])
    store = Store(db, readonly=True)

    def same(name, text):
        row = store.study(name)
        if row is not None and row["config_toml"] != text:
            raise NearmetalError(f"study '{name}' in {db} was planned from a different study file; "
                                 f"resume needs the same file (or use a new --db)")
        return row

    try:
        fixed = {}
        compiled = _preselect_study(s)
        if compiled:
            row = same(compiled[0].study.name, compiled[1])
            if row is None or store.counts(row["id"]).get("planned"):
                return  # the sweep is compiled only after a complete pre-selection
            decision = preselect.decide(s.io.space, store, row["id"], s.io.preselect, s.io.metric)
            fixed = preselect.fixed_values(s.io.space, decision)
        _, text = compile_study(s, s.study.name, s.study.repetitions, expand(s.io.space, s.io.mpi, fixed))
        same(s.study.name, text)
    finally:
        store.close()


def _refuse_existing(db, names):
    """Without --resume, a sweep already in the database is refused before anything is printed or run."""
    from ..study.store.store import Store

    if not db.exists():
        return
    store = Store(db, readonly=True)
    try:
        for name in names:
            if store.study(name) is not None:
                raise NearmetalError(f"study '{name}' already exists in {db}: use --resume to complete the sweep, "
                                     f"or --db for a new database")
    finally:
        store.close()


def _check_failures(store, study_id, name, say):
    runs = store.runs(study_id)
    from ..study.records import NOT_RESULTS

    failed = [r for r in runs if r["status"] in NOT_RESULTS]
    if not failed:
        return
    from ..analysis.failure_line import failure_line
    from ..study.records import STDERR_TAIL

    why = failure_line(failed[0]["stderr_tail"], STDERR_TAIL) or failed[0]["status"]
    if len(failed) == len(runs):
        raise NearmetalError(f"every run of '{name}' failed; the first ({failed[0]['benchmark']}): {why}")
    say(f"[yellow]{len(failed)} of {len(runs)} runs of '{name}' failed[/]; the first ({failed[0]['benchmark']}): {why}")


def _dry_run(s):
    from . import preselect
    from .sweep import expand

    io = s.io
    out = sys.stdout.write
    pre = preselect.configurations(io.space, io.mpi) if io.preselect.enabled else []
    full = expand(io.space, io.mpi)
    variants = _variants(s)

    def runs(configs, reps):  # a configuration runs under the variants of its MPI families
        cells = sum(1 for _, mpis in configs for v in variants if v["mpi"] in mpis)
        return cells * (reps + s.study.warmup)
    if pre and len(pre) > 1:
        out(f"# pre-selection '{s.study.name}-preselect': {len(pre)} configurations, "
            f"{runs(pre, io.preselect.repetitions)} runs\n")
        for cfg, mpis in pre:
            env = "".join(f"{k}={v} " for k, v in cfg.env().items())
            out(f"{cfg.label()}  [{', '.join(mpis)}]\n      {env}nm-iobench "
                f"{shlex.join(cfg.kernel_args(io.grid, io.steps, io.layout, io.types, io.nodes))}\n")
    out(f"# sweep '{s.study.name}': at most {len(full)} configurations, "
        f"{runs(full, s.study.repetitions)} runs (fewer when pre-selection fixes parameters)\n")
    for cfg, mpis in full:
        out(f"{cfg.label()}  [{', '.join(mpis)}]\n")
    return 0


def _variants(s):
    from .config import variants

    return variants(s)
