"""I/O libraries of nm-iobench, one module each (posix, mpiio, pnetcdf, netcdf4, hdf5),
as the kernel has one C backend per library (kernels/csrc/iobench/<name>.c).

A library's module says what applies to it — one shared file, MPI-IO underneath (hints and
the MPI-IO component matter), chunk layouts, the FMS namelist it maps to — so the I/O
study's validation, pre-selection, analysis, `io best` and the figures ask it rather than
listing names. A new library is its C backend (a line of kernels/csrc/iobench/backends.def
and iobench/NAME.c) plus one module here.
"""

from ...kernels import iobench_backends
from ...registry import Registry

LIBRARIES = Registry(__name__, "I/O library", first=iobench_backends.names())  # the C's order


def names():
    return LIBRARIES.names()


def get(name):
    return LIBRARIES.get(name)()


def where(**wanted):
    """Names of the libraries whose attributes have the wanted values (chunked=True, ...)."""
    return tuple(n for n in names() if all(getattr(LIBRARIES.get(n), k) == v for k, v in wanted.items()))
