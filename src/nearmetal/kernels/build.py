"""Building nearmetal's C kernels on the host, from the package's kernels/csrc/ directory.

The Makefile is the one list of programs (`make -s list`); the image builder uses the
same Makefile inside every image. The source directory is only read: everything the build
produces goes under PREFIX ($NEARMETAL_HOME/host/<family>), since an installed package may
be read-only.
"""

import os

from ..errors import NearmetalError
from ..home import KERNELS_SRC_STR, home_str

STAMP = ".built"


def host_prefix(family):
    return os.path.join(home_str(), "host", family)


def host_bin(family):
    """The host kernel directory for an MPI family, built on first use or when sources changed."""
    if not is_built(family):
        build(family)
    return os.path.join(host_prefix(family), "bin")


def is_built(family):
    """Whether the host kernels of an MPI family are built from the current sources."""
    return not _stale(host_prefix(family))


def _newest_source():
    newest = 0.0
    for dirpath, dirnames, filenames in os.walk(KERNELS_SRC_STR):
        dirnames[:] = [d for d in dirnames if d != "build" and not d.startswith(".")]
        for f in filenames:
            newest = max(newest, os.stat(os.path.join(dirpath, f)).st_mtime)
    return newest


def _stale(prefix):
    try:
        built = os.stat(os.path.join(prefix, STAMP)).st_mtime
    except OSError:
        return True
    return built < _newest_source()


def programs(src=KERNELS_SRC_STR):
    """Program names the Makefile in `src` builds (for one MPI family; the same for all)."""
    import subprocess

    out = subprocess.run(["make", "-s", "-C", str(src), "list"], capture_output=True, text=True)
    if out.returncode != 0:
        raise NearmetalError(f"cannot list the kernels: {out.stderr.strip()[-200:]}")
    return out.stdout.split()


def build(family):
    import subprocess

    from ..discovery.mpi import get

    installation = get(family)
    prefix = host_prefix(family)
    argv = ["make", "-s", "-C", KERNELS_SRC_STR, f"MPI={family}", f"MPICC={installation['compiler']}",
            f"PREFIX={prefix}", "install"]
    out = subprocess.run(argv, capture_output=True, text=True)
    if out.returncode != 0:
        tail = (out.stderr or out.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise NearmetalError(f"building the kernels for {family} failed: {tail[0]}")
    with open(os.path.join(prefix, STAMP), "w") as f:
        f.write("built by nearmetal\n")
    return os.path.join(prefix, "bin")
