"""The `nearmetal` command line: dispatch to subcommands.

Heavy modules (argparse, rich, pyelftools) are imported only where needed: `nearmetal
run` must add only milliseconds over the launcher it starts.
"""

import os
import sys

from .errors import NearmetalError


def cmd_run(args):
    from . import schedulers
    from .run import RunRequest, plan

    command = args.program_argv
    if command and command[0] == "--" and not getattr(args, "dashes_taken", False):
        command = command[1:]  # argparse's REMAINDER keeps the '--' that ends the options
    if not command:
        raise NearmetalError("no program given: nearmetal run [OPTIONS] -- PROGRAM [ARGS...]")
    segments = _split_components(command)
    first = segments[0]
    req = RunRequest(first[0], first[1:], mode=args.mode, runtime=args.runtime, image=args.image,
                     mpi=args.mpi, ranks=args.ranks, ranks_per_node=args.ranks_per_node,
                     threads=args.threads, env=dict(args.env), scheduler=getattr(args, "scheduler", None),
                     slurm=_slurm_options(args), workdir=args.workdir, runtime_args=args.runtime_args)
    more = [_component_request(seg, req, i) for i, seg in enumerate(segments[1:], start=2)]
    p = plan(req, more)
    if req.mode != "native" or any(r.mode != "native" for r in more):
        from .run import unseen_host_files

        for warning in unseen_host_files(p.components):
            print(f"nearmetal run: {warning}", file=sys.stderr)
    scheduler = schedulers.get(req.scheduler)
    if args.dry_run:
        print(scheduler.describe(p, req, [req] + more))
        return 0
    return scheduler.execute(p, req, [req] + more, verbose=args.verbose)  # locally: replaces this process


def _slurm_options(args):
    """--partition/--nodes/--time/--account/--export as the RunRequest's slurm dict (set ones only)."""
    pairs = (("partition", "partition"), ("nodes", "nodes"), ("time", "time"), ("account", "account"),
             ("export", "slurm_export"))
    options = {k: getattr(args, a) for k, a in pairs if getattr(args, a, None)}
    if not options:
        return options  # the hot path: slurm.options imports re
    from .slurm.options import check_slurm

    return check_slurm(options)  # the values go into a batch script: nothing may break out


def _split_components(argv):
    """PROGRAM ARGS [: [OPTIONS] -- PROGRAM ARGS]...: split at lone ':' tokens."""
    segments, cur = [], []
    for tok in argv:
        if tok == ":":
            segments.append(cur)
            cur = []
        else:
            cur.append(tok)
    segments.append(cur)
    if any(not s for s in segments):
        raise NearmetalError("empty MPMD component: write PROG_A ARGS : [-n N] -- PROG_B ARGS")
    return segments


def _component_request(segment, first, index):
    from .cli_parser import component_parser
    from .run import RunRequest

    if "--" in segment:
        cut = segment.index("--")
        opts, prog = segment[:cut], segment[cut + 1:]
    elif segment[0].startswith("-"):
        raise NearmetalError(f"MPMD component {index}: put '--' before its program")
    else:
        opts, prog = [], segment
    if not prog:
        raise NearmetalError(f"MPMD component {index}: no program after '--'")
    a = component_parser().parse_args(opts)
    return RunRequest(prog[0], prog[1:], mode=a.mode or first.mode, runtime=a.runtime or first.runtime,
                      image=a.image or first.image,
                      mpi=None, ranks=a.ranks, ranks_per_node=None, threads=a.threads or first.threads,
                      env={**first.env, **dict(a.env)}, scheduler=first.scheduler, slurm=first.slurm,
                      workdir=first.workdir, runtime_args=a.runtime_args or first.runtime_args)


