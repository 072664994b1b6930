"""The subcommands other than `run` (cli.py dispatches to them): bench, study, report,
import, doctor, image, kernels, cluster, io. Kept apart so `nearmetal run` imports none of
this."""

import sys

from .cli import _interrupt_status, _interrupted, _slurm_options
from .errors import NearmetalError


def _planned(args, program, program_args, ranks):
    """(RunRequest, Plan, scheduler) of a bench run: the launch options as `run` reads them."""
    from . import schedulers
    from .run import RunRequest, plan

    req = RunRequest(program, program_args, mode=args.mode, runtime=args.runtime, image=args.image, mpi=args.mpi,
                     ranks=ranks, ranks_per_node=args.ranks_per_node, threads=args.threads, env=_rank_env(args),
                     scheduler=args.scheduler, options=_slurm_options(args), workdir=args.workdir,
                     runtime_args=args.runtime_args, network=getattr(args, "network", None),
                     user=getattr(args, "user", None), gpus=getattr(args, "gpus", None))
    return req, plan(req), schedulers.get(req.scheduler)


def _rank_env(args):
    """--env, with the witness preloaded under --witness and the auditor under --audit."""
    env = dict(args.env)
    if args.witness:
        from .witness import rank_env

        env = rank_env(env)
        if getattr(args, "gpus", None):  # which libcuda, driver and GPU too (witness/gpu.py)
            from .witness.gpu import rank_env as gpu_env

            env = gpu_env(env)
    if getattr(args, "audit", False):
        from .audit import rank_env as audited

        env = audited(env)
    if getattr(args, "evidence", None):
        from .evidence.run_dir import rank_env as with_evidence

        env = with_evidence(env, args.evidence, args.mode, args.dry_run)
    return env


def cmd_bench(args):
    import json

    from . import kernels
    from .cli import refuse_ignored_options
    from .evidence import run_dir

    refuse_ignored_options(args)  # before anything is built or staged (the evidence library, a staging dir)
    if ":" in (args.kernel_args or []):  # the launcher would read it as its MPMD separator, past nearmetal's checks
        raise NearmetalError("bench launches one program: a lone ':' separates MPMD components, which "
                             "`nearmetal run` takes (run ... -- PROG_A ARGS : -n N -- PROG_B ARGS) and a study "
                             "measures as a benchmark with components (docs/study-files.md)")
    if args.run_program or args.preset or args.fom or args.success:
        if not args.run_program:
            raise NearmetalError("--preset, --fom and --success read a program's output: add --command")
        from .bench_program import bench_command

        return bench_command(args)
    if not args.kernel:
        raise NearmetalError("no kernel given: nearmetal bench KERNEL [OPTIONS] [-- KERNEL_ARGS], "
                             "or nearmetal bench --command [OPTIONS] -- PROGRAM ARGS")
    if getattr(args, "no_evidence", False):  # a kernel's launch preloads no evidence unless --evidence DIR
        raise NearmetalError("--no-evidence is for bench --command: a kernel's launch records no evidence "
                             "unless --evidence DIR asks for it")
    spec = kernels.get(args.kernel)
    kargs = args.kernel_args or list(spec.default_args)
    ranks = args.ranks if args.ranks is not None else max(spec.min_ranks, 2 if spec.min_ranks > 1 else 1)
    if ranks < spec.min_ranks or (spec.max_ranks and ranks > spec.max_ranks):
        limit = f"{spec.min_ranks}..{spec.max_ranks}" if spec.max_ranks else f"at least {spec.min_ranks}"
        raise NearmetalError(f"kernel '{spec.name}' needs {limit} ranks, got -n {ranks}")
    req, p, scheduler = _planned(args, spec.program, kargs, ranks)
    if args.dry_run:
        print(scheduler.describe(p, req, [req]))
        return 0
    if args.verbose:
        print(p.describe(), file=sys.stderr)
    before = run_dir.before_launch(args)
    outcome = scheduler.run(p, req, [req], timeout=args.timeout)
    if outcome.status in ("not started", "timeout"):
        raise NearmetalError(f"kernel '{spec.name}': {outcome.reason}")
    if outcome.exit_status == 0:
        run_dir.check_launch(args, before, p)
    rc, out, err = outcome.exit_status, outcome.stdout, outcome.stderr  # a batch job's stderr ends with Slurm's reason
    from .bench_program import launch_params

    own = list(dict.fromkeys(_kernel_lines(err, spec.program)))  # every rank may say the same line
    # The kernel exited with its own reason: that is the error, and the launcher's banners around it
    # only repeat that a rank exited non-zero (--verbose keeps them). A signal (128 + N) is the
    # launcher's to tell: then its whole output.
    said_itself = rc != 0 and bool(own) and rc < 128 and not args.verbose
    try:
        records = kernels.parse(spec, out, launch_params(args, p, req, ranks))
    except (ValueError, KeyError, IndexError) as e:  # output cut short (a rank killed) or not the kernel's
        if rc == 0:
            raise NearmetalError(f"kernel '{spec.name}' failed: output nearmetal cannot read "
                                 f"({type(e).__name__}: {e})") from None
        records = None
    if records is not None and args.json:
        for r in records:
            print(json.dumps(r))
    elif not args.json:
        sys.stdout.write(out)
    if said_itself:
        sys.stderr.write("".join(line + "\n" for line in own[:-1]))
        raise NearmetalError(f"kernel '{spec.name}' failed with exit status {rc}: {own[-1]} "
                             f"(--verbose shows the launcher's whole output)")
    if err.strip():
        sys.stderr.write(err)
    if rc != 0:
        reason = _kernel_reason(err, spec.program)
        raise NearmetalError(f"kernel '{spec.name}' failed with exit status {rc}" + (f": {reason}" if reason else ""))
    if not records:
        raise NearmetalError(f"kernel '{spec.name}' printed no results")
    return 0


