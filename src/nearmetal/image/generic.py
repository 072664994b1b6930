"""The generic image variant (`image build --generic`): the image's MPIs without their
shared-memory transports, as a portable image built without the host's fabric support has
them. Hybrid mode (the image's own MPI) then talks TCP between the ranks of one node, while
bind mode (the host's MPI mounted in and preferred, with its own plug-ins) uses shared memory
again: seed 000's mechanism on one machine. Files only, in the image; nothing is set at run
time.

After the packages and the kernels, the step
- in every MCA component directory (where `mca_btl_self.so` is: Open MPI's plug-ins) deletes
  the shared-memory BTLs (vader, sm, smcuda) and single-copy components (smsc_*); self and
  tcp stay, so the MPI still starts;
- in every UCX installation (`libucs.so.0`) deletes the shared-memory transport modules
  (`ucx/libuct_cma.so*`, knem, xpmem) and, since posix and sysv are built into libuct.so
  itself, writes UCX's library-relative configuration file (`<libdir>/../etc/ucx.conf`, or
  `../etc/ucx/ucx.conf` for UCX >= 1.14: the path is read from that libucs) with
  `UCX_TLS=^sm`. That file is read by the image's libucs only: a host UCX mounted in at
  /nm/host-mpi/lib looks for /nm/host-mpi/etc/..., so bind mode keeps its shared memory
  (/etc/ucx/ucx.conf would be read by both, and is left alone).

Every MPI of the image must be covered, judged from the closure of its `nm-mpi-info`: it loads
UCX (MPICH's ch4:ucx: measured here, Debian's MPICH 4.0 and 4.2 send intra-node messages
through UCX, its own ch4 shared memory is not in their path), or it links the libraries an
MCA directory's components link (Open MPI). An MPI that keeps its shared memory inside its
own library (bullseye's MPICH 3.4, ch3:nemesis) is refused: the image would not be generic.
Module-level imports stay light: recipe.digest() asks recipe() on paths `nearmetal run` takes.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path

from ..errors import NearmetalError

VERSION = 1  # bump when what the step does changes
MCA_MARKER = "mca_btl_self.so"
MCA_REMOVE = ("mca_btl_vader.so", "mca_btl_sm.so", "mca_btl_smcuda.so", "mca_smsc_*.so")
MCA_SHM_BTLS = ("mca_btl_vader.so", "mca_btl_sm.so")  # one of them must have been there
MCA_KEEP = ("mca_btl_self.so", "mca_btl_tcp.so")  # and these must stay
UCX_LIBRARY = "libucs.so.0"
UCX_MODULE_DIR = "ucx"
UCX_REMOVE = ("libuct_cma.so*", "libuct_knem.so*", "libuct_xpmem.so*")
UCX_TLS = "^sm"  # UCX's alias for every shared-memory transport (posix, sysv, cma, knem, xpmem)
# Where a libucs looks for its library-relative configuration file, relative to its own
# directory: UCX 1.14 and later, then 1.12-1.13. Constant text: nothing a user gives.
UCX_RELATIVE_CONF = ("../etc/ucx/ucx.conf", "../etc/ucx.conf")
UCX_CONF_TEXT = ("# nearmetal generic image (image build --generic): UCX without its shared-memory\n"
                 "# transports, as a portable build without the host's fabric support. Read by this\n"
                 "# image's UCX only (a path relative to its library), not by a host UCX bound in.\n"
                 f"UCX_TLS={UCX_TLS}\n")
LIB_ROOTS = ("usr/lib", "usr/lib64", "usr/local/lib", "lib", "lib64")


def recipe() -> dict:
    """What the step does, for the image's digest: a change here is a different image."""
    return {"version": VERSION, "mca_remove": list(MCA_REMOVE), "ucx_remove": list(UCX_REMOVE),
            "ucx_conf": UCX_CONF_TEXT}


def make_generic(rootfs: Path, mpis, kernel_bin, log) -> dict:
    """Remove the shared-memory transports from the image at `rootfs` (see the module's text);
    kernel_bin(mpi): where the kernels built against `mpi` are. What image.json records under
    "generic"; a one-line error when an MPI's shared memory cannot be removed."""
    rootfs = Path(rootfs)
    mca_dirs = find_dirs(rootfs, MCA_MARKER)
    ucx_dirs = find_dirs(rootfs, UCX_LIBRARY)
    from .. import families

    via = coverage(_closures(rootfs, mpis, kernel_bin), _component_needs(rootfs, mca_dirs), bool(ucx_dirs),
                   titles={mpi: families.get(mpi).title for mpi in mpis})
    removed, configs = [], []
    for d in mca_dirs:
        removed += strip_components(d)
    for d in ucx_dirs:
        removed += strip_files(d / UCX_MODULE_DIR, UCX_REMOVE)
        configs.append(write_ucx_conf(rootfs, d))
    removed = sorted("/" + str(p.relative_to(rootfs)) for p in removed)
    for line in [*(f"removed {p}" for p in removed), *(f"wrote {c} (UCX_TLS={UCX_TLS})" for c in configs)]:
        log.note(f"generic: {line}")
    return {"version": VERSION, "removed": removed, "ucx_config": configs, "ucx_tls": UCX_TLS, "by_mpi": via}


