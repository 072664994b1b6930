"""Probing one MPI family's installation (slow: runs the wrappers and info tools).

Only run on a discovery cache miss; see discovery.mpi for the cached entry point. What
differs between families is asked of the family's profile (families/).
"""

import os
import shutil

from ..families import abi_of
from ..families import get as get_family
from ..families import run_text


def _link_line(wrapper):
    """-L directories and -l names from the wrapper's link line (works for both families)."""
    for flag in ("-showme:link", "-show", "-link_info"):
        text = run_text([wrapper, flag])
        if "-l" in text:
            words = text.split()
            libdirs = [w[2:] for w in words if w.startswith("-L")]
            libs = [w[2:] for w in words if w.startswith("-l")]
            return libdirs, libs
    return [], []


def _find_library(libdirs, names, beside=False):
    """The real file behind lib<name>.so in the wrapper's -L dirs, else the host linker's view.
    beside: the SONAME's file in the same directory wins (an installation under a prefix,
    which the host's linker does not know)."""
    from ..elf import LinkerView, read_elf  # heavy import: only on a discovery miss

    view = LinkerView("/")
    for name in names:
        for d in list(libdirs) + ["/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"]:
            dev = os.path.join(d, f"lib{name}.so")
            if os.path.exists(dev):
                info = read_elf(os.path.realpath(dev))
                if info.soname and beside and os.path.exists(os.path.join(d, info.soname)):
                    return os.path.join(d, info.soname), info.soname
                if info.soname:
                    # The run-time file is the SONAME as the loader resolves it.
                    for lib in [view.resolve(info.soname, info)]:
                        if lib is not None:
                            return str(lib.host_path), info.soname
                    return os.path.realpath(dev), info.soname
    return None, None


def _plugin_dirs(family, launcher, library):
    """Directories of run-time loaded modules the bind model must carry along: the
    family's own, plus the transports and topology libraries any MPI may load."""
    dirs = dict(family.plugin_dirs(launcher, library))
    libdir = os.path.dirname(library)
    for name in ("ucx", "libfabric", "hwloc"):
        if os.path.isdir(os.path.join(libdir, name)):
            dirs[name] = os.path.join(libdir, name)
    return dirs


def probe(name, prefix=None):
    """Describe the host's installation of one MPI family (on PATH, or the one whose bin/ is
    under `prefix`), or None if absent."""
    family = get_family(name)
    where = os.path.join(prefix, "bin") if prefix else None
    for wname in family.wrappers:
        wrapper = shutil.which(wname, path=where) if where else shutil.which(wname)
        if not wrapper or not family.identifies_wrapper(wrapper):
            continue
        libdirs, libs = _link_line(wrapper)
        if prefix:  # a wrapper moved with its files may still name its build prefix: its own libraries first
            libdirs = [os.path.join(prefix, d) for d in ("lib", "lib/x86_64-linux-gnu", "lib64")] + libdirs
        names = [n for n in libs if n in family.link_libs] or list(family.link_libs)
        library, soname = _find_library(libdirs, names, beside=bool(prefix))
        if not library:
            continue
        launcher = None
        for lname in family.launcher_binaries:
            cand = shutil.which(lname, path=os.path.dirname(wrapper)) or (None if prefix else shutil.which(lname))
            if cand and family.identifies_launcher(cand):
                launcher = cand
                break
        if not launcher:
            continue
        return {
            "family": name,
            "version": family.version(launcher),
            "library": library,
            "soname": soname,
            "abi": abi_of(soname) or name,
            "compiler": wrapper,
            "launcher": launcher,
            "pmi": family.pmi_flavours(launcher, library),
            "plugin_dirs": _plugin_dirs(family, launcher, library),
            **({"prefix": prefix} if prefix else {}),
        }
    return None
