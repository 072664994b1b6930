"""Slurm: srun with the family's PMI plugin; outside an allocation, one sbatch job per launch
(slurm/batch.py writes the script, polls the job and reads Slurm's final state)."""

import os

from . import SCHEDULERS, Outcome, Scheduler
from .local import Local


def _inside_allocation():
    return bool(os.environ.get("SLURM_JOB_ID"))


@SCHEDULERS.register
class Slurm(Scheduler):
    one_container_per_rank = True

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
        from ..slurm.batch import write_script

        path, text = write_script(plan, req, components)
        return f"# batch script {path}:\n{text.rstrip()}"

    def execute(self, plan, req, components, verbose=False):
        if _inside_allocation():  # srun is an ordinary local process here
            return Local().execute(plan, req, components, verbose)
        from ..slurm.batch import submit_and_wait

        return submit_and_wait(plan, req, components, verbose=verbose)

    def run(self, plan, req, components, timeout=None, on_submit=None):
        if _inside_allocation():
            return Local().run(plan, req, components, timeout)
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
