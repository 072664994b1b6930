"""Reading ELF objects: what the dynamic linker cares about in one file (ElfInfo, read by
pyelftools, cached), and which objects belong to glibc itself. Part of nearmetal.elf."""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import re
import stat
import struct
from dataclasses import dataclass, field

from elftools.common.exceptions import ELFError
from elftools.elf.dynamic import DynamicSection, DynamicSegment
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerDefSection, GNUVerNeedSection

from nearmetal.errors import NearmetalError

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