def find_dirs(rootfs: Path, filename: str) -> list[Path]:
    """Real directories under the image's library roots that hold `filename` (symbolic links
    to directories, such as merged-/usr's /lib, are not followed: each directory once)."""
    found = []
    for top in LIB_ROOTS:
        start = rootfs / top
        if start.is_symlink() or not start.is_dir():
            continue
        for dirpath, _dirnames, filenames in os.walk(start):
            if filename in filenames:
                found.append(Path(dirpath))
    return sorted(found)


def strip_files(directory: Path, patterns) -> list[Path]:
    """Delete the files (and symbolic links) of `directory` whose names match `patterns`."""
    if not directory.is_dir() or directory.is_symlink():
        return []
    out = []
    for entry in sorted(directory.iterdir()):
        if any(fnmatch.fnmatchcase(entry.name, p) for p in patterns) and (entry.is_symlink() or entry.is_file()):
            entry.unlink()
            out.append(entry)
    return out


def strip_components(directory: Path) -> list[Path]:
    """The shared-memory components of one MCA directory, deleted; an error when it had none
    (its MPI's shared memory is elsewhere) or lacks what must stay."""
    missing = [n for n in MCA_KEEP if not (directory / n).is_file()]
    if missing:
        raise NearmetalError(f"--generic: {directory} has no {', '.join(missing)}: without it the MPI could not "
                             f"start over TCP")
    if not any((directory / n).is_file() for n in MCA_SHM_BTLS):
        raise NearmetalError(f"--generic: {directory} has none of {', '.join(MCA_SHM_BTLS)}: this MPI's shared "
                             f"memory is not a plug-in that a generic image can leave out")
    return strip_files(directory, MCA_REMOVE)


def conf_path_in(library: bytes) -> str | None:
    """Which of UCX_RELATIVE_CONF a libucs (its bytes) reads, or None."""
    for rel in UCX_RELATIVE_CONF:
        if b"\0" + rel.encode() + b"\0" in library:
            return rel
    return None


def write_ucx_conf(rootfs: Path, libdir: Path) -> str:
    """UCX_CONF_TEXT where the libucs in `libdir` reads its library-relative configuration;
    the in-image path written. No symbolic link on the way is followed (it could leave the
    image)."""
    rel = conf_path_in((libdir / UCX_LIBRARY).read_bytes())
    if rel is None:
        raise NearmetalError(f"--generic: the UCX library {libdir / UCX_LIBRARY} reads no library-relative "
                             f"configuration file (UCX before 1.12?): its shared-memory transports cannot be "
                             f"left out")
    in_root = os.path.normpath("/" + str(libdir.relative_to(rootfs)) + "/" + rel)
    target = rootfs / in_root.lstrip("/")
    path = rootfs
    for part in Path(in_root).parts[1:]:
        path = path / part
        if path.is_symlink():
            raise NearmetalError(f"--generic: {in_root} in the image goes through a symbolic link ({path}): "
                                 f"not written")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(UCX_CONF_TEXT)
    return in_root


def coverage(closures: dict, component_needs: dict, has_ucx: bool, titles=None) -> dict:
    """MPI -> how its shared memory is left out: ["ucx"] when its program's closure loads UCX
    (libucs), ["mca:DIR"] when it links what DIR's components link (glibc aside). closures: MPI
    -> the sonames its program loads; component_needs: MCA directory (in the image) -> the
    sonames its self component needs. An MPI covered by neither is a one-line error."""
    out = {}
    for mpi, sonames in closures.items():
        how = ["ucx"] if has_ucx and UCX_LIBRARY in sonames else []
        how += [f"mca:{d}" for d, needs in sorted(component_needs.items()) if needs and needs <= set(sonames)]
        if not how:
            title = (titles or {}).get(mpi, mpi)
            raise NearmetalError(f"--generic: the image's {title} keeps its shared memory inside its own library "
                                 f"(no UCX, no transport plug-ins): a generic image cannot leave it out (build "
                                 f"it from a release whose {title} loads its transports, e.g. --distro bookworm)")
        out[mpi] = how
    return out


def _closures(rootfs: Path, mpis, kernel_bin) -> dict:
    from ..elf import LinkerView

    view = LinkerView(rootfs)
    out = {}
    for mpi in mpis:
        libs = view.closure(f"{kernel_bin(mpi)}/nm-mpi-info")
        out[mpi] = {lib.soname for lib in libs} | {lib.info.soname for lib in libs if lib.info.soname}
    return out


def _component_needs(rootfs: Path, mca_dirs) -> dict:
    from ..elf import is_glibc, read_elf

    return {"/" + str(d.relative_to(rootfs)): {n for n in read_elf(d / MCA_MARKER).needed if not is_glibc(n)}
            for d in mca_dirs}
