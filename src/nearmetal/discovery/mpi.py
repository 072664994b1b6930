"""Find the MPI installations on this host and describe each one.

An installation is found through its compiler wrapper (what users build with): the
wrapper's link line names the library, the library's ELF SONAME gives the ABI family,
and the launcher sits beside the wrapper. Families are open-ended: a new one is a new
entry in FAMILIES.
"""

from ..errors import NearmetalError

# ABI families by SONAME. MPICH-ABI libraries (MPICH, Cray MPICH, Intel MPI) are
# interchangeable at run time; Debian ships libmpich.so.12, vendors ship libmpi.so.12.
ABI_BY_SONAME = {
    "libmpi.so.40": "openmpi",
    "libmpich.so.12": "mpich",
    "libmpi.so.12": "mpich",
}

FAMILIES = {
    # family: wrapper names to try (first found wins), launcher names, library link names
    "openmpi": {
        "wrappers": ("mpicc.openmpi", "mpicc"),
        "launchers": ("mpirun.openmpi", "mpirun", "mpiexec.openmpi"),
        "libs": ("mpi",),
    },
    "mpich": {
        "wrappers": ("mpicc.mpich", "mpicc"),
        "launchers": ("mpiexec.hydra", "mpiexec.mpich", "mpiexec"),
        "libs": ("mpich", "mpi"),
    },
}


def discover():
    """All MPI installations, keyed by family (cached: see discovery.cache)."""
    from .cache import cached

    def compute():
        from .mpi_probe import probe

        found = {}
        for family in FAMILIES:
            inst = probe(family)
            if inst:
                found[family] = inst
        return found

    def files_of(found):
        return [m[k] for m in found.values() for k in ("compiler", "launcher", "library")]

    # The probing code is an input too: a nearmetal upgrade re-probes.
    return cached("mpi", compute, files_of, inputs=[__file__.replace("mpi.py", "mpi_probe.py")])


def get(family):
    """The host MPI of a family, or a one-line error saying what is installed."""
    if family not in FAMILIES:
        raise NearmetalError(f"unknown MPI '{family}' (choose from: {', '.join(FAMILIES)})")
    found = discover()
    if family not in found:
        have = ", ".join(found) or "none"
        raise NearmetalError(f"no {family} installation found on this host (found: {have}); "
                             f"install it (Debian: {'openmpi-bin libopenmpi-dev' if family == 'openmpi' else 'mpich libmpich-dev'})")
    return found[family]
