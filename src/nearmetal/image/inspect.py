"""What a freshly built rootfs holds, for image.json: glibc, each MPI's version, library and
launcher, the kernels. ELF files and the loader's cache are read with elf.py (no second ELF
reader, no `ldconfig -p`); package versions come from the image's dpkg."""

from __future__ import annotations

import contextlib
import os
from datetime import datetime, timezone
from pathlib import Path

from .. import families
from ..elf import LinkerView, glibc_release
from .chroot import chroot_output
from .recipe import MOUNT_POINTS, RECIPE_VERSION, kernel_bin, kernel_programs, mirror

DEFAULT_TRIPLE = "x86_64-linux-gnu"


def timestamp() -> str:
    """Now, in UTC, as image.json records times."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def metadata(name, distro, mpis, packages, digest, rootfs: Path, log) -> dict:
    view = LinkerView(rootfs)
    triple = chroot_output(rootfs, ["gcc", "-dumpmachine"], log).strip() or DEFAULT_TRIPLE
    glibc = glibc_release(rootfs)
    meta = {
        "name": name,
        "distro": distro,
        "mpis": list(mpis),
        "digest": digest,
        "recipe": RECIPE_VERSION,
        "packages": list(packages),
        "mirror": mirror(),
        "arch": triple,
        "glibc": f"{glibc[0]}.{glibc[1]}" if glibc else None,
        "glibc_package": dpkg_versions(rootfs, ["libc6"], log).get("libc6"),
        "mpi": {},
        "kernels": {mpi: kernel_bin(mpi) for mpi in mpis},
        "kernel_programs": kernel_programs(rootfs / "opt/nearmetal/src"),
        "mount_points": ["/" + p for p in MOUNT_POINTS],
        "built": timestamp(),
        "formats": ["dir"],
    }
    versions = dpkg_versions(rootfs, [p for mpi in mpis for p in families.get(mpi).image_packages], log)
    for mpi in mpis:
        family = families.get(mpi)
        pkg = family.image_packages[0]
        soname, library, library_real = mpi_library(view, mpi, triple)
        launcher = next((f"/usr/bin/{exe}" for exe in family.image_launchers if (rootfs / "usr/bin" / exe).exists()),
                        None)
        meta["mpi"][mpi] = {
            "family": mpi,
            "version": upstream_version(versions.get(pkg, "")),
            "package": pkg,
            "package_version": versions.get(pkg),
            "pkgconfig_version": chroot_output(rootfs, ["pkg-config", "--modversion", family.pkgconfig], log).strip()
            or None,
            "libdir": chroot_output(rootfs, ["pkg-config", "--variable=libdir", family.pkgconfig], log).strip() or None,
            "soname": soname,
            "library": library,
            "library_real": library_real,
            # What the image's loader picks (its ld.so.cache): /lib/... on merged-/usr Debian.
            "library_ldcache": ldcache_path(view, soname) if soname else None,
            "mpiexec": launcher,
            "bin": kernel_bin(mpi),
        }
    meta["rootfs_bytes"] = tree_bytes(rootfs)
    return meta


def mpi_library(view: LinkerView, mpi: str, triple: str):
    """(soname, in-image path, in-image real file) of the MPI library nm-mpi-info links against."""
    pattern = families.get(mpi).library_re()
    needed = view.read_elf(f"{kernel_bin(mpi)}/nm-mpi-info").needed
    soname = next((n for n in needed if pattern.match(n)), None)
    if not soname:
        return None, None, None
    # The multiarch directories first (where Debian's -dev symlinks point), then a
    # family's private libdir (/usr/lib/TRIPLE/FAMILY/lib).
    for d in (f"/usr/lib/{triple}", f"/lib/{triple}", "/usr/lib", "/lib", f"/usr/lib/{triple}/{mpi}/lib"):
        path = f"{d}/{soname}"
        if view.host_path(path).exists():
            return soname, path, view.resolve_in_root(path)
    return soname, None, None


def ldcache_path(view: LinkerView, soname: str) -> str | None:
    """The path the image's /etc/ld.so.cache gives for soname: its first x86-64 entry, the
    one ld.so prefers (hwcap-specific entries aside, as elf.LinkerView does)."""
    return next((e.path for e in view.cache_entries() if e.soname == soname and e.is_x86_64 and not e.hwcap), None)


def dpkg_versions(rootfs: Path, packages, log) -> dict:
    """package -> installed version, for those of `packages` that are installed."""
    out = chroot_output(rootfs, ["dpkg-query", "-W", "-f", "${Package}\t${Version}\n", *packages], log)
    versions = {}
    for line in out.splitlines():
        pkg, _, version = line.partition("\t")
        if version:
            versions[pkg.split(":")[0]] = version
    return versions


def upstream_version(deb_version: str) -> str | None:
    """4.1.4-3+b1 -> 4.1.4; 1:2.3-1 -> 2.3; 4.3.0+really4.2.1-1 -> 4.2.1."""
    if not deb_version:
        return None
    version = deb_version.split(":", 1)[-1]
    version = version.rsplit("-", 1)[0] if "-" in version else version
    # Debian's "+really" marks a downgrade: trixie ships an MPI as 4.3.0+really4.2.1.
    version = version.split("+really", 1)[-1]
    return version.split("+dfsg", 1)[0].split("~", 1)[0]


def tree_bytes(root: Path) -> int:
    """Disk usage of a tree (allocated blocks, hard links counted each time)."""
    total = 0
    for dirpath, dirnames, filenames in os.walk(root):
        for n in filenames + dirnames:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, n)).st_blocks * 512
    return total
