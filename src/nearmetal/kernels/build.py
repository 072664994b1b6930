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
LOCK, BUILDING = ".build.lock", ".building"  # one builder at a time; a build under way or killed


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
    """Build the host kernels of an MPI family into its PREFIX, one builder at a time: a
    second nearmetal (a job array, a study beside a bench) waits for the first and uses what
    it built. make runs under nm-supervise, so a killed nearmetal takes its build along, and a
    build that was killed part way (its marker left) starts again from an empty PREFIX: make
    would take a half-written program for a finished one."""
    import fcntl
    import shutil
    import subprocess
    import sys

    from .. import supervise
    from ..discovery.mpi import get

    installation = get(family)
    prefix = host_prefix(family)
    os.makedirs(prefix, exist_ok=True)
    with open(os.path.join(prefix, LOCK), "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"nearmetal: waiting for another nearmetal that builds the {family} kernels in {prefix}",
                  file=sys.stderr)
            fcntl.flock(lock, fcntl.LOCK_EX)
        if is_built(family):  # by the one we waited for
            return os.path.join(prefix, "bin")
        marker = os.path.join(prefix, BUILDING)
        if os.path.exists(marker):
            for name in os.listdir(prefix):
                if name != LOCK:
                    path = os.path.join(prefix, name)
                    shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.unlink(path)
        with open(marker, "w") as f:
            f.write("a build of nearmetal's kernels is under way, or was killed\n")
        argv = ["make", "-s", "-C", KERNELS_SRC_STR, f"MPI={family}", f"MPICC={installation['compiler']}",
                f"PREFIX={prefix}", "install"]
        out = subprocess.run(supervise.wrap(argv), capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if out.returncode != 0:
            tail = (out.stderr or out.stdout).strip().splitlines()[-1:] or ["(no output)"]
            raise NearmetalError(f"building the kernels for {family} failed: {tail[0]}")
        with open(os.path.join(prefix, STAMP), "w") as f:
            f.write("built by nearmetal\n")
        os.unlink(marker)
    return os.path.join(prefix, "bin")
