"""ELF inspection and an emulation of the GNU dynamic linker's library search.

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

from __future__ import annotations

import dataclasses
import fnmatch
import os
import re
import stat
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.dynamic import DynamicSection, DynamicSegment
from elftools.elf.elffile import ELFFile
from elftools.elf.enums import ENUM_E_MACHINE
from elftools.elf.gnuversions import GNUVerDefSection, GNUVerNeedSection

from nearmetal.errors import NearmetalError

__all__ = [
    "DEFAULT_DIRS",
    "GLIBC_SONAMES",
    "CacheEntry",
    "ElfInfo",
    "LinkerView",
    "ResolvedLib",
    "glibc_requirement",
    "glibc_version",
    "is_glibc",
    "parse_glibc_version",
    "parse_ld_so_cache",
    "read_elf",
    "read_ld_so_cache",
]

# --------------------------------------------------------------------------
# glibc objects
# --------------------------------------------------------------------------

#: Objects that belong to glibc itself (or are the program interpreter).  They
#: must always come from the container, never be staged from the host.
GLIBC_SONAMES: frozenset[str] = frozenset(
    {
        "libc.so.6",
        "libm.so.6",
        "libdl.so.2",
        "libpthread.so.0",
        "librt.so.1",
        "libresolv.so.2",
        "libutil.so.1",
        "libanl.so.1",
        "libmvec.so.1",
        "libBrokenLocale.so.1",
        "libthread_db.so.1",
        "libnsl.so.1",
        "libc_malloc_debug.so.0",
        "libmemusage.so",
        "libpcprofile.so",
        "ld-linux-x86-64.so.2",
        "ld-linux.so.2",
        "ld-linux-x32.so.2",
    }
)

#: Name patterns of glibc objects that come in families.
_GLIBC_PATTERNS: tuple[str, ...] = ("libnss_*.so.2", "ld-linux*.so.*")


def is_glibc(soname: str) -> bool:
    """Whether *soname* (or a path ending in it) names a glibc/loader object."""
    name = soname.rsplit("/", 1)[-1]
    if name in GLIBC_SONAMES:
        return True
    return any(fnmatch.fnmatchcase(name, pat) for pat in _GLIBC_PATTERNS)


_GLIBC_TAG = re.compile(r"GLIBC_(\d+)\.(\d+)(?:\.\d+)*")


def parse_glibc_version(tag: str) -> tuple[int, int] | None:
    """``"GLIBC_2.34"`` -> ``(2, 34)``; ``"GLIBC_2.2.5"`` -> ``(2, 2)``.

    Anything else (``GLIBC_PRIVATE``, ``GLIBCXX_3.4``, ``GCC_3.0``) -> ``None``.
    """
    m = _GLIBC_TAG.fullmatch(tag)
    if m is None:
        return None
    return int(m.group(1)), int(m.group(2))


# --------------------------------------------------------------------------
# Reading ELF files
# --------------------------------------------------------------------------

_DF_1_NODEFLIB = 0x800


@dataclass(frozen=True)
class ElfInfo:
    """What the dynamic linker cares about in one ELF object."""

    path: str
    soname: str | None
    needed: tuple[str, ...]
    rpath: tuple[str, ...]
    runpath: tuple[str, ...]
    interp: str | None
    # A dict inside a frozen dataclass: treat it as read-only (objects are
    # cached and shared).  Excluded from hashing, kept in equality.
    version_needs: dict[str, frozenset[str]] = field(hash=False)
    version_defs: frozenset[str]
    elf_class: int
    machine: str
    elf_type: str = "ET_DYN"
    nodeflib: bool = False  # DF_1_NODEFLIB: no ld.so.cache system dirs, no default dirs

    @property
    def is_x86_64(self) -> bool:
        return self.elf_class == 64 and self.machine == "EM_X86_64"


# (realpath, st_mtime_ns, st_size) -> ElfInfo (with the path it was first read as)
_ELF_CACHE: dict[tuple[str, int, int], ElfInfo] = {}
_ELF_CACHE_MAX = 4096


def _dyn_value_list(value: str) -> tuple[str, ...]:
    return tuple(value.split(":"))


def _parse_elf(path: str) -> ElfInfo:
    with open(path, "rb") as f:
        magic = f.read(4)
        if magic != b"\x7fELF":
            raise NearmetalError(f"{path} is not an ELF file")
        f.seek(0)
        elf = ELFFile(f)
        soname = None
        needed: list[str] = []
        rpath: list[str] = []
        runpath: list[str] = []
        flags_1 = 0
        interp = None
        for seg in elf.iter_segments():
            if seg["p_type"] == "PT_INTERP":
                interp = seg.get_interp_name()

        dyn = None
        if elf.num_sections():
            for sec in elf.iter_sections():
                if isinstance(sec, DynamicSection):
                    dyn = sec
                    break
        if dyn is None:
            for seg in elf.iter_segments():
                if isinstance(seg, DynamicSegment):
                    dyn = seg
                    break
        if dyn is not None:
            for tag in dyn.iter_tags():
                kind = tag.entry.d_tag
                if kind == "DT_NEEDED":
                    needed.append(tag.needed)
                elif kind == "DT_SONAME":
                    soname = tag.soname
                elif kind == "DT_RPATH":
                    rpath.extend(_dyn_value_list(tag.rpath))
                elif kind == "DT_RUNPATH":
                    runpath.extend(_dyn_value_list(tag.runpath))
                elif kind == "DT_FLAGS_1":
                    flags_1 = tag.entry.d_val

        version_needs: dict[str, frozenset[str]] = {}
        version_defs: set[str] = set()
        for sec in elf.iter_sections():
            if isinstance(sec, GNUVerNeedSection):
                for verneed, auxes in sec.iter_versions():
                    names = {aux.name for aux in auxes}
                    prev = version_needs.get(verneed.name, frozenset())
                    version_needs[verneed.name] = prev | frozenset(names)
            elif isinstance(sec, GNUVerDefSection):
                for verdef, auxes in sec.iter_versions():
                    if verdef["vd_flags"] & 0x1:  # VER_FLG_BASE: the file's own name
                        continue
                    first = next(iter(auxes), None)
                    if first is not None:
                        version_defs.add(first.name)

        return ElfInfo(
            path=path,
            soname=soname,
            needed=tuple(needed),
            rpath=tuple(rpath),
            runpath=tuple(runpath),
            interp=interp,
            version_needs=version_needs,
            version_defs=frozenset(version_defs),
            elf_class=elf.elfclass,
            machine=str(elf["e_machine"]),
            elf_type=str(elf["e_type"]),
            nodeflib=bool(flags_1 & _DF_1_NODEFLIB),
        )


def read_elf(path: str | os.PathLike[str]) -> ElfInfo:
    """Parse *path* (following symbolic links); cached by (realpath, mtime, size).

    Raises :class:`NearmetalError` if the file cannot be read or is not ELF.
    """
    path = os.fspath(path)
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except OSError as exc:
        raise NearmetalError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise NearmetalError(f"cannot read {path}: not a regular file")
    key = (real, st.st_mtime_ns, st.st_size)
    info = _ELF_CACHE.get(key)
    if info is None:
        try:
            info = _parse_elf(path)
        except NearmetalError:
            raise
        except OSError as exc:
            raise NearmetalError(f"cannot read {path}: {exc.strerror or exc}") from None
        except (ELFError, struct.error, ValueError, KeyError, IndexError, AssertionError) as exc:
            raise NearmetalError(f"{path} is not a valid ELF file ({exc})") from None
        if len(_ELF_CACHE) >= _ELF_CACHE_MAX:
            _ELF_CACHE.clear()
        _ELF_CACHE[key] = info
    if info.path != path:
        info = dataclasses.replace(info, path=path)
    return info


def _elf_header(host_path: str) -> tuple[int, int] | None:
    """(class in bits, e_machine number) of a regular ELF file, else None."""
    try:
        with open(host_path, "rb") as f:
            head = f.read(20)
    except OSError:
        return None
    if len(head) < 20 or head[:4] != b"\x7fELF":
        return None
    ei_class, ei_data = head[4], head[5]
    if ei_class not in (1, 2) or ei_data not in (1, 2):
        return None
    order = "<" if ei_data == 1 else ">"
    (machine,) = struct.unpack(order + "H", head[18:20])
    return (32 if ei_class == 1 else 64), machine


# --------------------------------------------------------------------------
# /etc/ld.so.cache
# --------------------------------------------------------------------------

_OLD_MAGIC = b"ld.so-1.7.0"
_NEW_MAGIC = b"glibc-ld.so.cache1.1"
_NEW_HEADER = struct.Struct("<20sIIB3xI12x")  # magic+version, nlibs, len_strings, flags, ext offset
_NEW_ENTRY = struct.Struct("<iIIIQ")  # flags, key, value, osversion, hwcap
_OLD_ENTRY = struct.Struct("<iII")  # flags, key, value

FLAG_ELF_LIBC6 = 0x0003
FLAG_X8664_LIB64 = 0x0300
#: ld.so.cache flags of an x86-64 glibc library ("libc6,x86-64" in ldconfig -p).
FLAGS_X86_64 = FLAG_ELF_LIBC6 | FLAG_X8664_LIB64
_HWCAP_EXTENSION = 1 << 62


@dataclass(frozen=True)
class CacheEntry:
    soname: str
    path: str
    flags: int  # e.g. FLAGS_X86_64 == 0x0303
    hwcap: int = 0  # nonzero: only for CPUs with that capability (hwcaps subdirectories)

    @property
    def is_x86_64(self) -> bool:
        return self.flags == FLAGS_X86_64


def _cstr(data: bytes, off: int) -> str:
    end = data.find(b"\0", off)
    if end < 0:
        end = len(data)
    return data[off:end].decode("utf-8", "surrogateescape")


def read_ld_so_cache(path: str | os.PathLike[str]) -> list[CacheEntry]:
    """All entries of an ld.so.cache file, in cache order.

    Understands the new format (``glibc-ld.so.cache1.1``, glibc >= 2.32
    default) and the old ``ld.so-1.7.0`` format, alone or followed by the new
    one (in which case, as ld.so does, the new part is used).  A missing file
    gives ``[]``; an unreadable or corrupt one raises :class:`NearmetalError`.
    """
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise NearmetalError(f"cannot read {os.fspath(path)}: {exc.strerror or exc}") from None
    try:
        return _parse_cache(data)
    except (struct.error, IndexError) as exc:
        raise NearmetalError(f"{os.fspath(path)} is not a valid ld.so cache ({exc})") from None


def _parse_new_cache(data: bytes, base: int) -> list[CacheEntry]:
    _magic, nlibs, _len_strings, _flags, _ext = _NEW_HEADER.unpack_from(data, base)
    entries = []
    off = base + _NEW_HEADER.size
    for _ in range(nlibs):
        flags, key, value, _osv, hwcap = _NEW_ENTRY.unpack_from(data, off)
        off += _NEW_ENTRY.size
        # String offsets are relative to the start of the new header.
        entries.append(CacheEntry(_cstr(data, base + key), _cstr(data, base + value), flags, hwcap))
    return entries


def _parse_cache(data: bytes) -> list[CacheEntry]:
    if data.startswith(_NEW_MAGIC):
        return _parse_new_cache(data, 0)
    if not data.startswith(_OLD_MAGIC):
        raise struct.error("unknown magic")
    # struct cache_file { char magic[11]; <pad>; uint32 nlibs; entries[] }
    (nlibs,) = struct.unpack_from("<I", data, 12)
    hdr = 16
    strings = hdr + nlibs * _OLD_ENTRY.size
    # The new format, if present, follows the old entries, 8-byte aligned.
    new_base = (strings + 7) & ~7
    if data[new_base : new_base + len(_NEW_MAGIC)] == _NEW_MAGIC:
        return _parse_new_cache(data, new_base)
    entries = []
    for i in range(nlibs):
        flags, key, value = _OLD_ENTRY.unpack_from(data, hdr + i * _OLD_ENTRY.size)
        # Old-format string offsets are relative to the end of the entry table.
        entries.append(CacheEntry(_cstr(data, strings + key), _cstr(data, strings + value), flags))
    return entries


def parse_ld_so_cache(path: str | os.PathLike[str], x86_64_only: bool = False) -> list[tuple[str, str]]:
    """``(soname, library path)`` pairs of an ld.so.cache file, in cache order.

    With ``x86_64_only`` only entries flagged ``libc6,x86-64`` are kept.
    Missing file -> ``[]``.
    """
    return [
        (e.soname, e.path)
        for e in read_ld_so_cache(path)
        if not x86_64_only or e.is_x86_64
    ]


# --------------------------------------------------------------------------
# The linker's view of a root
# --------------------------------------------------------------------------

#: Default ("trusted") directories, searched last, in this order.  Debian's
#: ld.so searches /lib/x86_64-linux-gnu, /usr/lib/x86_64-linux-gnu, /lib,
#: /usr/lib; Red Hat's /lib64, /usr/lib64.  The union covers both.
DEFAULT_DIRS: tuple[str, ...] = (
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
)

_MAX_SYMLINKS = 40


@dataclass(frozen=True)
class ResolvedLib:
    """One object the dynamic linker would load.

    ``soname`` is the name it was looked up by (the DT_NEEDED entry; usually
    equal to ``info.soname``), ``path`` the in-root path where the search found
    it (symbolic links not resolved, as ld.so reports it), ``host_path`` the
    file on this machine, and ``info.path == path``.
    """

    soname: str
    path: str
    host_path: Path
    info: ElfInfo
    found_via: str  # "rpath" | "LD_LIBRARY_PATH" | "runpath" | "ld.so.cache" | "default" | "preloaded" | "path"


def _split_search_path(entries: Sequence[str] | str) -> tuple[str, ...]:
    if isinstance(entries, str):
        entries = (entries,)
    out: list[str] = []
    for item in entries:
        out.extend(re.split(r"[:;]", os.fspath(item)))
    return tuple(out)


class LinkerView:
    """The dynamic linker's view of one filesystem root: ``"/"`` for the host,
    or a container rootfs directory.

    ``ld_library_path`` plays the role of ``LD_LIBRARY_PATH`` (in-root
    directories; a single ``"a:b"`` string is split), ``preload`` that of
    ``LD_PRELOAD`` (in-root paths or bare sonames), ``use_cache`` whether
    ``root/etc/ld.so.cache`` is consulted.
    """

    def __init__(
        self,
        root: str | Path = "/",
        ld_library_path: Sequence[str] = (),
        use_cache: bool = True,
        *,
        preload: Sequence[str] = (),
        default_dirs: Sequence[str] = DEFAULT_DIRS,
    ) -> None:
        root_path = Path(os.path.abspath(os.fspath(root)))
        if not root_path.is_dir():
            raise NearmetalError(f"root {root_path} is not a directory")
        self.root: Path = root_path
        self._is_host = os.path.realpath(root_path) == "/"
        self.ld_library_path: tuple[str, ...] = _split_search_path(ld_library_path)
        self.use_cache = use_cache
        self.preload: tuple[str, ...] = tuple(p for p in _split_search_path(preload) if p)
        self.default_dirs: tuple[str, ...] = tuple(default_dirs)
        self._cache: list[CacheEntry] | None = None

    def __repr__(self) -> str:
        return f"LinkerView(root={str(self.root)!r}, ld_library_path={list(self.ld_library_path)!r})"

    # -- paths -------------------------------------------------------------

    @staticmethod
    def _in_root(path: str) -> str:
        """An in-root path made absolute, otherwise kept as it is: like ld.so,
        no lexical clean-up (``a/../b`` is not ``b`` when ``a`` is a link)."""
        return path if path.startswith("/") else "/" + path

    def resolve_in_root(self, path: str) -> str:
        """The in-root path that *path* designates after following every
        symbolic link inside the root (``..`` clamps at the root, absolute link
        targets are taken relative to the root).  Non-existent trailing
        components are kept as they are."""
        if self._is_host:
            return os.path.realpath("/" + path.lstrip("/"))
        root = os.fspath(self.root)
        pending = [c for c in path.split("/") if c]
        pending.reverse()
        parts: list[str] = []
        links = 0
        while pending:
            comp = pending.pop()
            if comp == ".":
                continue
            if comp == "..":
                if parts:
                    parts.pop()
                continue
            candidate = os.path.join(root, *parts, comp)
            try:
                st = os.lstat(candidate)
            except OSError:
                # Missing (or unreadable): keep the rest verbatim, lexically.
                parts.append(comp)
                continue
            if not stat.S_ISLNK(st.st_mode):
                parts.append(comp)
                continue
            links += 1
            if links > _MAX_SYMLINKS:
                raise NearmetalError(f"too many levels of symbolic links in {path} under {root}")
            target = os.readlink(candidate)
            if target.startswith("/"):
                parts = []
            new = [c for c in target.split("/") if c]
            new.reverse()
            pending.extend(new)
        return "/" + "/".join(parts)

    def host_path(self, path: str) -> Path:
        """Map an in-root absolute path to the host path of the file it designates."""
        resolved = self.resolve_in_root(path)
        if self._is_host:
            return Path(resolved)
        return self.root.joinpath(resolved.lstrip("/")) if resolved != "/" else self.root

    def read_elf(self, path: str) -> ElfInfo:
        """:func:`read_elf` of an in-root path; the result's ``path`` is the in-root path."""
        path = self._in_root(path)
        info = read_elf(self.host_path(path))
        return dataclasses.replace(info, path=path) if info.path != path else info

    # -- search ------------------------------------------------------------

    def cache_entries(self) -> list[CacheEntry]:
        if self._cache is None:
            self._cache = read_ld_so_cache(self.host_path("/etc/ld.so.cache")) if self.use_cache else []
        return self._cache

    def _origin(self, obj: ElfInfo, executable: ElfInfo | None) -> str:
        if executable is not None and obj.path == executable.path:
            # ld.so takes the executable's origin from /proc/self/exe: fully resolved.
            return os.path.dirname(self.resolve_in_root(obj.path))
        # For libraries the directory of the name it was found as, unresolved.
        return os.path.dirname(self._in_root(obj.path))

    def _expand(self, entry: str, obj: ElfInfo | None, executable: ElfInfo | None) -> str | None:
        """Expand $ORIGIN, $LIB, $PLATFORM (and their ${} forms) in a search dir."""

        def sub(m: re.Match[str]) -> str:
            name = m.group(1) or m.group(2)
            if name == "ORIGIN":
                if obj is None:
                    raise LookupError
                return self._origin(obj, executable)
            if name == "LIB":
                return "lib/x86_64-linux-gnu"
            if name == "PLATFORM":
                return "x86_64"
            return m.group(0)

        try:
            out = re.sub(r"\$(?:\{(ORIGIN|LIB|PLATFORM)\}|(ORIGIN|LIB|PLATFORM)(?![A-Za-z0-9_]))", sub, entry)
        except LookupError:
            return None
        if not out:
            return None
        if not out.startswith("/"):
            # Relative entries are relative to the working directory; unknown here.
            return None
        return out

    def _try(self, directory: str, name: str, want: tuple[int, int]) -> tuple[str, Path] | None:
        cand = self._in_root(directory.rstrip("/") + "/" + name)
        host = self.host_path(cand)
        if _elf_header(os.fspath(host)) != want or not os.path.isfile(host):
            return None
        return cand, host

    def resolve(
        self,
        soname: str,
        requester: ElfInfo | None = None,
        executable: ElfInfo | None = None,
        *,
        loaders: Sequence[ElfInfo] = (),
        searched: list[str] | None = None,
    ) -> ResolvedLib | None:
        """Find *soname* as ld.so would when *requester* needs it.

        ``requester.path`` (and ``executable.path``) must be in-root paths, as
        produced by :meth:`read_elf` or :meth:`closure`.  ``loaders`` is the
        chain of objects that caused *requester* to be loaded (its loader
        first); ld.so also searches their DT_RPATH.  Without a requester an
        x86-64 object with no search paths is assumed.  Directories and
        sources tried are appended to *searched* if given.  Returns ``None``
        if nothing matches.
        """
        if requester is not None:
            want_machine = ENUM_E_MACHINE.get(requester.machine)
            want = (requester.elf_class, want_machine) if want_machine is not None else None
        else:
            want = (64, ENUM_E_MACHINE["EM_X86_64"])
        if want is None:
            return None
        log = searched if searched is not None else []

        def found(path: str, host: Path, via: str) -> ResolvedLib:
            info = read_elf(host)
            info = dataclasses.replace(info, path=path) if info.path != path else info
            return ResolvedLib(soname=soname, path=path, host_path=host, info=info, found_via=via)

        if "/" in soname:
            path = soname if soname.startswith("/") else (
                os.path.join(os.getcwd(), soname) if self._is_host else "/" + soname
            )
            path = self._in_root(path)
            log.append(path)
            host = self.host_path(path)
            if _elf_header(os.fspath(host)) == want and os.path.isfile(host):
                return found(path, host, "path")
            return None

        def search(dirs: Iterable[str | None], via: str) -> ResolvedLib | None:
            for d in dirs:
                if d is None:
                    continue
                log.append(d)
                hit = self._try(d, soname, want)
                if hit is not None:
                    return found(hit[0], hit[1], via)
            return None

        # 1. DT_RPATH of the requester, its loaders and the executable, unless
        #    the requester has a DT_RUNPATH.  The executable's own DT_RPATH is
        #    ignored if it has a DT_RUNPATH.
        if requester is not None and not requester.runpath:
            chain = [requester, *loaders]
            did_exe = False
            for obj in chain:
                is_exe = executable is not None and obj.path == executable.path
                did_exe |= is_exe
                if is_exe and obj.runpath:
                    continue
                hit = search((self._expand(e, obj, executable) for e in obj.rpath), "rpath")
                if hit:
                    return hit
            if executable is not None and not did_exe and not executable.runpath:
                hit = search((self._expand(e, executable, executable) for e in executable.rpath), "rpath")
                if hit:
                    return hit

        # 2. LD_LIBRARY_PATH ($ORIGIN there is the executable's).
        hit = search((self._expand(e, executable, executable) for e in self.ld_library_path), "LD_LIBRARY_PATH")
        if hit:
            return hit

        # 3. DT_RUNPATH of the requester only.
        if requester is not None and requester.runpath:
            hit = search((self._expand(e, requester, executable) for e in requester.runpath), "runpath")
            if hit:
                return hit

        nodeflib = requester is not None and requester.nodeflib
        defaults = {d.rstrip("/") for d in self.default_dirs}

        # 4. ld.so.cache: the first usable entry for that name.  ld.so does not
        #    fall back to other cache entries if that one cannot be loaded.
        if self.use_cache and want == (64, ENUM_E_MACHINE["EM_X86_64"]):
            log.append("ld.so.cache")
            for entry in self.cache_entries():
                if entry.soname != soname or not entry.is_x86_64 or entry.hwcap:
                    continue
                path = self._in_root(entry.path)
                if nodeflib and os.path.dirname(path) in defaults:
                    continue
                host = self.host_path(path)
                if _elf_header(os.fspath(host)) == want and os.path.isfile(host):
                    return found(path, host, "ld.so.cache")
                break

        # 5. Default directories.
        if not nodeflib:
            hit = search(self.default_dirs, "default")
            if hit:
                return hit
        return None

    # -- closure -----------------------------------------------------------

    def closure(
        self,
        path: str,
        executable: str | None = None,
        skip_glibc: bool = True,
    ) -> list[ResolvedLib]:
        """Every object ld.so would load for *path* (an in-root path), leaves first.

        Objects are loaded breadth-first, as ld.so does; the first object found
        for a name (or a file) wins for every later request.  *executable* (an
        in-root path) supplies the executable's DT_RPATH and $ORIGIN; if not
        given and *path* is itself a program (it has PT_INTERP), *path* is the
        executable.  Preloaded objects (``preload=``) and their dependencies
        are included.  *path* itself is not part of the result.  With
        ``skip_glibc`` glibc and loader objects are neither reported, required
        nor followed.  The result is sorted so that every object comes after
        all of its (non-skipped) dependencies.
        """
        top = self.read_elf(path)
        if not top.is_x86_64:
            raise NearmetalError(
                f"{path} is a {top.elf_class}-bit {top.machine} object, not x86-64 (wrong architecture)"
            )
        if executable is not None:
            exe: ElfInfo | None = self.read_elf(executable)
        elif top.interp is not None:
            exe = top
        else:
            exe = None

        # Objects already "loaded", by lookup name, by DT_SONAME, by file.
        by_name: dict[str, ResolvedLib] = {}
        by_file: dict[str, ResolvedLib] = {}
        loader_of: dict[str, tuple[ElfInfo, ...]] = {top.path: ()}
        edges: dict[str, list[str]] = {}  # object path -> paths of its direct deps
        order: list[ResolvedLib] = []
        top_file = os.path.realpath(self.host_path(top.path))

        def register(lib: ResolvedLib) -> ResolvedLib:
            key = os.path.realpath(lib.host_path)
            existing = by_file.get(key)
            if key == top_file:
                # Depending on the root object itself: it is already loaded.
                by_name[lib.soname] = lib
                return lib
            if existing is not None:
                by_name[lib.soname] = existing
                return existing
            by_file[key] = lib
            by_name[lib.soname] = lib
            if lib.info.soname:
                by_name.setdefault(lib.info.soname, lib)
            order.append(lib)
            return lib

        queue: list[ElfInfo] = [top]

        # The program interpreter is already loaded when anything asks for it.
        if exe is not None and exe.interp and not skip_glibc:
            ipath = self._in_root(exe.interp)
            ihost = self.host_path(ipath)
            if os.path.isfile(ihost):
                iinfo = dataclasses.replace(read_elf(ihost), path=ipath)
                ilib = ResolvedLib(os.path.basename(ipath), ipath, ihost, iinfo, "preloaded")
                by_name[ipath] = ilib
                if iinfo.soname:
                    by_name[iinfo.soname] = ilib
                by_file[os.path.realpath(ihost)] = ilib
                order.append(ilib)
                loader_of[ipath] = ()

        # LD_PRELOAD: loaded after the executable, before its dependencies,
        # searched as if the executable (or the root object) asked for them.
        for name in self.preload:
            if skip_glibc and is_glibc(name):
                continue
            searched: list[str] = []
            lib = self.resolve(name, top, exe, searched=searched)
            if lib is None:
                raise NearmetalError(
                    f"cannot find preloaded {name} (searched: {', '.join(searched) or 'nothing'})"
                )
            lib = register(dataclasses.replace(lib, found_via="preloaded"))
            if lib.info.path not in loader_of:
                loader_of[lib.info.path] = (top,)
                queue.append(lib.info)

        i = 0
        while i < len(queue):
            obj = queue[i]
            i += 1
            deps = edges.setdefault(obj.path, [])
            chain = loader_of.get(obj.path, ())
            for name in obj.needed:
                if skip_glibc and is_glibc(name):
                    continue
                lib = by_name.get(name)
                if lib is None:
                    searched = []
                    lib = self.resolve(name, obj, exe, loaders=chain, searched=searched)
                    if lib is None:
                        raise NearmetalError(
                            f"cannot find {name} needed by {obj.path} "
                            f"(searched: {', '.join(dict.fromkeys(searched)) or 'nothing'})"
                        )
                    lib = register(lib)
                if lib.path == top.path or os.path.realpath(lib.host_path) == top_file:
                    continue
                deps.append(lib.info.path)
                if lib.info.path not in loader_of:
                    loader_of[lib.info.path] = (obj, *chain)
                    queue.append(lib.info)

        # Depth-first post-order from the root (then any stragglers such as
        # preloads) so that dependencies precede their dependents.
        by_path = {lib.info.path: lib for lib in order}
        seen: set[str] = set()
        result: list[ResolvedLib] = []

        def visit(p: str) -> None:
            stack: list[tuple[str, Iterable[str]]] = [(p, iter(edges.get(p, ())))]
            seen.add(p)
            while stack:
                node, it = stack[-1]
                for child in it:
                    if child not in seen:
                        seen.add(child)
                        stack.append((child, iter(edges.get(child, ()))))
                        break
                else:
                    stack.pop()
                    if node in by_path:
                        result.append(by_path[node])

        visit(top.path)
        for lib in order:
            if lib.info.path not in seen:
                visit(lib.info.path)
        if skip_glibc:
            result = [lib for lib in result if not is_glibc(lib.soname) and not is_glibc(lib.info.soname or "")]
        return result


