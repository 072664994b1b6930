"""Probing one MPI family's installation (slow: runs the wrappers and info tools).

Only run on a discovery cache miss; see discovery.mpi for the cached entry point.
"""

import os
import re
import shutil
import subprocess

from .mpi import ABI_BY_SONAME, FAMILIES


def _run(argv, timeout=20):
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout + out.stderr


def _link_line(wrapper):
    """-L directories and -l names from the wrapper's link line (works for both families)."""
    for flag in ("-showme:link", "-show", "-link_info"):
        text = _run([wrapper, flag])
        if "-l" in text:
            words = text.split()
            libdirs = [w[2:] for w in words if w.startswith("-L")]
            libs = [w[2:] for w in words if w.startswith("-l")]
            return libdirs, libs
    return [], []


def _wrapper_family(wrapper):
    text = _run([wrapper, "-showme:version"])
    if "Open MPI" in text:
        return "openmpi"
    text = _run([wrapper, "-show"])
    if "-lmpich" in text or "mpich" in text:
        return "mpich"
    return None


def _find_library(libdirs, names):
    """The real file behind lib<name>.so in the wrapper's -L dirs, else the host linker's view."""
    from ..elf import LinkerView, read_elf  # heavy import: only on a discovery miss

    view = LinkerView("/")
    for name in names:
        for d in list(libdirs) + ["/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"]:
            dev = os.path.join(d, f"lib{name}.so")
            if os.path.exists(dev):
                info = read_elf(os.path.realpath(dev))
                if info.soname:
                    # The run-time file is the SONAME as the loader resolves it.
                    for lib in [view.resolve(info.soname, info)]:
                        if lib is not None:
                            return str(lib.host_path), info.soname
                    return os.path.realpath(dev), info.soname
    return None, None


def _version(family, launcher):
    if family == "openmpi":
        info = shutil.which("ompi_info", path=os.path.dirname(launcher)) or "ompi_info"
        m = re.search(r"Open MPI v?(\d+\.\d+(?:\.\d+)?)", _run([info, "--version"]))
        if not m:
            m = re.search(r"Open MPI\D*(\d+\.\d+\.\d+)", _run([launcher, "--version"]))
        return m.group(1) if m else "unknown"
    text = _run([launcher, "-info"])
    m = re.search(r"Version:\s*(\S+)", text)
    if not m:
        m = re.search(r"MPICH Version:\s*(\S+)", _run(["mpichversion"]))
    return m.group(1) if m else "unknown"


def _pmi_flavours(family, launcher, library):
    if family == "openmpi":
        info = shutil.which("ompi_info", path=os.path.dirname(launcher)) or "ompi_info"
        names = set(re.findall(r"mca:pmix:([a-z0-9]+):", _run([info, "--parsable"])))
        flavours = []
        if any(n.startswith(("ext", "pmix")) for n in names):
            flavours.append("pmix")
        flavours += sorted(n for n in names if n in ("s1", "s2", "flux", "cray"))
        return flavours or ["pmix"]
    # MPICH speaks simple PMI-1 to hydra; PMI-2 / PMIx client code shows in the binary.
    with open(library, "rb") as f:
        blob = f.read()
    flavours = ["pmi1"]
    if b"PMI2" in blob:
        flavours.append("pmi2")
    if b"PMIx_Init" in blob:
        flavours.append("pmix")
    return flavours


def _plugin_dirs(family, launcher, library):
    """Directories of run-time loaded modules the bind model must carry along."""
    dirs = {}
    libdir = os.path.dirname(library)
    if family == "openmpi":
        info = shutil.which("ompi_info", path=os.path.dirname(launcher)) or "ompi_info"
        m = re.search(r"path:pkglibdir:(\S+)", _run([info, "--path", "pkglibdir", "--parsable"]))
        if m and os.path.isdir(m.group(1)):
            dirs["openmpi"] = m.group(1)
    for name in ("ucx", "libfabric", "hwloc"):
        if os.path.isdir(os.path.join(libdir, name)):
            dirs[name] = os.path.join(libdir, name)
    pmix = [d for d in (os.path.join(libdir, "pmix2", "lib", "pmix"), os.path.join(libdir, "pmix")) if os.path.isdir(d)]
    if pmix and family == "openmpi":
        dirs["pmix"] = pmix[0]
    return dirs


def probe(family):
    """Describe the host's installation of one MPI family, or None if absent."""
    spec = FAMILIES[family]
    for wname in spec["wrappers"]:
        wrapper = shutil.which(wname)
        if not wrapper or _wrapper_family(wrapper) != family:
            continue
        libdirs, libs = _link_line(wrapper)
        names = [n for n in libs if n in spec["libs"]] or list(spec["libs"])
        library, soname = _find_library(libdirs, names)
        if not library:
            continue
        launcher = None
        for lname in spec["launchers"]:
            cand = shutil.which(lname, path=os.path.dirname(wrapper)) or shutil.which(lname)
            if cand and _launcher_family(cand) == family:
                launcher = cand
                break
        if not launcher:
            continue
        return {
            "family": family,
            "version": _version(family, launcher),
            "library": library,
            "soname": soname,
            "abi": ABI_BY_SONAME.get(soname, family),
            "compiler": wrapper,
            "launcher": launcher,
            "pmi": _pmi_flavours(family, launcher, library),
            "plugin_dirs": _plugin_dirs(family, launcher, library),
        }
    return None


def _launcher_family(launcher):
    text = _run([launcher, "--version"])
    if "Open MPI" in text or "OpenRTE" in text:
        return "openmpi"
    if "HYDRA" in text or "hydra" in text.lower():
        return "mpich"
    return None


