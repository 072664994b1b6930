"""The local scheduler: the MPI family's own launcher, on this machine, under nm-supervise."""

from . import SCHEDULERS, Outcome, Scheduler


@SCHEDULERS.register
class Local(Scheduler):
    job_is_child = True  # under nm-supervise, reaped by this process

    def execute(self, plan, req, components, verbose=False):
        from ..run import execute

        execute(plan, verbose=verbose)  # replaces this process

    def run(self, plan, req, components, timeout=None, on_submit=None, before_stop=None):
        from ..errors import NearmetalError
        from ..run import start, wait

        try:
            proc = start(plan)
        except NearmetalError as e:
            return Outcome("not started", reason=str(e))
        try:
            returncode, out, err, why = wait(proc, timeout, before_stop)
        finally:  # the job's whole tree has ended (wait ends it on time-out and interrupt)
            plan.after_job()
        if why:
            return Outcome("timeout", None, out, err, reason=why)
        return Outcome.exited(returncode, out, err)
