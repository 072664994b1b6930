"""The `nearmetal` command line: dispatch to subcommands.

Heavy modules (argparse, rich, pyelftools) are imported only where needed: `nearmetal
run` must add only milliseconds over the launcher it starts.
"""

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
                     options=_slurm_options(args), workdir=args.workdir, runtime_args=args.runtime_args,
                     network=getattr(args, "network", None), user=getattr(args, "user", None),
                     gpus=getattr(args, "gpus", None))
    more = [_component_request(seg, req, i) for i, seg in enumerate(segments[1:], start=2)]
    from .models import in_container

    if not any(in_container(r.mode) for r in [req] + more):  # a component's container may use them
        refuse_container_options(args.mode, args.runtime, args.image)
    if args.witness:  # every component's ranks preload the witness (witness/)
        from .witness import rank_env

        for_ranks = []
        for r in [req] + more:
            env = rank_env(r.env)
            if r.gpus or req.gpus:  # and which libcuda, driver and GPU (witness/gpu.py)
                from .witness.gpu import rank_env as gpu_env

                env = gpu_env(env)
            for_ranks.append(r.replace(env=env))
        req, *more = for_ranks
    if args.audit:  # every component's ranks under the rtld-audit library (audit/)
        from .audit import rank_env as audited

        req, *more = [r.replace(env=audited(r.env)) for r in [req] + more]
    if getattr(args, "evidence", None):  # every component's ranks write their evidence into DIR
        from .evidence.run_dir import rank_env as with_evidence

        req, *more = [r.replace(env=with_evidence(r.env, args.evidence, r.mode, args.dry_run)) for r in [req] + more]
    p = plan(req, more)
    if any(in_container(r.mode) for r in [req] + more):
        from .run import unseen_host_files

        for warning in unseen_host_files(p.components):
            print(f"nearmetal run: {warning}", file=sys.stderr)
    scheduler = schedulers.get(req.scheduler)
    if args.dry_run:
        print(scheduler.describe(p, req, [req] + more))
        return 0
    return scheduler.execute(p, req, [req] + more, verbose=args.verbose)  # locally: replaces this process


def _slurm_options(args):
    """--partition/--nodes/--time/--account/--export as the RunRequest's options dict (set ones only)."""
    pairs = (("partition", "partition"), ("nodes", "nodes"), ("time", "time"), ("account", "account"),
             ("export", "slurm_export"))
    options = {k: getattr(args, a) for k, a in pairs if getattr(args, a, None)}
    if not options:
        return options  # the hot path: slurm.options imports re
    from .slurm.options import check_slurm

    return check_slurm(options)  # the values go into a batch script: nothing may break out


def _said_as(args):
    """The command as the user typed it, its action included ('io best', 'trace report'), as
    argparse names it in its own errors."""
    action = next((getattr(args, k) for k in ("io_command", "image_command", "kernels_command", "cluster_command",
                                             "action") if isinstance(getattr(args, k, None), str)), None)
    return f"{args.command} {action}" if action else args.command


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


def refuse_container_options(mode, runtime, image, where=""):
    """--runtime or --image where no container runs would be ignored without a word: a user
    who forgot --mode would read native numbers under a container's name."""
    from .models import in_container, names

    given = [f"--{k} {v}" for k, v in (("runtime", runtime), ("image", image)) if v]
    if given and not in_container(mode):
        modes = " or ".join(f"--mode {n}" for n in names() if in_container(n))
        raise NearmetalError(f"{where}{' and '.join(given)} would be ignored: {mode} mode runs no container; "
                             f"use {modes}, or leave {' and '.join(g.split()[0] for g in given)} out")


def refuse_ignored_options(args):
    """refuse_container_options, and a batch scheduler's options where the scheduler takes none:
    said before anything is built or staged (run._validate says the second again for any request)."""
    from .run import refuse_batch_options

    refuse_container_options(args.mode, args.runtime, args.image)
    refuse_batch_options(getattr(args, "scheduler", None), _slurm_options(args))


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
    refuse_container_options(a.mode or first.mode, a.runtime, a.image, f"MPMD component {index}: ")
    return RunRequest(prog[0], prog[1:], mode=a.mode or first.mode, runtime=a.runtime or first.runtime,
                      image=a.image or first.image,
                      mpi=None, ranks=a.ranks, ranks_per_node=None, threads=a.threads or first.threads,
                      env={**first.env, **dict(a.env)}, scheduler=first.scheduler, options=first.options,
                      workdir=first.workdir, runtime_args=a.runtime_args or first.runtime_args)


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


