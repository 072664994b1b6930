"""nm-iobench's backends as the C declares them: csrc/iobench/backends.def, one line each
(read with nearmetal.ctables), so that the Python side keeps no list of its own.

An image installs, for each MPI family it carries, the Debian packages the table names for
that family (the families' `image_io_packages`); the I/O study describes each library in
nearmetal.io.libraries.
"""

import os

from ..ctables import read

TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "csrc", "iobench", "backends.def")


def names():
    """The backends, in the table's order (nm-iobench -L NAME)."""
    return tuple(row[0] for row in read(TABLE, "NM_IO_BACKEND"))


def image_packages(family):
    """The Debian packages an image installs for the backends' libraries built for `family`."""
    out = []
    for _name, packages in read(TABLE, "NM_IO_BACKEND"):
        for entry in packages.split():
            wanted, _, package = entry.partition(":")
            if wanted == family:
                out.append(package)
    return tuple(out)
