"""Whether a host MPI can move CUDA device buffers itself (CUDA-aware), from its files alone:
no process is started and no library loaded, so doctor and bind mode ask it freely and the
unit tests ask it of a fake tree.

- UCX (Open MPI's pml ucx, MPICH's ch4:ucx): its CUDA transports are modules in UCX's module
  directory (`ucx/` beside libucs, where libucs looks for them): libuct_cuda (cuda_copy,
  cuda_ipc), libuct_cuda_gdrcopy (gdr_copy), libucm_cuda (the memory hooks). `ucx_info -d`
  lists the same transports once the modules load, which needs a driver; the files do not.
- the family's own marks (families/, MpiFamily.cuda_components): Open MPI built --with-cuda
  installs the smcuda BTL and libmca_common_cuda (`ompi_info --parsable --all` then says
  mpi_built_with_cuda_support:value:true); a library that links the CUDA runtime (libcudart).

Bind mode (models/bind.py) stages the UCX CUDA modules with the MPI when they are there.
"""

import os
import re

from ..errors import NearmetalError

UCX_CUDA_MODULE = re.compile(r"^lib(?:uct|ucm)_cuda[\w-]*\.so(?:\.\d+)*$")
UCX_TRANSPORTS = {"libuct_cuda": ("cuda_copy", "cuda_ipc"), "libuct_cuda_gdrcopy": ("gdr_copy",)}
CUDA_RUNTIME = re.compile(r"^lib(?:cudart|cuda)\.so")
NO_CUDA = ("host MPI has no CUDA support (no UCX cuda_copy/cuda_ipc modules, not built --with-cuda): "
           "device buffers go through host memory (nm-gpu-osu stages them)")


def _listdir(directory):
    try:
        return sorted(os.listdir(directory))
    except OSError:
        return []


def ucx_modules(libucs):
    """(UCX's module directory, [its CUDA module files]) for the libucs at path `libucs`
    (as the linker found it); (None, []) without a libucs."""
    if not libucs:
        return None, []
    directory = os.path.join(os.path.dirname(libucs), "ucx")
    files = [os.path.join(directory, n) for n in _listdir(directory)
             if UCX_CUDA_MODULE.match(n) and os.path.isfile(os.path.join(directory, n))]
    return (directory if files else None), files


def _module_name(path):
    return os.path.basename(path).split(".so", 1)[0]


def detect(installation, libucs=None):
    """{cuda, via: [what says so, in words], transports: [names], ucx_dir, ucx_modules} of a
    host MPI record (discovery.mpi); libucs: the path of the libucs its closure loads (None:
    it loads none, or it is looked up through the host's linker)."""
    if libucs is None:
        libucs = _host_libucs(installation)
    ucx_dir, modules = ucx_modules(libucs)
    via, transports = [], []
    if modules:
        names = sorted({_module_name(m) for m in modules})
        found = [t for n in names for t in UCX_TRANSPORTS.get(n, ())]
        transports += found
        via.append(f"UCX {', '.join(found) or 'CUDA memory hooks'} ({', '.join(n + '.so' for n in names)} in {ucx_dir})")
    from ..families import get as family

    try:
        words, more = family(installation["family"]).cuda_components(installation)  # the family's own build marks
    except (KeyError, ValueError, NearmetalError):
        words, more = [], []
    via += words
    transports += more
    return {"cuda": bool(via), "via": via, "transports": transports, "ucx_dir": ucx_dir, "ucx_modules": modules}


def links_cuda(library):
    """The CUDA runtime/driver sonames a library file links (DT_NEEDED), [] when none or unreadable."""
    from ..elf import read_elf

    if not library:
        return []
    try:
        return [n for n in read_elf(library).needed if CUDA_RUNTIME.match(n)]
    except (NearmetalError, OSError):
        return []


def _host_libucs(installation):
    """The libucs the host's linker gives the MPI's library (or one of its plugins), if any."""
    from ..elf import LinkerView, read_elf
    from ..errors import NearmetalError

    try:
        host = LinkerView("/")
        lib = host.resolve("libucs.so.0", read_elf(installation["library"])) if installation.get("library") else None
    except (NearmetalError, OSError, KeyError):
        return None
    return str(lib.host_path) if lib is not None else None


def words(found):
    """One line for doctor: the CUDA support found, or that there is none."""
    if not found["cuda"]:
        return NO_CUDA
    return f"host MPI is CUDA-aware: {'; '.join(found['via'])}"
