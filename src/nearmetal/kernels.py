"""nearmetal's C kernels on the host: built from kernels/ with each host MPI's wrapper."""

import os
import subprocess

from .errors import NearmetalError
from .home import KERNELS_SRC, home

PROGRAMS = ("nm-mpi-info", "nm-mpi-info-rpath", "nm-pingpong")


def host_prefix(family):
    return home() / "host" / family


def host_bin(family):
    """The host kernel directory for an MPI family, built on first use (make is incremental)."""
    bindir = host_prefix(family) / "bin"
    if not all((bindir / p).exists() for p in PROGRAMS) or _stale(bindir):
        build(family)
    return str(bindir)


def _stale(bindir):
    newest_src = max(p.stat().st_mtime for p in KERNELS_SRC.iterdir() if p.is_file())
    return any((bindir / p).stat().st_mtime < newest_src for p in PROGRAMS)


def build(family):
    from .discovery.mpi import get

    mpi = get(family)
    prefix = host_prefix(family)
    argv = ["make", "-s", "-C", str(KERNELS_SRC), f"MPI={family}", f"MPICC={mpi['compiler']}",
            f"PREFIX={prefix}", "install"]
    out = subprocess.run(argv, capture_output=True, text=True)
    if out.returncode != 0:
        tail = (out.stderr or out.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise NearmetalError(f"building the kernels for {family} failed: {tail[0]}")
    return prefix / "bin"
