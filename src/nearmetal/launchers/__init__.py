"""Launchers, one module each: mpirun (Open MPI), hydra (MPICH), srun (Slurm).

Which one starts a job is decided by the scheduler (schedulers/): locally the MPI family's
own (its profile names it), under Slurm srun. A new launcher is one module here that
registers its class with `@LAUNCHERS.register`.
"""

from ..registry import Registry

LAUNCHERS = Registry(__name__, "launcher", first=("mpirun", "hydra", "srun"))


def get(name, installation, req=None):
    """An instance of launcher `name` for the host MPI installation record `installation`."""
    return LAUNCHERS.get(name)(installation, req)
