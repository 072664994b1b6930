"""The dependency closure: every object ld.so would load for a program or library, in
load order, found by the search emulation of nearmetal.elf.search. Part of nearmetal.elf."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable

from nearmetal.errors import NearmetalError

from .reading import ElfInfo, is_glibc, read_elf
from .search import LinkerView, ResolvedLib


def closure(
    view: LinkerView,
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
    top = view.read_elf(path)
    if not top.is_x86_64:
        raise NearmetalError(
            f"{path} is a {top.elf_class}-bit {top.machine} object, not x86-64 (wrong architecture)"
        )
    if executable is not None:
        exe: ElfInfo | None = view.read_elf(executable)
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
    top_file = os.path.realpath(view.host_path(top.path))

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
        ipath = view._in_root(exe.interp)
        ihost = view.host_path(ipath)
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
    for name in view.preload:
        if skip_glibc and is_glibc(name):
            continue
        searched: list[str] = []
        lib = view.resolve(name, top, exe, searched=searched)
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
                lib = view.resolve(name, obj, exe, loaders=chain, searched=searched)
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
