"""Find the MPI installations on this host and describe each one.

An installation is found through its compiler wrapper (what users build with): the
wrapper's link line names the library, the library's ELF SONAME gives the ABI family,
and the launcher sits beside the wrapper. What is family-specific (wrapper and launcher
names, how to read the version and PMI flavours) is in the family's profile (families/).
"""

import os

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


def split(spec):
    """FAMILY or FAMILY@PREFIX -> (family, prefix or None)."""
    family, sep, prefix = str(spec).partition("@")
    return family, (prefix if sep else None)


def spec_problem(spec):
    """Why an --mpi value is not FAMILY or FAMILY@/ABSOLUTE/PREFIX, or None (no file is touched)."""
    family, prefix = split(spec)
    if family not in family_names():
        return f"unknown MPI '{family}' (choose from: {', '.join(family_names())})"
    if prefix is not None and (not prefix.startswith("/") or "\x00" in prefix or "\n" in prefix or len(prefix) > 4096):
        return f"MPI prefix must be an absolute path: {spec!r:.80}"
    return None


def at_prefix(family, prefix):
    """The installation of `family` under `prefix` (its bin/ holds the wrapper and launcher),
    cached like discover()'s; a one-line error when there is none."""
    import hashlib
    import os

    from .cache import cached

    def compute():
        from .mpi_probe import probe

        return {"found": probe(family, prefix=prefix)}

    def files_of(value):
        m = value["found"]
        return [m[k] for k in ("compiler", "launcher", "library")] if m else [os.path.join(prefix, "bin")]

    key = hashlib.sha256(f"{family}@{prefix}".encode()).hexdigest()[:16]
    found = cached(f"mpi-at-{key}", compute, files_of)["found"]
    if not found:
        raise NearmetalError(f"no {family} installation under {prefix} (its wrapper and launcher are looked for "
                             f"in {prefix}/bin)")
    return found


def candidate_prefixes(environ=None, glob=None):
    """Where doctor looks for installations beside PATH's: $NEARMETAL_MPI_PREFIXES (colon-
    separated), /usr/local, /opt/*, /opt/*/usr (packages extracted with dpkg -x)."""
    import glob as glob_mod

    glob = glob or glob_mod.glob
    environ = os.environ if environ is None else environ
    listed = [p for p in environ.get("NEARMETAL_MPI_PREFIXES", "").split(":") if p.startswith("/")]
    return list(dict.fromkeys(listed + ["/usr/local"] + sorted(glob("/opt/*")) + sorted(glob("/opt/*/usr"))))


def other_installations():
    """[record] of the installations under candidate prefixes other than those PATH finds,
    each with its `spec` (FAMILY@PREFIX): what doctor lists beside what each family name means."""
    from ..families import get as get_family

    on_path = {m["library"] for m in discover().values()}
    out = []
    for prefix in candidate_prefixes():
        for family in family_names():
            wrappers = get_family(family).wrappers
            if not any(os.path.isfile(os.path.join(prefix, "bin", w)) for w in wrappers):
                continue
            try:
                found = at_prefix(family, prefix)
            except NearmetalError:
                continue
            if found["library"] not in on_path:
                out.append(dict(found, spec=f"{family}@{prefix}"))
    return out


def get(family):
    """The host MPI of a family (FAMILY@PREFIX: the one under that prefix), or a one-line
    error saying what is installed."""
    problem = spec_problem(family)
    if problem:
        raise NearmetalError(problem)
    family, prefix = split(family)
    if prefix is not None:
        return at_prefix(family, os.path.normpath(prefix))
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
