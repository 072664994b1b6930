"""Find the MPI installations on this host and describe each one.

An installation is found through its compiler wrapper (what users build with): the
wrapper's link line names the library, the library's ELF SONAME gives the ABI family,
and the launcher sits beside the wrapper. What is family-specific (wrapper and launcher
names, how to read the version and PMI flavours) is in the family's profile (families/).
"""

from ..errors import NearmetalError
from ..families import names as family_names


def discover():
    """All MPI installations, keyed by family (cached: see discovery.cache)."""
    from .cache import cached

    def compute():
        from .mpi_probe import probe

        found = {}
        for family in family_names():
            inst = probe(family)
            if inst:
                found[family] = inst
        return found

    def files_of(found):
        return [m[k] for m in found.values() for k in ("compiler", "launcher", "library")]

    # The probing code is an input too: a nearmetal upgrade re-probes.
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    families = os.path.join(os.path.dirname(here), "families")
    inputs = [os.path.join(here, "mpi_probe.py")] + [os.path.join(families, f) for f in sorted(os.listdir(families))
                                                     if f.endswith(".py")]
    return cached("mpi", compute, files_of, inputs=inputs)


def get(family):
    """The host MPI of a family, or a one-line error saying what is installed."""
    if family not in family_names():
        raise NearmetalError(f"unknown MPI '{family}' (choose from: {', '.join(family_names())})")
    found = discover()
    if family not in found:
        have = ", ".join(found) or "none"
        raise NearmetalError(f"no {family} installation found on this host (found: {have}); "
                             f"install it (Debian: {profile(family).host_packages})")
    return found[family]


def profile(family):
    """The profile of an MPI family (families/<family>.py)."""
    from ..families import get as get_family

    return get_family(family)
