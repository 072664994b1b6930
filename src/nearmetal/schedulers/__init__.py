"""Schedulers, one module each: `local` (the MPI's own launcher on this machine) and `slurm`.

A scheduler decides which launcher starts a job, owns its process tree or batch job,
enforces the time limit, and reports an Outcome (ok, failed, timeout, cancelled, not
started, with the reason) — never text to grep. `run`, `bench`, the study executor and
the I/O sweep all go through it. A new resource manager (Flux, PBS) is one module here
registered with `@SCHEDULERS.register`.
"""

from ..registry import Registry

SCHEDULERS = Registry(__name__, "scheduler", first=("local", "slurm"))
DEFAULT = "local"
# What a scheduler provides, and what a job's end looks like, are defined here rather than
# in a base module: `nearmetal run` imports this package, and every module costs start-up.


def names():
    return SCHEDULERS.names()


def get(name):
    return SCHEDULERS.get(name)()


STATUSES = ("ok", "failed", "timeout", "cancelled", "not started")


class Outcome:
    """How a job ended: status (one of STATUSES), the exit status (None when it has none),
    its output, and a reason when it did not simply exit (a time-out, a refusal)."""

    __slots__ = ("status", "exit_status", "stdout", "stderr", "reason", "job_id")

    def __init__(self, status, exit_status=None, stdout="", stderr="", reason=None, job_id=None):
        assert status in STATUSES, status
        self.status, self.exit_status, self.stdout, self.stderr = status, exit_status, stdout, stderr
        self.reason, self.job_id = reason, job_id

    @classmethod
    def exited(cls, exit_status, stdout, stderr, job_id=None):
        return cls("ok" if exit_status == 0 else "failed", exit_status, stdout, stderr, job_id=job_id)


class Scheduler:
    name = ""  # the registry sets it: the module's name
    # Ranks placed at run time by the resource manager get a container each (namespace
    # joining needs the exact peer count per node, known only then).
    one_container_per_rank = False
    # The job's whole process tree runs on this machine as a child of this process (reaped by
    # it): only then can the study measure how busy the machine was around it (contention.py).
    job_is_child = False
    # Places a job's ranks on several nodes (a study's `nodes` dimension beyond 1).
    multi_node = False
    # Takes a batch system's options (--partition, --nodes, --time, --account, --export):
    # elsewhere they would be ignored without a word, so `run` and `bench` refuse them.
    batch_options = False

    def launcher(self, family):
        """The launcher backend (launchers/<name>.py) for a family profile's ranks."""
        return family.launcher

    def options(self, options, timeout=None):
        """The scheduler options (partition, time, ...) for one job of a study whose runs
        have `timeout` seconds; checked, with defaults filled in (none where it takes none:
        a study's [slurm] table while it runs locally)."""
        return dict(options) if self.batch_options else {}

    def describe(self, plan, req, components):
        """What --dry-run prints: the launch as this scheduler would submit it."""
        return plan.describe()

    def execute(self, plan, req, components, verbose=False):
        """`nearmetal run`: start the job in the foreground; its exit status."""
        raise NotImplementedError

    def run(self, plan, req, components, timeout=None, on_submit=None, before_stop=None):
        """Run the job to its end, its output captured; an Outcome. on_submit(job_id) is
        called when a resource manager has accepted the job; before_stop(pid), where the
        job's tree is this process's child, when its time is up and before it is ended."""
        raise NotImplementedError

    def cancel(self, job_id):
        """Cancel a job this scheduler submitted (one a killed runner left behind)."""

    def own_job(self):
        """The batch job this process runs in, or None."""
        return None

    def submit_runner(self, argv, size, options, outdir, name, after=None, hold=False):
        """Submit a study's runner (argv) as one batch job sized {nodes, per_node, threads},
        after job `after` has ended when given, held until release() with hold=True; the
        job id (`nearmetal study --submit`)."""
        from ..errors import NearmetalError

        raise NearmetalError(f"--submit: scheduler \"{self.name}\" starts every run on this machine; a study is "
                             f"submitted as a batch job with a batch scheduler ([study] scheduler = \"slurm\")")

    def release(self, job_id):
        """Let a job submitted with hold=True start."""

    def heterogeneous_problem(self):
        """Why a heterogeneous (MPMD) job cannot run from here (one line), or None."""
        return None

    def allocation_ending(self):
        """Whether the batch job this process runs in is ending (its time limit reached, or
        cancelled): a run that failed then was cut short by the job, and is not a result."""
        return False
