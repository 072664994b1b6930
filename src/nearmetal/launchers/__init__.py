"""Launchers, one module each, chosen by MPI family. A new launcher is one module plus a line here."""

_REGISTRY = {
    "openmpi": ("openmpi", "OpenMpiLauncher"),
    "mpich": ("mpich", "HydraLauncher"),
}


def for_request(mpi, req):
    """The launcher for a run: the MPI family's own, or srun under --scheduler slurm."""
    if getattr(req, "scheduler", "local") == "slurm":
        from .slurm import SrunLauncher

        return SrunLauncher(mpi, req)
    return for_mpi(mpi)


def for_mpi(mpi):
    from importlib import import_module

    module, cls = _REGISTRY[mpi["family"]]
    return getattr(import_module(f"{__name__}.{module}"), cls)(mpi)
