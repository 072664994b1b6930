"""ELF inspection and an emulation of the GNU dynamic linker's library search.

One module per concern: elf.reading (ELF objects, glibc's own objects), elf.ldcache
(/etc/ld.so.cache), elf.search (LinkerView: the ld.so search over one root), elf.closure
(the dependency closure, LinkerView.closure) and elf.glibc (glibc symbol versions); this
package gives their public names.

The bind model makes the host's MPI library and its dependency closure visible
inside a container.  To do that faithfully we need to answer, without running
anything, the questions the dynamic linker (``ld.so``) answers at run time:

* which objects does a library pull in on the host (its dependency closure)?
* which objects would a program inside a container *rootfs directory* load?
* are the GLIBC symbol versions the host objects need provided by the
  container's glibc?

:class:`LinkerView` emulates glibc's ``ld.so`` search (see ``man ld.so``) over
one filesystem root: ``"/"`` for the host or a container rootfs directory, in
which case every path (search directories, ``/etc/ld.so.cache`` entries,
symbolic-link targets) is interpreted *inside* that root.

Everything here reads files with pyelftools and plain ``struct``; nothing is
executed and no external tool (``ldd``, ``readelf``, ``ldconfig``) is used.

Known simplifications (deliberate, documented):

* glibc-hwcaps (``DIR/glibc-hwcaps/x86-64-v3``) and legacy hwcap
  subdirectories (``DIR/tls``, ``DIR/x86_64``, ...) are not searched, and
  ld.so.cache entries carrying a hwcap are ignored: the baseline library is
  reported.  (Debian 12 ships no system library in such places.)
* Empty search-path elements (which ld.so takes as the current directory) are
  ignored: the working directory of a future process is unknown.
* A candidate that is not an ELF file is skipped (ld.so aborts the load with
  "invalid ELF header"); a candidate of another ELF class or machine is skipped,
  as ld.so does.
* The default directories are the union of the Debian multiarch ones and the
  ``lib64`` ones (see :data:`DEFAULT_DIRS`) so that the same view works for
  Debian- and Red Hat-style roots; pass ``default_dirs`` to override.
"""


from . import closure as _closure  # noqa: F401 (LinkerView.closure's implementation, loaded with the package)
from .glibc import glibc_missing, glibc_release, glibc_requirement, glibc_version
from .ldcache import (FLAG_ELF_LIBC6, FLAG_X8664_LIB64, FLAGS_X86_64, CacheEntry, parse_ld_so_cache,
                      read_ld_so_cache)
from .reading import GLIBC_SONAMES, ElfInfo, is_glibc, parse_glibc_version, read_elf
from .search import DEFAULT_DIRS, LinkerView, ResolvedLib

__all__ = [
    "DEFAULT_DIRS",
    "FLAG_ELF_LIBC6",
    "FLAG_X8664_LIB64",
    "FLAGS_X86_64",
    "GLIBC_SONAMES",
    "CacheEntry",
    "ElfInfo",
    "LinkerView",
    "ResolvedLib",
    "glibc_missing",
    "glibc_release",
    "glibc_requirement",
    "glibc_version",
    "is_glibc",
    "parse_glibc_version",
    "parse_ld_so_cache",
    "read_elf",
    "read_ld_so_cache",
]
