"""Build and place nm-evidence.so (csrc/): built with the host's `cc` into the nearmetal home
(tools/nm-evidence.so), rebuilt when any source is newer, with only old glibc symbol
versions and no MPI header (one library serves Open MPI and MPICH: csrc/nm-profile.c), then
copied read-only under /tmp (supervise.place_shared)."""

import os
import platform

from ..home import home_str
from . import CSRC

SOURCES = ("nm-evidence.c", "nm-mpi-owner.c", "nm-profile.c")
HEADERS = ("nm-evidence.h", "nm-evidence-fns.def")
# the TSC check the I/O tracer shares (nm-evidence.c includes it from there)
SHARED = (os.path.join(os.path.dirname(CSRC), "..", "trace", "csrc", "nm-tsc.h"),)
# -foptimize-sibling-calls (part of -O2; named so that the reason is written down, and
# nm-profile.c refuses to build unoptimised): the profile's wrappers take the register arguments
# only and must reach the function they forward to by a jump, which leaves the caller's stack
# arguments in place (nm-profile.c, NM_WRAP). On aarch64 -mbranch-protection=standard makes that
# indirect jump go through x16/x17, the registers a BTI-marked MPI library's entry accepts.
FLAGS = ["-O2", "-foptimize-sibling-calls", "-Wall", "-shared", "-fPIC", "-fno-stack-protector", "-U_FORTIFY_SOURCE"]
if platform.machine() in ("aarch64", "arm64"):
    FLAGS.append("-mbranch-protection=standard")
# libdl.so.2 by name: images with a glibc older than 2.34 keep dlsym there
LIBS = ["-Wl,--no-as-needed", "-l:libdl.so.2"]


def built():
    """tools/nm-evidence.so in the nearmetal home, (re)built when older than any source."""
    path = os.path.join(home_str(), "tools", "nm-evidence.so")
    newest = max(os.stat(p).st_mtime for p in [os.path.join(CSRC, f) for f in SOURCES + HEADERS] + list(SHARED))
    try:
        if os.stat(path).st_mtime >= newest:
            return path
    except OSError:
        pass
    from ..supervise import build

    return build(path, [os.path.join(CSRC, f) for f in SOURCES], FLAGS, LIBS)


def library():
    """The path, under /tmp, of a built nm-evidence.so no older than its sources."""
    from ..supervise import place_shared

    return place_shared(built(), "nm-evidence")