def _command(name):
    """The function behind a subcommand. Only `run` lives here: the others (commands.py) are
    not imported on its hot path."""
    if name == "run":
        return cmd_run
    from . import commands

    return getattr(commands, f"cmd_{name}")


class _Args:
    """Parsed options, attribute-compatible with argparse's Namespace."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


_RUN_VALUE_OPTS = {"--mode": "mode", "--runtime": "runtime", "--image": "image", "--mpi": "mpi",
                   "-n": "ranks", "--ranks-per-node": "ranks_per_node", "--threads": "threads", "--env": "env",
                   "--workdir": "workdir", "--runtime-arg": "runtime_args", "--network": "network",
                   "--user": "user", "--gpus": "gpus", "--evidence": "evidence"}
_RUN_FLAGS = {"--dry-run": "dry_run", "-v": "verbose", "--verbose": "verbose", "--witness": "witness",
              "--audit": "audit"}


def _run_choices(key):
    """The registries' names: listing a package's files, no backend imported (asked of the
    registries directly, not through choices.py: one module less on the hot path)."""
    if key == "mode":
        from .models import names
    elif key == "runtime":
        from .runtimes import names
    elif key == "network":
        from .networks import names
    else:
        from .families import names
    return names()


def fast_parse_run(argv):
    """Parse a well-formed `run` command line without argparse; None means "let argparse
    handle it" (help, abbreviations, anything invalid), so messages come from one place."""
    a = dict(mode="native", runtime=None, image=None, mpi=None, ranks=2, ranks_per_node=None,
             threads=1, env=[], workdir=None, runtime_args=[], dry_run=False, verbose=False, witness=False,
             audit=False, evidence=None, network=None, user=None, gpus=None, program_argv=[], command="run",
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
        if key in ("mode", "runtime", "network") and value not in _run_choices(key):
            return None
        if key == "mpi" and value not in _run_choices(key):
            from .discovery.mpi import spec_problem  # FAMILY@/PREFIX: an installation under a prefix

            if "@" not in value or spec_problem(value):
                return None
        if key == "gpus":
            from .errors import NearmetalError as _Bad
            from .gpu.select import parse

            try:
                parse(value)
            except _Bad:
                return None  # argparse says what is wrong
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


def _refuse_unknown(parser, args, unknown):
    """argparse's 'unrecognized arguments', said by the subcommand (its --help) with the
    closest of its options: `run --mdoe hybrid` means --mode."""
    from .closest import closest

    sub = _subparser(parser, args.command)
    first = next((u for u in unknown if u.startswith("-")), unknown[0]).split("=", 1)[0]
    for action in list(sub._actions if sub is not None else ()):  # `io sweep --dry-rn`: sweep's own parser
        if isinstance(getattr(action, "choices", None), dict) and getattr(args, action.dest, None) in action.choices:
            sub = action.choices[getattr(args, action.dest)]
    # names compared without their dashes: a shared '--' made every option look alike (--bogus: --out)
    options = {o.lstrip("-"): o for o in (sub._option_string_actions if sub is not None else ()) if o.startswith("--")}
    near = options.get(closest(first.lstrip("-"), list(options), cutoff=0.7))  # 0.6 took --bogus for --gpus
    (sub or parser).error(f"unrecognized arguments: {' '.join(unknown)}" + (f"; the closest option is {near}"
                                                                          if near else ""))


def _subparser(parser, command):
    """The subcommand's own parser, read from argparse's table (private attributes)."""
    return next((a.choices.get(command) for a in parser._actions if isinstance(getattr(a, "choices", None), dict)), None)


def _refuse_unknown_options(parser, command, argv):
    """A '--name' that no option of the command starts with, refused as _refuse_unknown does."""
    import argparse

    sub = _subparser(parser, command)
    known = list(sub._option_string_actions) if sub is not None else []
    for tok in argv:
        name = tok.split("=", 1)[0]
        if name.startswith("--") and not any(k.startswith(name) for k in known):
            _refuse_unknown(parser, argparse.Namespace(command=command), [tok])


# the commands that read a study database (a damaged stored value: cli.main's one line)
DATABASE_COMMANDS = ("study", "report", "explain", "io")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = fast_parse_run(argv[1:]) if argv and argv[0] == "run" else None
    if args is None:
        from .cli_parser import SUBCOMMANDS, build_parser

        only = argv[0] if argv and argv[0] in SUBCOMMANDS else None
        extra = []
        if only in ("bench", "trace") and "--" in argv:
            # argparse's REMAINDER after a positional swallows options: split by hand.
            cut = argv.index("--")
            argv, extra = argv[:cut], argv[cut + 1:]
        if only == "trace" and argv[1:2] == ["report"]:  # options of its own, and its own --help
            from .cli_parser import _Parser
            from .trace.cli import parse_report

            args = parse_report(argv[2:], extra, _Parser)
        else:
            parser = build_parser(only)
            if only == "trace":  # its optional positional (report) would take a misspelt option's value first
                _refuse_unknown_options(parser, only, argv[1:])
            args, unknown = parser.parse_known_args(argv)
            if unknown:
                _refuse_unknown(parser, args, unknown)
            if only == "trace" and args.action == "report":  # `trace --layers posix report DIR`
                from .trace.cli import refuse_run_options

                refuse_run_options(_subparser(parser, "trace"), args)
            if only == "bench":
                args.kernel_args = extra
            elif only == "trace":
                args.program_argv = extra
    previous = {}
    if args.command != "run":  # `run` becomes nm-supervise, which ends the job on SIGTERM itself
        import signal

        previous = {sig: signal.signal(sig, _on_terminate) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        status = _command(args.command)(args)
        console = sys.modules.get("nearmetal.console")  # loaded where a command printed through it
        return console.BROKEN_PIPE_STATUS if console and console.reader_went_away() and not status else status
    except NearmetalError as e:
        from .study.config.inputs import one_line  # messages quote user strings: a newline must not split the error

        print(f"nearmetal {_said_as(args)}: error: {one_line(str(e))}", file=sys.stderr)
        return 2
    except ValueError as e:
        # JSON read from files is checked where it is read (safe_read, layouts); in a command that
        # reads a study database, what reaches here is a value stored in it that was damaged
        # outside nearmetal. json is looked up, not imported: `run`'s fast path never loads it.
        json = sys.modules.get("json")
        if json is None or not isinstance(e, json.JSONDecodeError) or args.command not in DATABASE_COMMANDS:
            raise
        print(f"nearmetal {_said_as(args)}: error: a value stored in the database is not valid JSON ({e.msg}, "
              f"character {e.pos}): the file was damaged outside nearmetal; keep a copy and re-run the study",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        print(f"nearmetal {_said_as(args)}: {_interrupted(e)}", file=sys.stderr)
        return _interrupt_status(e)
    except BrokenPipeError:
        # Output piped into `head` and closed: not an error worth a traceback (console.py)
        from .console import BROKEN_PIPE_STATUS, quiet

        quiet(sys.stdout)
        return BROKEN_PIPE_STATUS
    except OSError as e:
        # a file or the output could not be written (a full disk, /dev/full, a quota): one line on
        # stderr; output still buffered for stdout goes nowhere, or the exit's flush fails again
        import errno

        from .console import quiet

        try:
            sys.stdout.flush()
        except OSError:
            quiet(sys.stdout)
        if e.filename:
            what = f"{e.filename}: {e.strerror or e}"
        elif e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO):  # a write to no named file: the output
            what = f"writing its output failed: {e.strerror or e}"
        else:  # not a write's: said as what it is
            what = f"{type(e).__name__}: {e.strerror or e}"
        print(f"nearmetal {_said_as(args)}: error: {what}", file=sys.stderr)
        return 2
    finally:
        console = sys.modules.get("nearmetal.console")
        if console:  # a broken pipe before an error is this call's, not the next in-process main()'s
            console.reader_went_away()
        if previous:  # main() also runs in-process (tests): leave the caller's handlers as they were
            import signal

            for sig, handler in previous.items():
                signal.signal(sig, handler)


if __name__ == "__main__":
    sys.exit(main())
