"""MPI families: one profile module each (openmpi.py, mpich.py), all that is family-specific.

A profile says how to find the family on a host (wrappers, launchers, libraries, how to
read its version and PMI flavours), its ABI (SONAMEs), which launcher backend starts it,
which Slurm PMI plugin wires it, what its ranks need across namespaces, and what an image
installs for it. Everything else in nearmetal asks the profile; a new family (Intel MPI,
Cray MPICH, ...) is one module here.
"""

from ..registry import Registry

FAMILIES = Registry(__name__, "MPI", first=("openmpi", "mpich"))


def names():
    return FAMILIES.names()


def get(name):
    """The profile (an instance) of one family; a one-line error for an unknown name."""
    return FAMILIES.get(name)()


def abi_of(soname):
    """The ABI family whose libraries carry `soname`, or None."""
    for name in FAMILIES.names():
        if soname in FAMILIES.get(name).sonames:
            return name
    return None
