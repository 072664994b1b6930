"""glibc versions: what a root's libc.so.6 provides and what objects need (GLIBC_x.y
symbol versions), the check behind bind mounts. Part of nearmetal.elf."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from .reading import ElfInfo, parse_glibc_version
from .search import LinkerView, ResolvedLib

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
