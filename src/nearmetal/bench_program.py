"""`nearmetal bench --command`: any program launched as `run` launches it, its figures of
merit read as a study's program benchmark reads them, and the records it prints (--json) in
the form kernels' records have (schemas/bench-record.schema.json)."""

import sys

from . import kernels
from .commands import _planned
from .evidence import run_dir
from .errors import NearmetalError
from .models import in_container


def launch_params(args, p, req, ranks):
    """The launch as a bench record's params say it (schemas/bench-record.schema.json)."""
    from . import schedulers

    resolved = p.components[0]
    params = {"mode": args.mode, "mpi": resolved.installation["family"], "ranks": ranks, "threads": args.threads}
    if req.scheduler != schedulers.DEFAULT:
        params["scheduler"] = req.scheduler
    if in_container(args.mode):
        params |= {"runtime": req.runtime, "image": resolved.image.name}
    return params


def bench_command(args):
    """`bench --command`: any program, launched as `run` launches it, with its figures of
    merit read as a study's program benchmark reads them."""
    from pydantic import ValidationError

    from .apps import presets
    from .apps.fom import Fom

    if args.kernel:
        raise NearmetalError(f"--command runs the program after '--', not kernel '{args.kernel}': drop one of them")
    if not args.kernel_args:
        raise NearmetalError("--command needs the program after '--': nearmetal bench --command [OPTIONS] -- PROGRAM ARGS")
    if args.preset is not None:
        presets.get(args.preset)   # a built-in or a valid NAME.toml: refused now, before the run
    foms = []
    for i, text in enumerate(args.fom):
        name, sep1, rest = text.partition(":")
        unit, sep2, regex = rest.partition(":")
        if not (sep1 and sep2):
            raise NearmetalError(f"--fom {text!r:.60}: write NAME:UNIT:REGEX, e.g. 'step:s:Time per step: ([0-9.]+)'")
        try:
            foms.append(Fom(name=name, unit=unit, regex=regex))
        except ValidationError as e:
            raise NearmetalError(f"--fom {name!r:.40}: {e.errors()[0]['msg'].removeprefix('Value error, ')}") from None
    if args.success is not None:
        from .apps.fom import pattern

        try:
            pattern(args.success)
        except ValueError as e:
            raise NearmetalError(f"--success {args.success!r:.60}: {e}") from None
    bench = _ProgramBench(args.kernel_args, args.preset, foms, args.success)
    if args.evidence and args.no_evidence:
        raise NearmetalError("--evidence DIR and --no-evidence contradict each other: drop one")
    if args.evidence or args.no_evidence:
        return _launch(args, bench)
    # as a study's runs: the ranks' evidence, read to tell one MPI job from N jobs of one rank each
    import shutil

    from .evidence.collect import staging

    args.evidence = staging(other_account=bool(args.user), dry=args.dry_run)
    try:
        return _launch(args, bench)
    finally:
        if not args.dry_run:
            shutil.rmtree(args.evidence, ignore_errors=True)


def _launch(args, bench):
    """The one launch of `bench --command` and its records printed (--evidence set)."""
    import json
    import time

    from .apps.fom import FomError
    from .study.config.program import files_read, read_outputs, records

    req, p, scheduler = _planned(args, args.kernel_args[0], args.kernel_args[1:], args.ranks or 2)
    if args.dry_run:
        print(scheduler.describe(p, req, [req]))
        return 0
    if in_container(req.mode):
        from .run import unseen_host_files

        for warning in unseen_host_files(p.components):
            print(f"nearmetal bench: {warning}", file=sys.stderr)
    before = run_dir.before_launch(args)
    t0 = time.perf_counter()
    outcome = scheduler.run(p, req, [req], timeout=args.timeout)
    wall = time.perf_counter() - t0
    if outcome.status in ("not started", "timeout"):
        raise NearmetalError(f"{req.program}: {outcome.reason}")
    # --json: stdout holds the records only; the program's own output goes to stderr
    (sys.stderr if args.json else sys.stdout).write(outcome.stdout)
    sys.stderr.write(outcome.stderr)
    if outcome.exit_status != 0:
        raise NearmetalError(f"{req.program} failed with exit status {outcome.exit_status}")
    run_dir.check_launch(args, before, p)
    try:
        found = records(bench, read_outputs(args.workdir, files_read(bench), outcome.stdout, outcome.stderr), wall)
    except FomError as e:
        raise NearmetalError(str(e)) from None
    params = launch_params(args, p, req, req.ranks)
    for r in found:
        if args.json:  # a record as a kernel's: kernel "command", the point with the launch in params
            print(json.dumps({"kernel": kernels.PROGRAM.name, "params": {**params, **r["point"]}, "metric": r["metric"],
                              "value": r["value"], "unit": r["unit"]}))
        else:
            point = "".join(f" {k}={v}" for k, v in r["point"].items())
            print(f"nearmetal: {r['metric']}{point} = {r['value']:g} {r['unit']}".rstrip())
    return 0


class _ProgramBench:
    """What study/program.records needs of a benchmark, for a one-off run."""

    def __init__(self, command, preset, foms, success):
        self.command, self.preset, self.fom, self.success = command, preset, foms, success