# --------------------------------------------------------------------------
# glibc versions
# --------------------------------------------------------------------------


def glibc_version(root: str | Path = "/") -> tuple[int, int] | None:
    """Highest ``GLIBC_x.y`` that the root's libc.so.6 defines (None: no glibc)."""
    view = LinkerView(root)
    lib = view.resolve("libc.so.6")
    if lib is None:
        return None
    versions = [v for v in map(parse_glibc_version, lib.info.version_defs) if v is not None]
    return max(versions) if versions else None


def glibc_release(root: str | Path = "/") -> tuple[int, int] | None:
    """The glibc release of a root (e.g. (2, 31)), read from libc.so.6's banner; falls back
    to the highest GLIBC_x.y it defines (a release adds no tag when it adds no symbols:
    glibc 2.31's highest tag is GLIBC_2.30)."""
    import re

    lib = LinkerView(root).resolve("libc.so.6")
    if lib is None:
        return None
    try:
        with open(lib.host_path, "rb") as f:
            m = re.search(rb"release version (\d+)\.(\d+)", f.read())
        if m:
            return int(m.group(1)), int(m.group(2))
    except OSError:
        pass
    return glibc_version(root)


def glibc_missing(libs: Iterable[ResolvedLib | ElfInfo], root: str | Path) -> list[tuple[str, str]]:
    """(GLIBC_x.y tag, path of the object needing it) for every tag the libs need that the
    root's libc.so.6 does not define, highest first: what makes a bind mount fail to load."""
    lib = LinkerView(root).resolve("libc.so.6")
    defined = lib.info.version_defs if lib is not None else frozenset()
    missing: dict[str, str] = {}
    for item in libs:
        info = item.info if isinstance(item, ResolvedLib) else item
        for needed_from, tags in info.version_needs.items():
            if needed_from != "libc.so.6":
                continue
            for tag in tags:
                if tag.startswith("GLIBC_") and tag not in defined and parse_glibc_version(tag):
                    missing.setdefault(tag, info.path)
    return sorted(missing.items(), key=lambda kv: parse_glibc_version(kv[0]), reverse=True)


def glibc_requirement(libs: Iterable[ResolvedLib | ElfInfo]) -> tuple[tuple[int, int], str] | None:
    """Highest ``GLIBC_x.y`` symbol version any of *libs* needs, and the path
    of (the first) object needing it; None if none needs a GLIBC version."""
    best: tuple[tuple[int, int], str] | None = None
    for item in libs:
        info = item.info if isinstance(item, ResolvedLib) else item
        for tags in info.version_needs.values():
            for tag in tags:
                v = parse_glibc_version(tag)
                if v is not None and (best is None or v > best[0]):
                    best = (v, info.path)
    return best
