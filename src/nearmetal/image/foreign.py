"""What an image nearmetal did not build holds, read from its files alone (no chroot, no
program of the image run): the distribution, glibc, and each MPI family whose library the
image's loader would find, with its version from the image's package database where it
has one. The result has image.json's keys, so hybrid and bind planning, doctor and the
store treat a user's image like one of nearmetal's."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from .. import families
from ..elf import DEFAULT_DIRS, LinkerView, glibc_release

# Where an MPI library is looked for when the image's ld.so.cache does not name it: the
# linker's default directories, and /usr/local/lib where images built from source put one.
LIB_DIRS = DEFAULT_DIRS + ("/usr/local/lib",)


MAX_TEXT = 64 << 20  # dpkg's status file of a large image is a few MB


def read_text(rootfs: Path, path: str) -> str | None:
    """A text file of the image, its links resolved beneath the image's root (an imported
    image's /etc/os-release may link to the host's /dev/zero or /etc/shadow): a regular file
    only, at most MAX_TEXT bytes; None otherwise."""
    real = LinkerView(rootfs).host_path("/" + path.lstrip("/"))
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return f.read(MAX_TEXT).decode(errors="replace")


def os_release(rootfs: Path) -> dict:
    for rel in ("etc/os-release", "usr/lib/os-release"):
        text = read_text(rootfs, rel)
        if text is None:
            continue
        out = {}
        for line in text.splitlines():
            key, _, value = line.partition("=")
            if key and value:
                out[key.strip()] = value.strip().strip('"')
        return out
    return {}


def dpkg_owner_versions(rootfs: Path, paths) -> dict:
    """{path: (package, version)} for the given in-image paths, from /var/lib/dpkg (if any)."""
    info = LinkerView(rootfs).host_path("/var/lib/dpkg/info")
    wanted = {p: None for p in paths}
    if info.is_symlink() or not info.is_dir() or not wanted:
        return {}
    owners = {}
    for lst in info.glob("*.list"):
        text = read_text(rootfs, f"/var/lib/dpkg/info/{lst.name}")
        if text is None:
            continue
        lines = set(text.splitlines())
        for p in wanted:
            if p in lines and p not in owners:
                owners[p] = lst.stem.split(":")[0]
    versions = _dpkg_status(rootfs)
    return {p: (pkg, versions.get(pkg)) for p, pkg in owners.items()}


def _dpkg_status(rootfs: Path) -> dict:
    text = read_text(rootfs, "var/lib/dpkg/status")
    if text is None:
        return {}
    out = {}
    for stanza in text.split("\n\n"):
        pkg = re.search(r"^Package: (\S+)", stanza, re.M)
        ver = re.search(r"^Version: (\S+)", stanza, re.M)
        if pkg and ver:
            out[pkg.group(1)] = ver.group(1)
    return out


def find_mpi_libraries(view: LinkerView) -> dict:
    """{family: (soname, in-image path)} for every MPI family whose library is in the image."""
    found = {}
    entries = [e for e in view.cache_entries() if e.is_x86_64 and not e.hwcap]
    for name in families.names():
        pattern = families.get(name).library_re()
        hit = next(((e.soname, e.path) for e in entries if pattern.match(e.soname)), None)
        if hit is None:
            for soname in families.get(name).sonames:
                if not pattern.match(soname):
                    continue
                path = next((f"{d}/{soname}" for d in LIB_DIRS if view.host_path(f"{d}/{soname}").exists()), None)
                if path:
                    hit = (soname, path)
                    break
        if hit:
            found[name] = hit
    return found


def describe(rootfs: Path, name: str, digest: str, source: str) -> dict:
    """image.json-style metadata of a foreign rootfs."""
    from .inspect import timestamp, upstream_version

    rootfs = Path(rootfs)
    view = LinkerView(rootfs)
    release = os_release(rootfs)
    glibc = glibc_release(rootfs)
    libs = find_mpi_libraries(view)
    real = {fam: view.resolve_in_root(path) for fam, (_, path) in libs.items()}
    owners = dpkg_owner_versions(rootfs, list(real.values()) + [p for _, p in libs.values()])
    meta = {
        "name": name,
        "distro": release.get("VERSION_CODENAME") or release.get("ID") or "",
        "os": release.get("PRETTY_NAME", ""),
        "mpis": list(libs),
        "digest": digest,
        "foreign": True,
        "source": source,
        "glibc": f"{glibc[0]}.{glibc[1]}" if glibc else None,
        "mpi": {},
        "kernels": {},
        "built": timestamp(),
        "formats": [],
    }
    for fam, (soname, path) in libs.items():
        pkg, version = owners.get(real[fam]) or owners.get(path) or (None, None)
        launcher = next((f"/usr/bin/{exe}" for exe in families.get(fam).image_launchers
                         if view.host_path(f"/usr/bin/{exe}").exists()), None)
        meta["mpi"][fam] = {"family": fam, "version": upstream_version(version or ""), "package": pkg,
                            "package_version": version, "soname": soname, "library": path,
                            "library_real": real[fam], "library_ldcache": path, "mpiexec": launcher}
    return meta
