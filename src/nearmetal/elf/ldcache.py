"""/etc/ld.so.cache: the entries ld.so consults after the search paths (both formats).
Part of nearmetal.elf."""

from __future__ import annotations

import os
import stat
import struct
from dataclasses import dataclass

from nearmetal.errors import NearmetalError

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
# A system's cache is kilobytes; an imported image's may be anything (a multi-GB file, a FIFO)
MAX_CACHE_BYTES = 64 << 20


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
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO there cannot block
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise NearmetalError(f"cannot read {os.fspath(path)}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NearmetalError(f"{os.fspath(path)} is not a regular file, so not an ld.so cache")
        try:
            data = f.read(MAX_CACHE_BYTES + 1)
        except OSError as exc:
            raise NearmetalError(f"cannot read {os.fspath(path)}: {exc.strerror or exc}") from None
    if len(data) > MAX_CACHE_BYTES:
        raise NearmetalError(f"{os.fspath(path)} is larger than {MAX_CACHE_BYTES >> 20} MiB: not an ld.so cache")
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
