"""Slurm: srun with the family's PMI plugin; outside an allocation, one sbatch job per launch
(slurm/batch.py writes the script, polls the job and reads Slurm's final state)."""

import os

from . import SCHEDULERS, Outcome, Scheduler
from .local import Local


def _past(when):
    """Whether a Slurm time stamp (local time, 2026-11-25T07:25:18) has passed."""
    from datetime import datetime

    try:
        return datetime.fromisoformat(when) <= datetime.now()
    except ValueError:  # Unknown, None, empty
        return False


def _inside_allocation():
    return bool(os.environ.get("SLURM_JOB_ID"))


@SCHEDULERS.register
class Slurm(Scheduler):
    one_container_per_rank = True
    multi_node = True
    batch_options = True

    def launcher(self, family):
        return "srun"

    def options(self, options, timeout=None):
        from ..slurm.options import check_slurm

        options = dict(options)
        if timeout is not None and "time" not in options:
            # The job's own limit follows the study's time-out (whole minutes, at least one).
            options["time"] = str(max(1, int(timeout + 59) // 60))
        return check_slurm(options)

    def describe(self, plan, req, components):
        if _inside_allocation():
            return plan.describe()
        from ..slurm.batch import shown_script

        return shown_script(plan, req, components)

    def execute(self, plan, req, components, verbose=False):
        if _inside_allocation():  # srun is an ordinary local process here
            return Local().execute(plan, req, components, verbose)
        from ..slurm.batch import submit_and_wait

        return submit_and_wait(plan, req, components, verbose=verbose)

    def run(self, plan, req, components, timeout=None, on_submit=None, before_stop=None):
        if _inside_allocation():
            return Local().run(plan, req, components, timeout, before_stop=before_stop)
        from ..errors import NearmetalError
        from ..slurm.batch import submit_and_wait

        try:
            rc, out, err, state, job = submit_and_wait(plan, req, components, capture=True, on_submit=on_submit)
        except NearmetalError as e:  # refused, or can never start
            return Outcome("not started", reason=str(e))
        if state == "TIMEOUT":
            return Outcome("timeout", None, out, err, reason=f"Slurm job {job} reached its time limit", job_id=job)
        if state == "CANCELLED":
            return Outcome("cancelled", rc, out, err, reason=f"Slurm job {job} was cancelled", job_id=job)
        if state != "COMPLETED":
            return Outcome("failed", rc, out, err, reason=f"Slurm job {job} ended {state}", job_id=job)
        return Outcome.exited(rc, out, err, job_id=job)

    def cancel(self, job_id):
        import subprocess

        try:
            subprocess.run(["scancel", str(job_id)], capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            pass  # no Slurm reachable any more: nothing of the job can be running on it

    def own_job(self):
        return os.environ.get("SLURM_JOB_ID") or None

    def submit_runner(self, argv, size, options, outdir, name, after=None, hold=False):
        from pathlib import Path

        from ..safe_write import write_text
        from ..slurm.runner_job import script, submit

        path = Path(outdir) / "runner.sh"
        write_text(path, script(argv, size, options, outdir, name), "runner job script")
        return submit(path, after=after, hold=hold)

    def release(self, job_id):
        from ..slurm.runner_job import release

        release(job_id)

    def heterogeneous_problem(self):
        if _inside_allocation():  # measured: slurm 22.05, pmi2, the local cluster
            return ("inside an allocation a heterogeneous job would be a heterogeneous step of its ordinary "
                    "allocation, whose MPICH components never met in MPI_Init here: run the study outside the "
                    "allocation (each run is then a heterogeneous batch job of its own)")
        return None

    def allocation_ending(self):
        job = self.own_job()
        if not job:
            return False
        from ..slurm.batch import _scontrol

        found = _scontrol(job)
        state = found.get("JobState", "")
        if state and state not in ("RUNNING", "SUSPENDED"):
            return True
        # Steps are refused from the job's end time on, a moment before its state changes
        return _past(found.get("EndTime", ""))