def cmd_bench(args):
    import json

    from . import kernels, schedulers
    from .run import RunRequest, plan

    spec = kernels.get(args.kernel)
    kargs = args.kernel_args or list(spec.default_args)
    ranks = args.ranks if args.ranks is not None else max(spec.min_ranks, 2 if spec.min_ranks > 1 else 1)
    if ranks < spec.min_ranks or (spec.max_ranks and ranks > spec.max_ranks):
        limit = f"{spec.min_ranks}..{spec.max_ranks}" if spec.max_ranks else f"at least {spec.min_ranks}"
        raise NearmetalError(f"kernel '{spec.name}' needs {limit} ranks, got -n {ranks}")
    req = RunRequest(spec.program, kargs, mode=args.mode, runtime=args.runtime, image=args.image, mpi=args.mpi,
                     ranks=ranks, ranks_per_node=args.ranks_per_node, threads=args.threads, env=dict(args.env),
                     scheduler=args.scheduler, slurm=_slurm_options(args), workdir=args.workdir,
                     runtime_args=args.runtime_args)
    p = plan(req)
    scheduler = schedulers.get(req.scheduler)
    if args.dry_run:
        print(scheduler.describe(p, req, [req]))
        return 0
    if args.verbose:
        print(p.describe(), file=sys.stderr)
    outcome = scheduler.run(p, req, [req], timeout=args.timeout)
    if outcome.status in ("not started", "timeout"):
        raise NearmetalError(f"kernel '{spec.name}': {outcome.reason}")
    rc, out, err = outcome.exit_status, outcome.stdout, outcome.stderr  # a batch job's stderr ends with Slurm's reason
    resolved = p.components[0]
    params = {"mode": args.mode, "mpi": resolved.mpi["family"], "ranks": ranks, "threads": args.threads}
    if req.scheduler != schedulers.DEFAULT:
        params["scheduler"] = req.scheduler
    if args.mode != "native":
        params |= {"runtime": args.runtime, "image": resolved.image.name}
    records = kernels.parse(spec, out, params)
    if args.json:
        for r in records:
            print(json.dumps(r))
    else:
        sys.stdout.write(out)
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

    from rich.console import Console

    from .study import runner
    from .study.executor import Executor

    cfg, text = runner.load(args.file)
    if args.dry_run:
        runner.dry_run(cfg, print)
        return 0
    db = Path(args.db) if args.db else runner.default_db(cfg.study.name)
    out_dir = _out_dir(args.out, db)  # checked now: not after the last run is stored
    err = Console(stderr=True)
    say = lambda m: err.print(m, highlight=False)  # noqa: E731
    store, study_id, new = runner.prepare(cfg, text, db, args.resume, builtin=args.file is None, say=say)
    counts = store.counts(study_id)
    total = sum(counts.values())
    err.print(f"study [bold]{cfg.study.name}[/]: {total} runs, {counts.get('planned', 0)} to run; results in {db}",
              highlight=False)
    ex = Executor(cfg, store, study_id, console=err, progress=not args.no_progress)
    try:
        failed = runner.run(cfg, store, study_id, ex, say)
    except KeyboardInterrupt as e:
        total = sum(store.counts(study_id).values())
        finished = total - store.counts(study_id).get("planned", 0)
        resume = ["nearmetal", "study"] + ([args.file] if args.file else []) + ["--resume", "--db", str(db)]
        err.print(f"{_interrupted(e)}: {finished} of {total} runs finished and stored; resume with: "
                  f"{' '.join(resume)}", highlight=False)
        return _interrupt_status(e)
    return _report(store, cfg.study.name, out_dir, "html", failed)


def cmd_report(args):
    from pathlib import Path

    from .study.store import Store

    db = Path(args.db) if args.db else Path("results") / "quickstart" / "study.db"
    out_dir = _out_dir(args.out, db)
    store = Store(db, readonly=True)  # a report never writes the database (docs/store.md)
    try:
        return _report(store, args.study, out_dir, args.format, None)
    finally:
        store.close()


def cmd_import(args):
    from pathlib import Path

    from .study.importer import import_csv
    from .study.runner import default_db

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


def _out_dir(out, db):
    """Where the report goes (--out, else beside the database), refused in one line when it
    cannot be created or written."""
    from pathlib import Path

    from .study.inputs import check_workdir

    path = Path(out) if out else Path(db).parent
    why = check_workdir(str(path))
    if why:
        raise NearmetalError(f"--out {path}: {why}" if out else f"cannot write the report beside {db}: {path}: {why}")
    return path


def _report(store, study_name, out_dir, fmt, failed):
    from rich.console import Console

    from .report import render_terminal, write_report
    from .study.analysis import analyze

    analysis = analyze(store, study_name)
    console = Console()
    if fmt == "html" or failed is not None:
        render_terminal(analysis, console)
    path = write_report(analysis, out_dir, fmt)
    console.print(f"report: {path}", highlight=False)
    return 0


def _kernel_reason(stderr, program):
    """The kernel's own last word from stderr, skipping launcher banners (Open MPI's '-----')."""
    lines = [l.strip() for l in stderr.splitlines() if l.strip() and set(l.strip()) != {"-"}]
    own = [l for l in lines if program in l.split(":")[0]]
    return (own or lines or [""])[-1]


def cmd_doctor(args):
    from . import doctor

    report = doctor.collect(image=args.image, programs=args.program)
    if args.json:
        import json

        print(json.dumps(report, indent=2))
    else:
        from rich.console import Console

        doctor.render(report, Console())
    return 0


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


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP: handled exactly as an interrupt (^C), the exit status says which."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def _on_terminate(signum, frame):
    raise Terminated(signum)


