"""Launchers, one module each: mpirun (Open MPI), hydra (MPICH), srun (Slurm).

Which one starts a job is decided by the scheduler (schedulers/): locally the MPI family's
own (its profile names it), under Slurm srun. A new launcher is one module here that
registers its class with `@LAUNCHERS.register`.
"""

from ..registry import Registry

LAUNCHERS = Registry(__name__, "launcher", first=("mpirun", "hydra", "srun"))


def get(name, mpi, req=None):
    """An instance of launcher `name` for the host MPI installation `mpi`."""
    return LAUNCHERS.get(name)(mpi, req)
