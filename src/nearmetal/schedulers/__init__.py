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


def names():
    return SCHEDULERS.names()


def get(name):
    return SCHEDULERS.get(name)()