def cmd_study(args):
    from pathlib import Path

    from .console import Console

    from .study.execute import runner
    from .study.execute.executor import Executor

    from .study.execute import preflight

    cfg, text = runner.load(args.file)
    source = args.file or "built-in quickstart"
    if args.resume:  # in --dry-run too: refused as the real study would be
        runner.check_resume(Path(args.db) if args.db else runner.default_db(cfg.study.name), [cfg.study.name])
    if args.dry_run:  # the plan, then what would keep its cells from running: refused as a real study is
        runner.dry_run(cfg, print, args.db)
        sys.stdout.flush()
        preflight.check(cfg, source, say=lambda line: print(f"# {line}"))
        return 0
    # before any run, and before a database is made
    preflight.check(cfg, source, say=lambda line: print(f"nearmetal: {line}", file=sys.stderr))
    db = Path(args.db) if args.db else runner.default_db(cfg.study.name)
    out_dir = _out_dir(args.out, db)  # checked now: not after the last run is stored
    err = Console(stderr=True)
    say = lambda m: err.print(m, highlight=False)  # noqa: E731
    if args.submit:
        from .study.execute.submit import check

        check(cfg, args.file)
    store, study_id, new = runner.open_study(cfg, text, db, args.resume, builtin=args.file is None, say=say)
    from .study.execute import submit

    if args.submit:
        with store:
            submit.submit(cfg, args.file, store, study_id, db, say)
        return 0
    chain_job = submit.on_start(cfg, args.file, store, study_id, db, say)  # one of the study's own batch jobs
    err.print(f"study [bold]{cfg.study.name}[/]: {runner.runs_said(store, study_id)}; results in {db}", highlight=False)
    ex = Executor(cfg, store, study_id, console=err, progress=not args.no_progress)
    try:
        failed = runner.run(cfg, store, study_id, ex, say)
    except KeyboardInterrupt as e:
        total = sum(store.counts(study_id).values())
        finished = total - store.counts(study_id).get("planned", 0)
        resume = ["nearmetal", "study"] + ([args.file] if args.file else []) + ["--resume", "--db", str(db)]
        from .study.execute.executor import AllocationEnding

        import shlex

        # one line whatever the width (a pipe's 80 columns split the command to paste), quoted as a shell reads it
        err.print(f"{e if isinstance(e, AllocationEnding) else _interrupted(e)}: {finished} of {total} runs finished "
                  f"and stored; resume with: {shlex.join(resume)}", highlight=False, markup=False, soft_wrap=True)
        return _interrupt_status(e)
    if chain_job:
        submit.on_complete(cfg, store, study_id, chain_job, say)
    if cfg.study.explain:  # the causes of each slower answer, tested by ablation runs (explain/stage.py)
        from .explain.stage import run_stage

        run_stage(cfg, store, study_id, cfg.study.explain_budget, say, err)
    return _report(store, cfg.study.name, out_dir, "html", failed)


