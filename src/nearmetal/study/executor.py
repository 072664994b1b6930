"""Running a study's planned runs, one subprocess (process group) each, storing each
result the moment it finishes.

A run that fails, times out or cannot even be planned is recorded with its status,
exit code and the tail of its stderr, and the study goes on.
"""

import os
import platform
import sys
import time
from datetime import datetime, timezone

from .. import __version__
from ..errors import NearmetalError

STDERR_TAIL = 2000


class AllocationEnding(KeyboardInterrupt):
    """The allocation the study runs in is ending: stop as on an interrupt, the run unstored."""


def _now():
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class Executor:
    def __init__(self, config, store, study_id, console=None, progress=True):
        self.config, self.store, self.study_id = config, store, study_id
        self.console, self.progress = console, progress
        self._plans = {}      # cell key -> (Plan, RunRequest) or NearmetalError
        self._contexts = {}   # cell key -> context id
        self._runtime_versions = {}
        self._static = None
        self._traced = {}     # cell key -> (staging directory, layers) of a `trace = true` benchmark
        self._image_ctx = {}  # cell key -> how its image is read: format, placement, cold cache
        from .image_variant import Placer

        self._placer = Placer(dry=store is None)

    # -- planning, cached per cell: argv and environment do not change between repetitions
    def plan_for(self, row):
        key = row["run_key"].rsplit("#", 1)[0]
        if key not in self._plans:
            import json

            from .. import kernels, schedulers
            from ..run import RunRequest, plan
            from .config import make_workdir

            variant = json.loads(row["variant_json"])
            bench = next(b for b in self.config.benchmark if b.label == row["benchmark"])
            from .program import hand_over, large_inputs, working_dir

            workdir, own_dir = working_dir(self.config, bench, variant, key, self.store)
            if bench.is_program():  # any program: its own argv
                spec, program, args = None, bench.command[0], bench.command[1:]
            else:
                spec = kernels.get(bench.kernel)
                program, args = spec.program, list(bench.args or spec.default_args)
            from .cell_env import rank_env

            env = rank_env(self.config, bench, variant)
            if bench.trace_layers() is not None:  # the I/O tracer in the ranks (study/traced.py)
                from .traced import staging_env

                env, stage = staging_env(env, bench.trace_layers(), dry=self.store is None)
                self._traced[key] = (stage, bench.trace_layers())
            scheduler = schedulers.get(self.config.study.scheduler)
            options = {k: v for k, v in self.config.slurm.model_dump().items() if v}
            from . import placement

            if scheduler.multi_node and placement.uses_nodes(self.config):  # each cell its own nodes
                options["nodes"] = placement.nodes(variant, row["ranks"])
            from .mpmd import more_requests, parts

            components = parts(bench, args)  # a heterogeneous job: [(args, ranks)] per component
            if components:
                args = components[0][0]
            req = RunRequest(program, args, mode=variant["mode"], ranks_per_node=variant.get("ranks_per_node"),
                             runtime=variant["runtime"], image=None, mpi=variant["mpi"],
                             ranks=components[0][1] if components else row["ranks"], threads=row["threads"], env=env,
                             scheduler=scheduler.name, slurm=options, workdir=workdir,
                             runtime_args=variant.get("runtime_args", ()), network=variant.get("network"),
                             user=variant.get("user"))
            if spec is None:
                req.workdir_binds = [(p, os.path.basename(p.rstrip("/"))) for p in large_inputs(bench.inputs)]
            try:
                req.image = self._image_of(key, variant)
                req.slurm = scheduler.options(options, self.config.study.timeout)
                dry = self.store is None
                if workdir and not dry:  # created when first planned; a dry run creates nothing
                    make_workdir(workdir)
                    if own_dir:  # nearmetal's own run directory: the account's, for a `user` variant
                        hand_over(workdir, req.user)
                if components:
                    why = scheduler.heterogeneous_problem()
                    if why:
                        raise NearmetalError(why)
                planned = plan(req, more_requests(req, components[1:]), check_paths=not dry)
                if not dry:  # e.g. podman's import of the image for an account: not inside a run's time
                    planned.prepare()
                self._plans[key] = (planned, req, spec, bench)
            except NearmetalError as e:
                self._plans[key] = e
            except (OSError, ValueError, RuntimeError) as e:  # a path or value no check foresaw: cannot run
                self._plans[key] = NearmetalError(f"cannot plan this run: {getattr(e, 'strerror', None) or e}")
        return key, self._plans[key]

    def _image_of(self, key, variant):
        """The image a variant's runs use (its format, a placed copy), and whether the page
        cache is dropped before each run (study/image_variant.py)."""
        from ..image.formats import ROOTFS
        from .image_variant import check_cold, named_format

        extra = {}
        if variant.get("cold"):
            why = check_cold()
            if why:
                raise NearmetalError(why)
            extra["cold_cache"] = True
        spec = self._placer.image_spec(variant)
        if spec is not None and (variant.get("image_format") or variant.get("image_place")):
            extra["image"] = {"format": named_format(spec) if not os.path.isdir(spec) else ROOTFS, "path": spec,
                              "place": variant.get("image_place") or None}
        self._image_ctx[key] = extra
        return spec

    def _static_context(self):
        if self._static is None:
            from ..discovery import cpu
            from ..discovery.mpi import discover

            u = platform.uname()
            self._static = {
                "host": u.node, "kernel": f"{u.system} {u.release}", "machine": u.machine,
                "fabrics": _rdma_devices(),
                "cpu": cpu.describe(), "nearmetal_version": __version__,
                "mpi": {f: {"version": m["version"], "library": m["library"]} for f, m in discover().items()},
            }
        return self._static

    def _runtime_version(self, name):
        if name not in self._runtime_versions:
            from .. import runtimes

            self._runtime_versions[name] = runtimes.get(name).version()
        return self._runtime_versions[name]

    def context_for(self, key, resolved, program=None, witnessed=None, transport=None):
        """The stored context of a cell's runs, from its resolved launch (resolve.Resolved);
        program: (benchmark, its first run's outputs) of a program benchmark, whose file,
        version and inputs the context records (study/provenance.py); witnessed: what its
        first run's ranks said of the MPI library they ran (witness/)."""
        if key not in self._contexts:
            ctx = dict(self._static_context())
            if program is not None:
                from .provenance import of_program

                ctx["program"] = of_program(resolved, *program)
            if witnessed is not None:
                ctx["witness"] = witnessed
            if transport is not None:  # what the ranks used between them (families/_transport.py)
                ctx["transport"] = transport
            if _network(resolved).emulated:  # the host's own network is not recorded: older contexts stay
                ctx["network"] = resolved.network
            if resolved.account is not None:  # the ranks ran as this account (privilege.py)
                ctx["user"] = {"name": resolved.account.name, "uid": resolved.account.uid}
            # the job's nodes: one where the job runs on this machine, else the nodes it asked for
            ctx["nodes"] = 1 if resolved.scheduler.job_is_child else int((resolved.options or {}).get("nodes") or 1)
            extra = self._image_ctx.get(key) or {}
            if extra.get("cold_cache"):
                ctx["cold_cache"] = True
            ctx["mode"] = resolved.mode
            if resolved.in_container:
                name = resolved.runtime.name
                ctx["runtime"] = {"name": name, "version": self._runtime_version(name),
                                  **resolved.runtime.context(resolved.runtime_args)}
                image = resolved.image
                ctx["image"] = {"name": image.name, "digest": image.meta.get("digest"), "distro": image.distro}
                from ..image import formats

                for name in formats.names():  # what each format records (SquashFS: whether it was named)
                    ctx["image"].update(formats.get(name).run_context(image, named=name == resolved.image_format))
                ctx["image"].update(extra.get("image") or {})
            self._contexts[key] = self.store.context_id(ctx)
        return self._contexts[key]

    # -- one run
    def execute(self, row):
        """Run one planned run and store its outcome; anything that keeps it from starting
        (planning, exec limits, a refused batch job) is a failed run with the reason, never
        a crashed study."""
        started = _now()
        try:
            key, planned = self.plan_for(row)
            if isinstance(planned, NearmetalError):
                raise planned
            outcome = self._launch(row, planned, cold=(self._image_ctx.get(key) or {}).get("cold_cache", False))
        except NearmetalError as e:
            self.store.finish_run(row["id"], "failed", None, [], {}, None, started, 0.0, f"not started: {e}", [])
            return "failed"
        status, returncode, out, err, wall, load = outcome
        p, req, spec, bench = planned
        from ..families._transport import without_reports

        transport = self._transport(p.components[0], err) if key not in self._contexts else None
        err = without_reports(err)  # the report lines asked for: read above, not the program's words
        records = []
        if status == "ok" and returncode != 0:
            status = "failed"
        texts = None
        if spec is None:  # a program: its FOMs and wall time; its outputs also tell its version
            from .program import read_outputs

            texts = read_outputs(req.workdir, bench.files_read(), out, err)
            if status == "ok":
                records, err = self._program_records(bench, texts, err, wall)
                if not records:
                    status = "failed"
        elif status == "ok":
            records, err = self._records(spec, bench, out, err)
            if not records:
                status, err = "failed", f"{err}\nno results in the kernel's output"
        witnessed = None
        if self.config.study.witness:
            from ..witness import parse

            witnessed = [{k: w.get(k) for k in ("rank", "program", "library", "inode", "version")} for w in parse(err)]
        ctx = self.context_for(key, p.components[0], program=(bench, texts) if spec is None else None,
                               witnessed=witnessed, transport=transport)
        if key in self._traced:
            from .traced import keep

            stage, layers = self._traced[key]
            keep(stage, self.store.path, self.config.study.name, row, status, returncode, layers)
        tail = (err or "")[-STDERR_TAIL:] if status != "ok" else None
        self.store.finish_run(row["id"], status, returncode, p.argv, p.env_delta, ctx, started, wall, tail, records,
                              load=load)
        return status

    def _transport(self, resolved, err):
        """The transport summary of a run's ranks; a TCP fallback between ranks of one node is
        said at once (the progress console, else stderr)."""
        from ..families._transport import report, summary, warning

        transport = summary(report(err), one_machine=resolved.scheduler.job_is_child)
        line = warning(transport)
        if line and self.progress and not _network(resolved).emulated:  # emulated nodes talk over TCP by design
            print(f"{self.config.study.name}: {line}", file=sys.stderr)
        return transport

    def _launch(self, row, planned, cold=False):
        """(status, exit status, stdout, stderr, wall seconds, load) of one run. A batch job's id
        is stored while it is queued, so that a runner killed meanwhile leaves a trace that
        --resume cancels. load: how busy the machine was around the run (contention.figures;
        None unless the job's tree is this process's child: the local scheduler); with
        `quiet = true` the run first waits, at most quiet_wait seconds, for a quiet machine."""
        from .. import schedulers
        from . import contention

        p, req, spec, bench = planned
        if spec is None:  # a program benchmark: a fresh working directory with its inputs
            from .program import stage

            stage(req.workdir, bench.inputs, in_container=req.mode != "native", user=req.user)
        jobs = []
        scheduler, study = schedulers.get(req.scheduler), self.config.study
        quiet = waited = before = None
        if scheduler.job_is_child:
            if study.quiet:
                quiet, waited = contention.wait_quiet(study.quiet_wait)
            before = contention.snapshot()
        if cold:  # last, after staging inputs and waiting: nothing the run reads is in memory
            from .image_variant import drop_caches

            drop_caches()

        def submitted(job_id):
            jobs.append(job_id)
            self.store.record_job(self.study_id, row["id"], job_id)

        t0 = time.perf_counter()
        try:
            outcome = scheduler.run(p, req, p.components, timeout=study.timeout, on_submit=submitted)
        finally:
            for job_id in jobs:
                self.store.finish_job(job_id, "ended")
        wall = time.perf_counter() - t0
        after = before and contention.snapshot()
        load = after and dict(contention.figures(before, after), quiet=None if quiet is None else int(quiet),
                              quiet_wait_s=waited)
        if outcome.status == "not started":
            raise NearmetalError(outcome.reason)
        if (outcome.status != "ok" or outcome.exit_status) and scheduler.allocation_ending():
            raise AllocationEnding(f"batch job {scheduler.own_job()} is ending (its time limit, or cancelled): "
                                   f"the run it cut short stays planned")
        err = outcome.stderr
        if outcome.status == "timeout":  # the reason goes first: the tail keeps the end of the job's stderr
            err = f"nearmetal: {outcome.reason}\n{err}"
        # The store's statuses: a cancelled batch job is a failed run (Slurm's reason is in its
        # stderr); ok/failed is decided from the exit status and the output by the caller.
        status = {"timeout": "timeout", "cancelled": "failed"}.get(outcome.status, "ok")
        exit_status = outcome.exit_status if outcome.exit_status is not None or status == "timeout" else -1
        return status, exit_status, outcome.stdout, err, wall, load

    @staticmethod
    def _program_records(bench, texts, err, wall):
        """A program's records (its FOMs and wall time), or [] and the reason appended to err."""
        from ..apps.fom import FomError
        from .program import records

        try:
            found = records(bench, texts, wall)
        except FomError as e:
            return [], f"{err}\nnearmetal: {e}"
        wanted = set(bench.metrics)
        return [r for r in found if not wanted or r["metric"] in wanted], err

    @staticmethod
    def _records(spec, bench, out, err):
        from .. import kernels

        try:
            parsed = kernels.parse(spec, out, {})
        except Exception as e:  # a kernel printing garbage is a failed run, not a crashed study
            return [], f"{err}\nunparseable output: {e}"
        wanted = set(bench.metrics)
        return [{"metric": r["metric"], "unit": r["unit"], "value": r["value"], "point": r["params"]}
                for r in parsed if (not wanted or r["metric"] in wanted)
                and all(str(r["params"].get(k)) == str(v) for k, v in bench.where.items())], err

    def close(self):
        """Remove the traced cells' staging directories (their files were moved after each run)
        and the image copies placed for the runs."""
        import shutil

        for stage, _ in self._traced.values():
            shutil.rmtree(stage, ignore_errors=True)
        self._traced.clear()
        self._placer.close()  # the image copies placed for the runs
        self._plans.clear()  # their environments name those directories

    def cancel_leftover_jobs(self, say=None):
        """Batch jobs that a killed runner left queued or running: cancelled, and marked so;
        their runs are still planned and run again. The job ids cancelled."""
        from .. import schedulers

        ids = [row["job_id"] for row in self.store.open_jobs(self.study_id)]
        for job_id in ids:
            schedulers.get(self.config.study.scheduler).cancel(job_id)
            self.store.finish_job(job_id, "cancelled on resume")
        if ids and say:
            say(f"cancelled {len(ids)} batch job(s) left by an earlier runner: {', '.join(ids)}")
        return ids

    def run_all(self):
        pending = self.store.pending(self.study_id)
        done = failed = 0
        if not pending:
            return 0, 0
        bar = None
        if self.progress and self.console is not None and not self.console.is_terminal:
            bar = _PlainProgress(self.config.study.name, len(pending), self.console)
        elif self.progress:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                           TextColumn("failed: {task.fields[failed]}"), TimeElapsedColumn(), TextColumn("ETA"),
                           TimeRemainingColumn(), console=self.console, transient=False)
            task = bar.add_task(self.config.study.name, total=len(pending), failed=0)
            bar.start()
        try:
            for row in pending:
                status = self.execute(row)
                done += 1
                failed += status != "ok"
                if bar:
                    bar.update(task if not isinstance(bar, _PlainProgress) else None, advance=1, failed=failed)
        finally:
            if bar:
                bar.stop()
        return done, failed


