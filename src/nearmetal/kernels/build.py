"""nearmetal's C kernels on the host: built from kernels/ with each host MPI's wrapper."""

import os

from ..errors import NearmetalError
from ..home import KERNELS_SRC_STR, home_str

PROGRAMS = ("nm-mpi-info", "nm-mpi-info-rpath", "nm-pingpong")


def host_prefix(family):
    return os.path.join(home_str(), "host", family)


def host_bin(family):
    """The host kernel directory for an MPI family, built on first use or when sources changed."""
    bindir = os.path.join(host_prefix(family), "bin")
    if _stale(bindir):
        build(family)
    return bindir


def _stale(bindir):
    try:
        oldest_bin = min(os.stat(os.path.join(bindir, p)).st_mtime for p in PROGRAMS)
    except OSError:
        return True
    newest_src = max(e.stat().st_mtime for e in os.scandir(KERNELS_SRC_STR) if e.is_file())
    return oldest_bin < newest_src


def build(family):
    import subprocess

    from ..discovery.mpi import get

    mpi = get(family)
    prefix = host_prefix(family)
    argv = ["make", "-s", "-C", KERNELS_SRC_STR, f"MPI={family}", f"MPICC={mpi['compiler']}",
            f"PREFIX={prefix}", "install"]
    out = subprocess.run(argv, capture_output=True, text=True)
    if out.returncode != 0:
        tail = (out.stderr or out.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise NearmetalError(f"building the kernels for {family} failed: {tail[0]}")
    return os.path.join(prefix, "bin")
