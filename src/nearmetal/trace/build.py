"""Build and place nm-trace.so, the preloaded I/O tracer (csrc/, docs/trace-format.md).

As for the witness (nearmetal.witness): built with the host's `cc` into the nearmetal home
(tools/nm-trace.so), rebuilt when any of its sources is newer, with only old glibc symbol
versions and no MPI, netCDF or HDF5 header, then copied read-only under /tmp, which every
runtime shows at the same path: natively and in a container the ranks preload the same file.
"""

import os

from ..errors import NearmetalError
from ..home import home_str
from . import ALL_LAYERS, CSRC, DEFAULT_LAYERS, layers  # noqa: F401 (DEFAULT_LAYERS: what `trace` records)


def sources(csrc=CSRC):
    """The core's files, then one layer-NAME.c per line of the layer table (nm-layers.def)."""
    return ("nm-trace.c", "nm-intern.c", "nm-mpi.c") + tuple(f"layer-{layer.name}.c" for layer in layers(csrc))


def headers(csrc=CSRC):
    """What the sources include: nm-trace.h, nm-layers.def, nc-common.h, ..."""
    return tuple(sorted(f for f in os.listdir(csrc) if f.endswith((".h", ".def"))))


SOURCES, HEADERS = sources(), headers()
FLAGS = ["-O2", "-Wall", "-shared", "-fPIC", "-fno-stack-protector", "-U_FORTIFY_SOURCE"]
# libdl.so.2 needed by name (no libdl.so link in glibc >= 2.34): images with an older glibc,
# where dlsym is not yet in libc, load it too
LIBS = ["-Wl,--no-as-needed", "-l:libdl.so.2"]


def _newest_source():
    return max(os.stat(os.path.join(CSRC, f)).st_mtime for f in SOURCES + HEADERS)


def built():
    """tools/nm-trace.so in the nearmetal home, (re)built when older than any source."""
    path = os.path.join(home_str(), "tools", "nm-trace.so")
    try:
        if os.stat(path).st_mtime >= _newest_source():
            return path
    except OSError:
        pass
    return _compile(path)


def _compile(path):
    from ..supervise import build

    return build(path, [os.path.join(CSRC, f) for f in SOURCES], FLAGS, LIBS)


def library():
    """The path, under /tmp, of a built nm-trace.so no older than its sources."""
    from ..supervise import place_shared

    return place_shared(built(), "nm-trace")


def rank_env(trace_dir, layers=None, env=None):
    """The variables the ranks (never the launcher) need: the tracer preloaded after any
    LD_PRELOAD of theirs, NM_TRACE_DIR, and NM_TRACE_LAYERS when layers are given. The
    evidence library comes first (when not already there): it owns MPI_Init and MPI_Finalize
    and tells the tracer of them (csrc/nm-mpi.c)."""
    from .. import evidence

    env = evidence.preloaded_once(env)
    unknown = [name for name in layers or () if name not in ALL_LAYERS]
    if unknown:
        raise NearmetalError(f"unknown trace layer {unknown[0]} (choose from: {' '.join(ALL_LAYERS)})")
    env["LD_PRELOAD"] = " ".join(p for p in (env.get("LD_PRELOAD", ""), library()) if p)
    env["NM_TRACE_DIR"] = os.path.abspath(trace_dir)
    if layers is not None:
        env["NM_TRACE_LAYERS"] = ",".join(layers)
    return env
