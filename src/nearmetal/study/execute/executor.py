"""Running a study's planned runs, one subprocess (process group) each, storing each
result the moment it finishes.

A run that fails, times out or cannot even be planned is recorded with its status,
exit code and the tail of its stderr, and the study goes on. A run that hangs (past the
limit its cell's earlier runs set, study/execute/hang.py) is ended, stored as hung and run once
more. A program benchmark whose first run shows that its figures of merit or success line
do not match its output, and a cell one of whose runs was not one MPI job, have their other
runs stored as skipped, with the reason, unless the benchmark (or the study) says
`keep_going = true` (stops.py).
"""

import sys
import time
from datetime import datetime, timezone

from ... import proc
from ...errors import NearmetalError
from ..store import codec
from . import hang
from ..records import FAILED, HUNG, OK, PLANNED, SKIPPED, STDERR_TAIL, Launched, RunResult, stored_status
from .run_context import Contexts
from .stops import Stops, keep_going



class AllocationEnding(KeyboardInterrupt):
    """The allocation the study runs in is ending: stop as on an interrupt, the run unstored."""


def _now():
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class Executor:
    def __init__(self, config, store, study_id, console=None, progress=True, db_path=None):
        """db_path: without a store (--dry-run), the database the study would use."""
        self.config, self.store, self.study_id, self._db_path = config, store, study_id, db_path
        self.console, self.progress = console, progress
        self._launches = {}   # cell key -> cell_launch.CellLaunch
        self._benchmarks = {b.label: b for b in config.benchmark}
        self._contexts = Contexts(store)
        self._walls = None    # cell key -> wall seconds of its finished (ok) runs: the hang limit's base
        self._ran = set()     # benchmarks that have had a run (their first run is behind them)
        self._stops = Stops()
        from .image_variant import Placer

        self._placer = Placer(dry=store is None)

    def launch_for(self, cell):
        """The cell's CellLaunch, composed once: argv and environment do not change between repetitions."""
        if cell.key not in self._launches:
            from .cell_launch import compose

            self._launches[cell.key] = compose(self.config, cell, self._placer, self.store, self._db_path)
        return self._launches[cell.key]

    # -- one run
    def execute(self, row):
        """Run one stored planned run (a runs row) and store its outcome; the status stored."""
        return self.run(codec.run_spec(row, self._benchmarks))

    def run(self, spec):
        """Run one planned run (records.RunSpec) and store its outcome; anything that keeps it
        from starting (its cell's launch, exec limits, a refused batch job) is a failed run
        with the reason, never a crashed study. The status stored."""
        started = _now()
        cell = spec.cell
        first = self._first_run(cell.benchmark.label)
        try:
            launch = self.launch_for(cell)
            if launch.error is not None:
                raise launch.error
            launched = self._launch(spec, launch)
        except NearmetalError as e:
            codec.store_result(self.store, spec.run_id, RunResult.not_started(started, e))
            return FAILED
        p, bench = launch.launch, launch.benchmark
        from ...families._transport import without_reports

        err = launched.stderr
        transport = self._transport(p.components[0], err) if not self._contexts.known(cell.key) else None
        err = without_reports(err)  # the report lines asked for: read above, not the program's words
        records, texts, unmatched, lone = [], None, None, None
        exited_ok = launched.status == "ok" and launched.exit_status == 0
        if launch.kernel is None:  # a program: its FOMs and wall time; its outputs also tell its version
            from ..config.program import read_outputs

            texts = read_outputs(p.cwd, bench.files_read(), launched.stdout, err)
            if exited_ok:
                records, err, unmatched = self._program_records(bench, texts, err, launched.wall_s)
        elif exited_ok:
            records, err = self._records(launch.kernel, bench, launched.stdout, err)
            if not records:
                err = f"{err}\nno results in the kernel's output"
        status = stored_status(launched, measured=bool(records))
        evidence = None
        if launch.evidence is not None:
            from ...evidence import keep as evidence_files

            evidence = evidence_files.read(launch.evidence)
            # exited 0, parsed or not (a one-rank job's output may lack the figure of merit): that
            # the run was no MPI job is its reason, not the missing figure (as bench checks it)
            if exited_ok and (lone := evidence_files.lone_start(evidence, p)):
                status, records, output, err = FAILED, [], (launched.stdout or "") + (err or ""), f"{err}\n{lone}"
                unmatched = None
        witnessed = None
        if self.config.study.witness:
            from ...witness import parse

            witnessed = [{k: w.get(k) for k in ("rank", "program", "library", "inode", "version")} for w in parse(err)]
        ctx = self._contexts.id_for(cell.key, p.components[0], image=launch.image,
                                    program=(bench, texts) if launch.kernel is None else None,
                                    witnessed=witnessed, transport=transport, binding=p.binding)
        if launch.traced is not None:
            from ..config.traced import keep

            stage, layers = launch.traced
            keep(stage, self.store.path, self.config.study.name, codec.planned_row(spec), status,
                 launched.exit_status, layers)
        tail = (err or "")[-STDERR_TAIL:] if status != OK else None
        if status == HUNG:
            tail = hang.stored_tail(err, *launched.hung, STDERR_TAIL)
        codec.store_result(self.store, spec.run_id,
                           RunResult(status, launched.exit_status, p.argv, p.env_delta, ctx, started, launched.wall_s,
                                     tail, records, launched.load))
        if evidence is not None:
            evidence_files.keep(self.store, spec.run_id, evidence)
        if status == OK:
            self._walls.setdefault(cell.key, []).append(launched.wall_s)
        elif status == HUNG and not hang.is_repeat(spec.key):
            self._repeat(spec)
        elif unmatched and first and not keep_going(self.config, bench):
            self._say(self._stops.stop(self.store, self.study_id, spec, unmatched, texts.get("output", ""), _now()))
        elif lone and not keep_going(self.config, bench):
            self._say(self._stops.stop(self.store, self.study_id, spec, lone.removeprefix("nearmetal: "),
                                       output, _now(), cell=True))
        return status

    # -- hung runs and benchmarks stopped after their first run
    def _history(self):
        """What the stored runs tell (once per executor, then kept up to date): each cell's
        finished run times and the benchmarks already run, so a resumed study goes on alike."""
        if self._walls is None:
            self._walls = {}
            for r in self.store.runs(self.study_id):
                if r["status"] == OK and r["wall_s"] is not None:
                    self._walls.setdefault(hang.cell_key(r["run_key"]), []).append(r["wall_s"])
                if r["status"] != PLANNED:
                    self._ran.add(r["benchmark"])
                if r["status"] == SKIPPED:  # stopped before an interrupt: its runs left are skipped alike
                    self._stops.read_back(r)
        return self._walls

    def _first_run(self, label):
        self._history()
        first = label not in self._ran
        self._ran.add(label)
        return first

    def _repeat(self, spec):
        """Plan a hung run's cell once more, after every run planned so far (same block)."""
        from dataclasses import replace

        position = max(r["position"] for r in self.store.runs(self.study_id)) + 1
        again = replace(spec, position=position, key=hang.repeat_key(spec.key), run_id=None)
        self.store.add_planned(self.study_id, [codec.planned_row(again)])
        self._say(f"run {spec.key} hung: ended, and its cell is run once more after the runs planned")

    def _stopped_text(self, row):
        self._history()
        return self._stops.text_for(row)

    def run_or_skip(self, row):
        """A planned run: run, or stored skipped when a run before it stopped its benchmark or
        cell (a list of pending runs read before that run still holds it); its status."""
        stopped = self._stopped_text(row)
        return self._skip(row, stopped) if stopped else self.execute(row)

    def _skip(self, row, text):
        """A stopped benchmark's or cell's run: stored skipped (when _stop has not stored it already)."""
        codec.store_result(self.store, row["id"], RunResult.skipped(_now(), text))
        return SKIPPED

    def _say(self, line):
        if self.console is not None:
            self.console.print(f"{self.config.study.name}: {line}", highlight=False, markup=False)
        else:
            print(f"{self.config.study.name}: {line}", file=sys.stderr)

    def _transport(self, resolved, err):
        """The transport summary of a run's ranks; a TCP fallback between ranks of one node is
        said at once (the progress console, else stderr)."""
        from ...families._transport import report, summary, warning

        transport = summary(report(err), one_machine=resolved.scheduler.job_is_child)
        line = warning(transport)
        if line and self.progress and not _network(resolved).emulated:  # emulated nodes talk over TCP by design
            print(f"{self.config.study.name}: {line}", file=sys.stderr)
        return transport

    def _launch(self, spec, launch):
        """The Launched record of one run. A batch job's id is stored while it is queued, so
        that a runner killed meanwhile leaves a trace that --resume cancels. load: how busy
        the machine was around the run (contention.figures; None unless the job's tree is
        this process's child: the local scheduler); with `quiet = true` the run first waits,
        at most quiet_wait seconds, for a quiet machine."""
        from ... import schedulers
        from . import contention

        p, req = launch.launch, launch.request
        if launch.kernel is None:  # a program benchmark: a fresh working directory with its inputs
            from ...models import in_container
            from ..config.program import stage

            stage(p.cwd, launch.benchmark.inputs, in_container=in_container(req.mode), user=req.user)
        jobs = []
        scheduler, study = schedulers.get(req.scheduler), self.config.study
        # the hang limit where the job's tree is this process's child (a batch job has its own time limit)
        walls = self._history().get(spec.cell.key, []) if scheduler.job_is_child else []
        limit_s, derived = hang.limit(walls, study.timeout, study.hang_floor_s)
        state = []  # the job's processes, read when its hang limit is reached and before they are ended
        before_stop = (lambda pid: state.extend(proc.tree_state(pid))) if derived else None
        quiet = waited = before = None
        if scheduler.job_is_child:
            if study.quiet:
                quiet, waited = contention.wait_quiet(study.quiet_wait)
            before = contention.snapshot()
        if launch.evidence is not None:  # what a killed earlier run left is not this run's
            from ...evidence.collect import clear

            clear(launch.evidence)
        if launch.cold:  # last, after staging inputs and waiting: nothing the run reads is in memory
            from .image_variant import drop_caches

            drop_caches()

        def submitted(job_id):
            jobs.append(job_id)
            self.store.record_job(self.study_id, spec.run_id, job_id)

        t0 = time.perf_counter()
        try:
            outcome = scheduler.run(p, req, p.components, timeout=limit_s, on_submit=submitted, before_stop=before_stop)
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
        if outcome.status == "timeout" and derived:  # hung: the reason and its processes' state, stored last
            why = hang.reason(limit_s, walls, study.hang_floor_s, repeated=not hang.is_repeat(spec.key))
            return Launched(outcome.status, None, outcome.stdout, err, wall, load, hung=(why, state))
        if outcome.status == "timeout":  # the reason goes first: the tail keeps the end of the job's stderr
            err = f"nearmetal: {outcome.reason}\n{err}"
        # a job with no exit status of its own (a cancelled batch job: Slurm's reason is in its stderr) is stored as -1
        exit_status = outcome.exit_status if outcome.exit_status is not None or outcome.status == "timeout" else -1
        return Launched(outcome.status, exit_status, outcome.stdout, err, wall, load)

    @staticmethod
    def _program_records(bench, texts, err, wall):
        """(records, err, None): a program's records (its FOMs and wall time); or ([], err
        with the reason appended, the reason) when its FOMs or success line did not match."""
        from ...apps.fom import FomError
        from ..config.program import records

        try:
            found = records(bench, texts, wall)
        except FomError as e:
            return [], f"{err}\nnearmetal: {e}", str(e)
        wanted = set(bench.metrics)
        return [r for r in found if not wanted or r["metric"] in wanted], err, None

    @staticmethod
    def _records(spec, bench, out, err):
        from ... import kernels

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

        for launch in self._launches.values():
            if launch.traced is not None:
                shutil.rmtree(launch.traced[0], ignore_errors=True)
            if launch.evidence is not None and self.store is not None:
                shutil.rmtree(launch.evidence, ignore_errors=True)
        self._placer.close()  # the image copies placed for the runs
        self._launches.clear()  # their environments name those directories

    def cancel_leftover_jobs(self, say=None):
        """Batch jobs that a killed runner left queued or running: cancelled, and marked so;
        their runs are still planned and run again. The job ids cancelled."""
        from ... import schedulers

        ids = [row["job_id"] for row in self.store.open_jobs(self.study_id)]
        for job_id in ids:
            schedulers.get(self.config.study.scheduler).cancel(job_id)
            self.store.finish_job(job_id, "cancelled on resume")
        if ids and say:
            say(f"cancelled {len(ids)} batch job(s) left by an earlier runner: {', '.join(ids)}")
        return ids

    def run_all(self):
        """Run every planned run, then those planned meanwhile (a hung run's repeat); (runs
        done, runs that did not succeed)."""
        pending = self.store.pending(self.study_id)
        done = failed = 0
        if not pending:
            return 0, 0
        total, tried = len(pending), set()
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
            while pending:
                for row in pending:
                    tried.add(row["id"])
                    status = self.run_or_skip(row)
                    done += 1
                    failed += status != "ok"
                    if bar:
                        bar.update(task if not isinstance(bar, _PlainProgress) else None, advance=1, failed=failed,
                                   total=total)
                pending = [r for r in self.store.pending(self.study_id) if r["id"] not in tried]
                total += len(pending)
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

    def update(self, task, advance, failed, total=None):
        self.done += advance
        self.total = total or self.total
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


def _network(resolved):
    from ... import networks

    return networks.get(resolved.network)