def cmd_explain(args):
    from .console import Console

    from .explain.stage import explain

    db = _study_db(args.db, args.study)
    err = Console(stderr=True)
    why = explain(db, args.study, args.budget, say=lambda m: err.print(m, highlight=False), console=err)
    from .report.why import render_why

    render_why(why, Console())
    if why.get("ran"):  # runs were added: the reports written before do not show them
        import shlex

        study = f" --study {shlex.quote(args.study)}" if args.study else ""
        err.print(f"the study's reports predate these ablation runs: `nearmetal report --db {shlex.quote(str(db))}{study}` "
                  "writes them again with their Why section", highlight=False, markup=False, soft_wrap=True)
    return 0


def cmd_report(args):
    from .study.store.store import Store

    db = _study_db(args.db, args.study)
    out_dir = _out_dir(args.out, db)
    store = Store(db, readonly=True)  # a report never writes the database (docs/store.md)
    try:
        return _report(store, args.study, out_dir, args.format, None)
    finally:
        store.close()


def cmd_import(args):
    from pathlib import Path

    from .study.store.importer import import_csv
    from .study.execute.runner import default_db

    if not 0 < args.margin < 1:
        raise NearmetalError(f"--margin must be between 0 and 1, got {args.margin}")
    db = Path(args.db) if args.db else default_db(args.study)
    out_dir = _out_dir(args.out, db)
    store, _, n = import_csv(args.csv, db, args.study, args.baseline, metric=args.metric, unit=args.unit,
                             margin=args.margin)
    try:
        print(f"imported {n} rows into study '{args.study}' in {db}")
        return _report(store, args.study, out_dir, "html", 0)
    finally:
        store.close()


def _study_db(given, study):
    """The database a report or explain reads: --db, else where `nearmetal study` puts the study
    named (results/NAME/study.db), else the quickstart's; a one-line error when that one is not there."""
    from pathlib import Path

    from .study.execute.runner import default_db

    if given:
        return Path(given)
    db = default_db(study or "quickstart")
    if not db.exists():
        whose = f"study '{study}'" if study else "the quickstart"
        others = [str(p) for p in sorted(Path("results").glob("*/study.db")) if p != db]
        raise NearmetalError(f"no results database at {db} (where `nearmetal study` puts {whose}): name one "
                             "with --db" + (f" (here: {', '.join(others[:3])})" if others else ""))
    return db


def _out_dir(out, db):
    """Where the report goes (--out, else beside the database), refused in one line when it
    cannot be created or written."""
    from pathlib import Path

    from .study.config.inputs import check_workdir

    path = Path(out) if out else Path(db).parent
    why = check_workdir(str(path))
    if why:
        raise NearmetalError(f"--out {path}: {why}" if out else f"cannot write the report beside {db}: {path}: {why}")
    return path


def _report(store, study_name, out_dir, fmt, failed):
    from .console import Console

    from .report import render_terminal, write_report
    from .analysis.analyze import analyze
    from .explain.why import analyses, section as why_section

    row = store.study(study_name) if study_name else next(iter(store.studies()), None)
    if row is None:
        analyze(store, study_name)  # says which study is missing, or that there is none
    analysis, every_block = analyses(store, study_name, row["id"])  # the study's own, without explain's runs
    # explain runs after the analysis, on what it found: why each slower answer is slower
    analysis["why"] = why_section(store, row["id"], analysis, every_block)
    console = Console()
    if fmt == "html" or failed is not None:
        render_terminal(analysis, console)
    path = write_report(analysis, out_dir, fmt)
    console.print(f"report: {path}", highlight=False)
    if failed is None or failed:  # report, or a study with failed runs: nothing measured is not a result
        _require_finished(analysis, store.path)
    return 0


def _require_finished(analysis, db=None):
    """A one-line error (after the report is written) when no run of the study finished."""
    by = analysis["runs"]["by_status"]
    if by.get("ok"):
        return
    name = analysis["study"]["name"]
    if db and set(by) <= {"planned"}:  # perhaps running now: its runner's PID, not "run it first"
        from .study.store.lock import refuse_if_held

        refuse_if_held(db, f"report of study '{name}' (no run finished yet)")
    counts = ", ".join(f"{n} {s}" for s, n in sorted(by.items())) or "no runs"
    why = ("run it first (nearmetal study FILE, or --resume)" if set(by) <= {"planned"}
           else "see why in the report's failures")
    raise NearmetalError(f"no finished runs in study '{name}': {counts}; {why}")


def _kernel_lines(stderr, program):
    """The stderr lines the kernel wrote itself ('nm-iobench: ...'), in order."""
    return [l.strip() for l in stderr.splitlines() if l.strip() and program in l.strip().split(":")[0]]