def _interrupted(e):
    return "terminated" if isinstance(e, Terminated) else "interrupted"


def _interrupt_status(e):
    return 128 + e.signum if isinstance(e, Terminated) else 130


COMMANDS = {"run": cmd_run, "bench": cmd_bench, "study": cmd_study, "report": cmd_report, "import": cmd_import, "doctor": cmd_doctor, "image": cmd_image, "kernels": cmd_kernels, "cluster": cmd_cluster, "io": cmd_io}


class _Args:
    """Parsed options, attribute-compatible with argparse's Namespace."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


_RUN_VALUE_OPTS = {"--mode": "mode", "--runtime": "runtime", "--image": "image", "--mpi": "mpi",
                   "-n": "ranks", "--ranks-per-node": "ranks_per_node", "--threads": "threads", "--env": "env",
                   "--workdir": "workdir", "--runtime-arg": "runtime_args"}
_RUN_FLAGS = {"--dry-run": "dry_run", "-v": "verbose", "--verbose": "verbose"}


def _run_choices(key):
    """The registries' names: listing a package's files, no backend imported."""
    from . import choices

    return {"mode": choices.modes, "runtime": choices.runtimes, "mpi": choices.mpis}[key]()


def fast_parse_run(argv):
    """Parse a well-formed `run` command line without argparse; None means "let argparse
    handle it" (help, abbreviations, anything invalid), so messages come from one place."""
    a = dict(mode="native", runtime=_run_choices("runtime")[0], image=None, mpi=None, ranks=2, ranks_per_node=None,
             threads=1, env=[], workdir=None, runtime_args=[], dry_run=False, verbose=False, program_argv=[], command="run",
             dashes_taken=False)
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok == "--":
            a["program_argv"] = argv[i + 1:]
            a["dashes_taken"] = True  # the '--' is gone already: cmd_run must not drop a second one
            break
        if not tok.startswith("-") or tok == "-":
            a["program_argv"] = argv[i:]
            break
        if tok in _RUN_FLAGS:
            a[_RUN_FLAGS[tok]] = True
            i += 1
            continue
        name, eq, value = tok.partition("=")
        if name not in _RUN_VALUE_OPTS:
            return None
        if not eq:
            if i + 1 >= len(argv) or argv[i + 1].startswith("-"):
                return None
            value = argv[i + 1]
            i += 1
        i += 1
        key = _RUN_VALUE_OPTS[name]
        if key in ("mode", "runtime", "mpi") and value not in _run_choices(key):
            return None
        if key in ("ranks", "ranks_per_node", "threads"):
            limit = 1024 if key == "threads" else 1_000_000  # as study files (study.config): argparse says so
            # isdigit() takes '²', which int() refuses; int() reads what isdecimal() takes
            # (any script's digits), up to its length limit: argparse says why otherwise
            if not (value.isdecimal() and len(value) <= 7) or not 1 <= int(value) <= limit:
                return None
            a[key] = int(value)
        elif key == "env":
            k, sep, v = value.partition("=")
            if not sep or not k or not k.replace("_", "a").isalnum() or k[0].isdigit():
                return None
            a["env"].append((k, v))
        elif key == "runtime_args":
            a["runtime_args"].append(value)
        else:
            a[key] = value
    return _Args(**a)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = fast_parse_run(argv[1:]) if argv and argv[0] == "run" else None
    if args is None:
        from .cli_parser import SUBCOMMANDS, build_parser

        only = argv[0] if argv and argv[0] in SUBCOMMANDS else None
        extra = []
        if only == "bench" and "--" in argv:
            # argparse's REMAINDER after a positional swallows options: split by hand.
            cut = argv.index("--")
            argv, extra = argv[:cut], argv[cut + 1:]
        args = build_parser(only).parse_args(argv)
        if only == "bench":
            args.kernel_args = extra
    previous = {}
    if args.command != "run":  # `run` becomes nm-supervise, which ends the job on SIGTERM itself
        import signal

        previous = {sig: signal.signal(sig, _on_terminate) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        return COMMANDS[args.command](args)
    except NearmetalError as e:
        from .study.inputs import one_line  # messages quote user strings: a newline must not split the error

        print(f"nearmetal {args.command}: error: {one_line(str(e))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        print(f"nearmetal {args.command}: {_interrupted(e)}", file=sys.stderr)
        return _interrupt_status(e)
    except BrokenPipeError:
        # Output piped into `head` and closed: not an error worth a traceback.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    finally:
        if previous:  # main() also runs in-process (tests): leave the caller's handlers as they were
            import signal

            for sig, handler in previous.items():
                signal.signal(sig, handler)


if __name__ == "__main__":
    sys.exit(main())