class _PlainProgress:
    """Progress for output that is not a terminal (CI logs, batch jobs): a line now and then
    (every tenth of the runs, at most every 30 s, and at the end) instead of a bar that
    redraws invisibly and shows nothing for minutes."""

    EVERY_S = 30.0

    def __init__(self, name, total, console):
        self.name, self.total, self.console = name, total, console
        self.done = 0
        self.t0 = self.last = time.monotonic()
        self.step = max(1, total // 10)

    def update(self, task, advance, failed):
        self.done += advance
        now = time.monotonic()
        if self.done % self.step and now - self.last < self.EVERY_S and self.done != self.total:
            return
        self.last = now
        elapsed = now - self.t0
        eta = elapsed / self.done * (self.total - self.done)
        self.console.print(f"{self.name}: {self.done}/{self.total} runs, {failed} failed, {elapsed:.0f} s elapsed"
                           + (f", about {eta:.0f} s to go" if self.done < self.total else ""), highlight=False)

    def stop(self):
        pass


def _rdma_devices():
    """The host's RDMA devices (InfiniBand, Omni-Path, RoCE: /sys/class/infiniband), sorted."""
    try:
        return sorted(os.listdir("/sys/class/infiniband"))
    except OSError:
        return []


def _network(resolved):
    from .. import networks

    return networks.get(resolved.network)