def _kernel_reason(stderr, program):
    """The kernel's own last word from stderr, skipping launcher banners (Open MPI's '-----')."""
    lines = [l.strip() for l in stderr.splitlines() if l.strip() and set(l.strip()) != {"-"}]
    return (_kernel_lines(stderr, program) or lines or [""])[-1]


def cmd_doctor(args):
    from . import doctor

    if args.clean_shm:
        print(doctor.clean_shm(), file=sys.stderr)
    report = doctor.collect(image=args.image, programs=args.program)
    if args.json:
        import json

        print(json.dumps(report, indent=2))
    else:
        from .console import Console

        doctor.render(report, Console())
    return 0


def cmd_presets(args):
    from .apps.preset_list import command

    return command(args)


def cmd_image(args):
    from .image.cli import command

    return command(args)


def cmd_kernels(args):
    from . import kernels, supervise
    from .discovery.mpi import discover

    print(f"nm-supervise: {supervise.binary()}")  # every launch runs under it: built with the kernels
    for fam in args.mpi or list(discover()):
        print(f"{fam}: {kernels.build(fam)}")
    return 0


def cmd_cluster(args):
    from .slurm.cluster import command

    return command(args.cluster_command, dir=args.dir, nodes=getattr(args, "nodes", None),
                   as_json=getattr(args, "json", False))


def cmd_io(args):
    from .io.cli import command

    return command(args)


def cmd_trace(args):
    """`nearmetal trace [OPTIONS] -- PROGRAM [ARGS]` and `nearmetal trace report DIR`."""
    import os
    import time

    from .trace import build as trace_build
    from .trace import command as tc

    if args.action == "report":
        if not args.trace_dir:
            raise NearmetalError("trace report needs a directory: nearmetal trace report DIR [--format html|md|json]")
        path = tc.report(args.trace_dir, args.format, threshold=args.threshold)
        if path:
            print(f"report: {path}")
        return 0
    if args.trace_dir or not getattr(args, "program_argv", None):
        raise NearmetalError("no program to trace: nearmetal trace [OPTIONS] -- PROGRAM [ARGS] "
                             "(or nearmetal trace report DIR)")
    program, program_args = args.program_argv[0], args.program_argv[1:]
    from .cli import refuse_ignored_options

    refuse_ignored_options(args)  # before the tracer is staged
    tc.check_program(program, args.mode)
    stage = os.path.join(os.path.dirname(trace_build.library()), "trace-DIR") if args.dry_run else tc.staging(bool(args.user))
    args.env = list(trace_build.rank_env(stage, args.layers, dict(args.env)).items())
    req, p, scheduler = _planned(args, program, program_args, args.ranks)
    if args.dry_run:
        print(scheduler.describe(p, req, [req]))
        return 0
    out, created = tc.out_dir(args.out)
    meta = {"argv": args.program_argv, "layers": args.layers or list(trace_build.DEFAULT_LAYERS), "mode": args.mode,
            "runtime": req.runtime, "mpi": p.components[0].installation["family"],
            "ranks": args.ranks, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    try:
        outcome = scheduler.run(p, req, [req], timeout=args.timeout)
    except BaseException as e:  # ^C, SIGTERM, an error: what the ranks wrote is kept, and said
        meta.update(status="interrupted" if isinstance(e, KeyboardInterrupt) else "error", exit_status=None)
        files = tc.collect(stage, out, meta)
        if isinstance(e, KeyboardInterrupt):
            print(f"nearmetal trace: {tc.kept_line(files, out)}", file=sys.stderr)
        raise
    meta.update(status=outcome.status, exit_status=outcome.exit_status)
    files = tc.collect(stage, out, meta)
    sys.stdout.write(outcome.stdout)
    sys.stderr.write(outcome.stderr)
    timed_out = outcome.status == "timeout"
    if outcome.status == "not started" or (timed_out and not files):
        raise NearmetalError(f"{program}: {outcome.reason}")
    if not files:
        raise NearmetalError(f"no trace was written by {program}'s ranks (is it an MPI program that ran?)")
    if outcome.exit_status and not timed_out and tc.discard_if_empty(out, created):
        raise NearmetalError(f"{program} exited with status {outcome.exit_status} before it made any traced call: "
                             f"no trace kept")
    tc.report_done(out, args.format, args.threshold)
    if timed_out:  # the ranks were killed: their last second of events is missing, and the report says so
        raise NearmetalError(f"{program}: {outcome.reason}; the trace up to then is in {out}")
    if outcome.exit_status:
        raise NearmetalError(f"{program} exited with status {outcome.exit_status} (its trace is in {out})")
    return 0
