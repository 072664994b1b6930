"""The GNU dynamic linker's library search, emulated over one filesystem root
(LinkerView.resolve): DT_RPATH, LD_LIBRARY_PATH, DT_RUNPATH, ld.so.cache, the default
directories, with $ORIGIN and symbolic links interpreted inside the root. The dependency
closure built on it is nearmetal.elf.closure. Part of nearmetal.elf."""

from __future__ import annotations

import dataclasses
import os
import re
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from elftools.elf.enums import ENUM_E_MACHINE

from nearmetal.errors import NearmetalError

from .ldcache import CacheEntry, read_ld_so_cache
from .reading import ElfInfo, _elf_header, read_elf

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
        """Every object ld.so would load for *path* (an in-root path), leaves first:
        :func:`nearmetal.elf.closure.closure` over this view."""
        from .closure import closure

        return closure(self, path, executable, skip_glibc)
