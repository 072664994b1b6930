"""Container images: a Debian rootfs with one or more MPI families and the nearmetal kernels.

Layout under home()/images:

    NAME/rootfs/              the directory image (always present)
    NAME/image.json           what the image is (see _metadata); also at rootfs/opt/nearmetal/image.json
    NAME/NAME.sqfs            with --format squashfs
    NAME.build.log            full log of the last build
    localhost/nearmetal-NAME  with --format podman, in nearmetal's private podman storage

A build happens in a temporary directory (.NAME.build-PID) renamed into place at the
end, so an interrupted build never leaves a half image that looks complete. The bare
debootstrap result is cached per distro under home()/cache/debootstrap/DISTRO and
copied (cp -a, under a second) for every image of that distro.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from ..errors import NearmetalError
from ..home import KERNELS_SRC, home, subdir

DISTROS = ("bookworm", "trixie", "bullseye")
MPI_FAMILIES = ("openmpi", "mpich")
FORMATS = ("dir", "squashfs", "podman")

# Bump when the recipe changes in a way that changes the image.
RECIPE_VERSION = 3
BASE_PACKAGES = ("gcc", "make", "pkg-config", "libc6-dev")
MPI_PACKAGES = {
    "openmpi": ("openmpi-bin", "libopenmpi-dev"),
    "mpich": ("mpich", "libmpich-dev"),
}
# The parallel I/O stack nm-iobench builds against, per MPI family: Debian builds PnetCDF and
# parallel netCDF-4 for Open MPI only, parallel HDF5 for both.
IO_PACKAGES = {
    "openmpi": ("libpnetcdf-dev", "libnetcdf-mpi-dev", "libhdf5-openmpi-dev"),
    "mpich": ("libhdf5-mpich-dev",),
}
# Serial readers (ncdump, h5dump) to inspect what a run wrote.
IO_TOOLS = ("netcdf-bin", "hdf5-tools")
_MPI_PC = {"openmpi": "ompi-c", "mpich": "mpich"}
_MPI_LIB_RE = {"openmpi": re.compile(r"^libmpi\.so\.\d+$"), "mpich": re.compile(r"^libmpich\.so\.\d+$")}
_MPI_LAUNCHERS = {"openmpi": ("mpiexec.openmpi", "mpirun.openmpi"), "mpich": ("mpiexec.mpich", "mpiexec.hydra")}
DEFAULT_MIRROR = "http://deb.debian.org/debian"
SQUASHFS_COMP = "lz4"  # measured on 2 cores, ~780 MB rootfs: lz4 1.4 s, gzip 43 s, zstd 41 s
def _kernel_programs(src=None):
    """Programs the kernels Makefile builds; `src` = the copy inside the image being built, so
    the list matches the sources that were copied (kernels/ may change meanwhile)."""
    from ..kernels.build import programs

    return programs(src) if src is not None else programs()
IN_IMAGE_JSON = "opt/nearmetal/image.json"
MOUNT_POINTS = ("nm/host-mpi", "nm/work")
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}$")
_CHROOT_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "DEBIAN_FRONTEND": "noninteractive",
    "LC_ALL": "C",
    "HOME": "/root",
}


@dataclass
class Image:
    name: str
    rootfs: Path  # the directory image, always present (for a lone .sqfs: the .sqfs path)
    sqfs: Path | None  # NAME.sqfs when built with --format squashfs
    podman_ref: str | None  # "localhost/nearmetal-NAME:latest" when imported into podman
    distro: str
    mpis: list[str]  # MPI families installed in the image
    meta: dict = field(repr=False)  # the image.json content

    def kernel_bin(self, mpi: str) -> str:
        """In-container directory of the kernels built against `mpi`."""
        if mpi not in self.mpis:
            raise NearmetalError(f"image '{self.name}' has no {mpi} (it has: {', '.join(self.mpis)}); "
                                 f"build one with `nearmetal image build --mpi {mpi}`")
        return f"/opt/nearmetal/{mpi}/bin"

    def mpi_info(self, mpi: str) -> dict:
        self.kernel_bin(mpi)
        return self.meta["mpi"][mpi]


# ----------------------------------------------------------------------------- public API


def default_name(distro: str, mpis) -> str:
    """nm-DISTRO-MPI1-MPI2 with the MPI families sorted, e.g. nm-bookworm-mpich-openmpi."""
    return "-".join(["nm", distro, *sorted(set(mpis))])


def host_distro() -> str:
    """VERSION_CODENAME from /etc/os-release ("" when there is none)."""
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return ""
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "VERSION_CODENAME":
            return value.strip().strip('"').strip("'")
    return ""


def images_dir() -> Path:
    return subdir("images")


def podman_ref(name: str) -> str:
    return f"localhost/nearmetal-{name}:latest"


def build(distro=None, mpis=("openmpi", "mpich"), fmt="dir", name=None, progress=True) -> Image:
    """Build (or reuse) an image. `fmt` is one of FORMATS or a list of them; "dir" is always built.

    A no-op when the image exists with the same inputs (recipe, distro, MPIs, packages,
    kernel sources) and every requested format; missing formats are added without a rebuild.
    A rebuild (changed inputs) also rebuilds every format the old image had.
    """
    distro, mpis, formats, name = _check_inputs(distro, mpis, fmt, name)
    packages = _packages(mpis)
    digest = _digest(distro, mpis, packages)
    report = _Reporter(name, progress)
    final = images_dir() / name
    with _locked(images_dir() / f".{name}.lock", report, f"another build of image '{name}'"):
        _clean_leftovers(name)
        meta = _read_json(final / "image.json")
        if meta and meta.get("digest") == digest and (final / "rootfs").is_dir():
            missing = [f for f in formats if not _format_present(final, name, f)]
            if not missing:
                report.note(f"image '{name}' is up to date ({', '.join(_present_formats(final, name, meta))}): nothing to do")
                return _image_from_dir(final, _read_json(final / "image.json"))
            with report.session(f"adding {', '.join(missing)} to image '{name}'"):
                log = _Log(images_dir() / f"{name}.build.log", truncate=False)
                if "squashfs" in missing:
                    _make_squashfs(final, name, log, report, meta)
                    _write_meta(final, meta, formats=_present_formats(final, name, meta) + ["squashfs"])
                if "podman" in missing:
                    _import_podman(final, name, log, report, meta)
                    _write_meta(final, meta, formats=_present_formats(final, name, meta) + ["podman"])
            return _image_from_dir(final, _read_json(final / "image.json"))
        if meta and (final / "rootfs").is_dir():
            # A rebuild refreshes every format the old image had: a stale .sqfs or podman
            # copy must not outlive it, and dropping it would surprise whoever built it.
            kept = [f for f in _present_formats(final, name, meta) if f != "podman" or shutil.which("podman")]
            formats = [f for f in FORMATS if f in formats or f in kept]
        with report.session(f"building image '{name}' ({distro}, {' + '.join(mpis)})"):
            return _full_build(name, distro, mpis, formats, packages, digest, final, report, old_meta=meta)


def resolve(spec: str) -> Image:
    """An image from a NAME under home()/images, a rootfs directory, an image directory or a .sqfs."""
    spec = str(spec)
    try:
        return _resolve(spec)
    except (OSError, RuntimeError, ValueError) as e:  # /proc/1/root, a 300-character name, ~nosuchuser, NUL
        raise NearmetalError(f"image '{spec}': {getattr(e, 'strerror', None) or e}")


def _resolve(spec):
    if spec and "/" not in spec and _NAME_RE.match(spec):
        meta = _read_json(images_dir() / spec / "image.json")
        if meta and (images_dir() / spec / "rootfs").is_dir():
            return _image_from_dir(images_dir() / spec, meta)
    path = Path(spec).expanduser()
    if spec and path.is_dir():
        path = path.resolve()
        if (path / "image.json").is_file() and (path / "rootfs").is_dir():  # an image directory
            return _image_from_dir(path, _read_json(path / "image.json"))
        if (path.parent / "image.json").is_file() and path.name == "rootfs":  # rootfs of an image directory
            meta = _read_json(path.parent / "image.json")
            if meta:
                return _image_from_dir(path.parent, meta)
        meta = _read_json(path / IN_IMAGE_JSON)
        if not meta:
            raise NearmetalError(f"{path} is not a nearmetal image: it has no /{IN_IMAGE_JSON} "
                                 "(build one with `nearmetal image build`)")
        return _image(meta, rootfs=path, sqfs=None, podman=False)
    if spec and path.is_file() and path.suffix == ".sqfs":
        return _image_from_sqfs(path.resolve())
    raise NearmetalError(f"no image '{spec}': build it with `nearmetal image build ...` or give a path")


def list_images() -> list[Image]:
    out = []
    base = images_dir()
    for entry in sorted(base.iterdir()):
        if entry.name.startswith(".") or not entry.is_dir():
            continue
        meta = _read_json(entry / "image.json")
        if meta and (entry / "rootfs").is_dir():
            out.append(_image_from_dir(entry, meta))
    return out


# ----------------------------------------------------------------------------- inputs


def _check_inputs(distro, mpis, fmt, name):
    if distro is None:
        distro = host_distro()
        if distro not in DISTROS:
            distro = "bookworm"
    if distro not in DISTROS:
        raise NearmetalError(f"unknown distro '{distro}' (choose from: {', '.join(DISTROS)})")
    if isinstance(mpis, str):
        mpis = [mpis]
    mpis = sorted(set(mpis or ()))
    if not mpis:
        raise NearmetalError(f"no MPI given (choose from: {', '.join(MPI_FAMILIES)})")
    for mpi in mpis:
        if mpi not in MPI_FAMILIES:
            raise NearmetalError(f"unknown MPI '{mpi}' (choose from: {', '.join(MPI_FAMILIES)})")
    fmts = [fmt] if isinstance(fmt, str) or fmt is None else list(fmt)
    formats = ["dir"]
    for f in fmts:
        f = f or "dir"
        if f not in FORMATS:
            raise NearmetalError(f"unknown image format '{f}' (choose from: {', '.join(FORMATS)})")
        if f not in formats:
            formats.append(f)
    name = name or default_name(distro, mpis)
    if not _NAME_RE.match(name) or name.endswith((".sqfs", ".lock", ".log")):
        raise NearmetalError(f"bad image name '{name}': use lowercase letters, digits, '.', '_' and '-'")
    return distro, mpis, formats, name


def _packages(mpis) -> list[str]:
    packages = list(BASE_PACKAGES)
    for mpi in mpis:
        packages += MPI_PACKAGES[mpi]
    return packages


def _io_packages(mpis) -> list[str]:
    """The I/O packages wanted for these MPIs; those the distro lacks are left out at build time."""
    return [p for mpi in mpis for p in IO_PACKAGES[mpi]] + list(IO_TOOLS)


def _kernel_files() -> list[Path]:
    """The kernels/ sources (not build outputs): what is copied into and built in the image."""
    if not KERNELS_SRC.is_dir():
        raise NearmetalError(f"kernel sources not found at {KERNELS_SRC}")
    files = []
    for path in sorted(KERNELS_SRC.rglob("*")):
        rel = path.relative_to(KERNELS_SRC)
        if any(part.startswith(".") or part == "build" for part in rel.parts):
            continue
        if path.is_file() and not path.is_symlink() and path.suffix not in (".o", ".so"):
            files.append(path)
    return files


def _digest(distro, mpis, packages) -> str:
    h = hashlib.sha256()
    inputs = {"recipe": RECIPE_VERSION, "distro": distro, "mpis": list(mpis), "packages": list(packages),
              "io_packages": _io_packages(mpis),
              "kernels": {str(p.relative_to(KERNELS_SRC)): hashlib.sha256(p.read_bytes()).hexdigest()
                          for p in _kernel_files()}}
    h.update(json.dumps(inputs, sort_keys=True).encode())
    return h.hexdigest()


def mirror() -> str:
    """$NEARMETAL_MIRROR, else the Debian archive the host's apt uses, else deb.debian.org."""
    env = os.environ.get("NEARMETAL_MIRROR")
    if env:
        return env
    texts = []
    for path in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]:
        with contextlib.suppress(OSError):
            texts.append(path.read_text())
    for text in texts:
        for match in re.finditer(r"(?:URIs:|deb(?:\s+\[[^\]]*\])?)\s+(\S+)", text):
            uri = match.group(1).rstrip("/")
            if uri.startswith(("http://", "https://")) and uri.endswith("/debian"):
                return uri
    return DEFAULT_MIRROR


# ----------------------------------------------------------------------------- the build


def _full_build(name, distro, mpis, formats, packages, digest, final, report, old_meta):
    base = images_dir()
    log = _Log(base / f"{name}.build.log", truncate=True)
    log.write(f"# nearmetal image build {name}: distro={distro} mpis={mpis} formats={formats} "
              f"mirror={mirror()} at {_now()}\n")
    tmp = base / f".{name}.build-{os.getpid()}"
    timings = {}
    ok = False
    try:
        tmp.mkdir()
        rootfs = tmp / "rootfs"
        cache = _debootstrap_cached(distro, log, report, timings)
        with report.step(f"copying the cached {distro} base system", timings, "copy_base"):
            _run(["cp", "-a", "--reflink=auto", str(cache), str(rootfs)], log, "copying the base system")
        _prepare(rootfs)
        with _chroot_mounts(rootfs, log):
            with report.step("apt-get update", timings, "apt_update"):
                _chroot(rootfs, ["apt-get", "update"], log, "apt-get update")
            io_packages = _installable(rootfs, _io_packages(mpis), log)
            with report.step(f"installing {' '.join(packages + io_packages)}", timings, "apt_install"):
                _chroot(rootfs, ["apt-get", "install", "-y", "--no-install-recommends", *packages, *io_packages],
                        log, "apt-get install")
                _chroot(rootfs, ["apt-get", "clean"], log, "apt-get clean")
            with report.step("building the kernels", timings, "kernels"):
                src = rootfs / "opt/nearmetal/src"
                src.mkdir(parents=True)
                for path in _kernel_files():
                    dest = src / path.relative_to(KERNELS_SRC)
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(path, dest)
                for mpi in mpis:
                    _chroot(rootfs, ["make", "-C", "/opt/nearmetal/src", f"MPI={mpi}",
                                     f"PREFIX=/opt/nearmetal/{mpi}", "install"], log, f"building the kernels for {mpi}")
                    for prog in _kernel_programs(src):
                        if not (rootfs / f"opt/nearmetal/{mpi}/bin" / prog).is_file():
                            raise NearmetalError(f"building the kernels for {mpi} produced no {prog} (log: {log.path})")
        _finish(rootfs)
        with report.step("writing metadata"):
            meta = _metadata(name, distro, mpis, packages, digest, rootfs, log)
            meta["io_packages"] = _dpkg_versions(rootfs, io_packages, log) if io_packages else {}
            meta["io_packages_unavailable"] = [p for p in _io_packages(mpis) if p not in io_packages]
            meta["timings"] = timings
            _write_meta(tmp, meta, formats=["dir"])
        if "squashfs" in formats:
            _make_squashfs(tmp, name, log, report, meta)
            _write_meta(tmp, meta, formats=["dir", "squashfs"])
        # Swap into place: the old image (if any) goes away only once the new one is complete.
        old = None
        if final.exists():
            old = base / f".{name}.old-{os.getpid()}"
            os.rename(final, old)
        os.rename(tmp, final)
        ok = True
        if old is not None:
            _rmtree(old)
        if old_meta and "podman" in old_meta.get("formats", []) and "podman" not in formats:
            _podman_rmi(name, log)  # the stale podman image no longer matches this rootfs
        if "podman" in formats:
            _import_podman(final, name, log, report, meta)
            _write_meta(final, meta, formats=meta["formats"] + ["podman"])
        log.write(f"# done at {_now()}\n")
        return _image_from_dir(final, meta)
    except KeyboardInterrupt:
        log.write("# interrupted\n")
        raise
    finally:
        if not ok and tmp.exists():
            _rmtree(tmp)


def _installable(rootfs: Path, packages, log) -> list[str]:
    """The packages the image's apt can install (a candidate version exists): names differ
    between releases, and a release without one of them must still build."""
    done = subprocess.run(["chroot", str(rootfs), "apt-cache", "policy", *packages], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, env=_CHROOT_ENV)
    if done.returncode != 0:
        raise NearmetalError(f"apt-cache policy failed in the image: {done.stderr.strip() or 'no message'}")
    candidates, current = {}, None
    for line in done.stdout.splitlines():
        if line and not line[0].isspace() and line.rstrip().endswith(":"):
            current = line.strip()[:-1]
        elif current and line.strip().startswith("Candidate:"):
            candidates[current] = line.split(":", 1)[1].strip()
    have = [p for p in packages if candidates.get(p, "(none)") != "(none)"]
    missing = [p for p in packages if p not in have]
    if missing:
        log.write(f"# not in this release, not installed: {' '.join(missing)}\n")
    return have


def _debootstrap_cached(distro, log, report, timings) -> Path:
    """The bare `debootstrap --variant=minbase` result for `distro`, built once and cached."""
    cache_root = subdir("cache") / "debootstrap"
    cache_root.mkdir(parents=True, exist_ok=True)
    target = cache_root / distro
    with _locked(cache_root / f".{distro}.lock", report, f"another debootstrap of {distro}"):
        if (target / ".nearmetal-debootstrap.json").is_file():
            return target
        for leftover in cache_root.glob(f".{distro}.tmp-*"):
            _rmtree(leftover)
        tmp = cache_root / f".{distro}.tmp-{os.getpid()}"
        url = mirror()
        t0 = time.monotonic()
        try:
            with report.step(f"debootstrap {distro} from {url}", timings, "debootstrap"):
                _run(["debootstrap", "--variant=minbase", distro, str(tmp), url], log, f"debootstrap {distro}")
            _unmount_under(tmp, log)  # debootstrap normally unmounts its own /proc, /sys
            (tmp / ".nearmetal-debootstrap.json").write_text(json.dumps(
                {"distro": distro, "mirror": url, "created": _now(), "seconds": round(time.monotonic() - t0, 1)}) + "\n")
            if target.exists():
                _rmtree(target)
            os.rename(tmp, target)
        finally:
            if tmp.exists():
                _rmtree(tmp)
        return target


def _prepare(rootfs: Path):
    # No daemons may start inside the build chroot.
    policy = rootfs / "usr/sbin/policy-rc.d"
    policy.write_text("#!/bin/sh\nexit 101\n")
    policy.chmod(0o755)
    # apt needs name resolution; debootstrap copies the host's resolv.conf, keep it if present.
    resolv = rootfs / "etc/resolv.conf"
    if not resolv.exists() and not resolv.is_symlink() and Path("/etc/resolv.conf").is_file():
        shutil.copyfile("/etc/resolv.conf", resolv)


def _finish(rootfs: Path):
    (rootfs / "usr/sbin/policy-rc.d").unlink(missing_ok=True)
    shutil.rmtree(rootfs / "var/lib/apt/lists", ignore_errors=True)
    (rootfs / "var/lib/apt/lists/partial").mkdir(parents=True, exist_ok=True)
    # Bind-mount targets: a SquashFS image cannot get them at run time.
    for point in MOUNT_POINTS:
        (rootfs / point).mkdir(parents=True, exist_ok=True)
    tmpdir = rootfs / "tmp"
    tmpdir.mkdir(exist_ok=True)
    tmpdir.chmod(0o1777)
    # Charliecloud binds the host's /etc/hosts (and resolv.conf) only over an existing file.
    hosts = rootfs / "etc/hosts"
    if not hosts.exists() and not hosts.is_symlink():
        hosts.write_text("127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n")


def _make_squashfs(image_dir: Path, name: str, log, report, meta):
    out = image_dir / f"{name}.sqfs"
    tmp = image_dir / f".{name}.sqfs.tmp-{os.getpid()}"
    try:
        with report.step(f"mksquashfs ({SQUASHFS_COMP})", meta.setdefault("timings", {}), "mksquashfs"):
            _run(["mksquashfs", str(image_dir / "rootfs"), str(tmp), "-noappend", "-comp", SQUASHFS_COMP,
                  "-no-progress"], log, "mksquashfs")
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    meta["sqfs_bytes"] = out.stat().st_size


def _import_podman(image_dir: Path, name: str, log, report, meta):
    from ..runtimes._podman_storage import podman_argv, podman_env

    if not shutil.which("podman"):
        raise NearmetalError("podman is not installed: cannot build --format podman")
    env = {**os.environ, **podman_env()}
    ref = podman_ref(name)
    previous = _podman_image_id(ref, env)
    with report.step("importing into nearmetal's podman storage", meta.setdefault("timings", {}), "podman_import"):
        log.write(f"$ tar -C {image_dir / 'rootfs'} -c . | {' '.join(podman_argv())} import - {ref}\n")
        log.flush()
        start = log.tell()
        tar = subprocess.Popen(["tar", "-C", str(image_dir / "rootfs"), "-c", "."], stdout=subprocess.PIPE,
                               stderr=log.fh, stdin=subprocess.DEVNULL)
        try:
            imp = subprocess.Popen([*podman_argv(), "import", "-", ref], stdin=tar.stdout, stdout=log.fh,
                                   stderr=log.fh, env=env)
            tar.stdout.close()
            imp_rc = imp.wait()
        finally:
            tar_rc = tar.wait()
        if tar_rc != 0 or imp_rc != 0:
            raise NearmetalError(f"podman import of image '{name}' failed: {log.last_line(start)} (log: {log.path})")
    with report.step("smoke test: podman run /bin/true"):
        _run([*podman_argv(), "run", "--rm", ref, "/bin/true"], log, "podman run (smoke test)", env=env)
    meta["podman_ref"] = ref
    if previous and previous != _podman_image_id(ref, env):
        # The re-tagged old image would stay behind untagged (~800 MB each rebuild). A run
        # still using it keeps it: then rmi fails and it is left for `podman image prune`.
        subprocess.run([*podman_argv(), "rmi", previous], stdout=log.fh, stderr=log.fh, stdin=subprocess.DEVNULL,
                       env=env)


def _podman_image_id(ref, env) -> str:
    from ..runtimes._podman_storage import podman_argv

    return subprocess.run([*podman_argv(), "image", "inspect", "--format", "{{.Id}}", ref], capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, env=env).stdout.strip()


def _podman_rmi(name, log):
    from ..runtimes._podman_storage import podman_argv, podman_env

    if shutil.which("podman"):
        subprocess.run([*podman_argv(), "rmi", "-f", podman_ref(name)], stdout=log.fh, stderr=log.fh,
                       stdin=subprocess.DEVNULL, env={**os.environ, **podman_env()})


# ----------------------------------------------------------------------------- metadata


def _metadata(name, distro, mpis, packages, digest, rootfs: Path, log) -> dict:
    triple = _chroot_out(rootfs, ["gcc", "-dumpmachine"], log).strip() or "x86_64-linux-gnu"
    meta = {
        "name": name,
        "distro": distro,
        "mpis": list(mpis),
        "digest": digest,
        "recipe": RECIPE_VERSION,
        "packages": list(packages),
        "mirror": mirror(),
        "arch": triple,
        "glibc": _glibc_version(rootfs),
        "glibc_package": _dpkg_versions(rootfs, ["libc6"], log).get("libc6"),
        "mpi": {},
        "kernels": {mpi: f"/opt/nearmetal/{mpi}/bin" for mpi in mpis},
        "kernel_programs": _kernel_programs(rootfs / "opt/nearmetal/src"),
        "mount_points": ["/" + p for p in MOUNT_POINTS],
        "built": _now(),
        "formats": ["dir"],
    }
    versions = _dpkg_versions(rootfs, [p for mpi in mpis for p in MPI_PACKAGES[mpi]], log)
    ldcache = _ldcache(rootfs, log)
    for mpi in mpis:
        pkg = MPI_PACKAGES[mpi][0]
        lib = _mpi_library(rootfs, mpi, triple)
        launcher = next((f"/usr/bin/{exe}" for exe in _MPI_LAUNCHERS[mpi] if (rootfs / "usr/bin" / exe).exists()), None)
        meta["mpi"][mpi] = {
            "family": mpi,
            "version": _upstream_version(versions.get(pkg, "")),
            "package": pkg,
            "package_version": versions.get(pkg),
            "pkgconfig_version": _chroot_out(rootfs, ["pkg-config", "--modversion", _MPI_PC[mpi]], log).strip() or None,
            "libdir": _chroot_out(rootfs, ["pkg-config", "--variable=libdir", _MPI_PC[mpi]], log).strip() or None,
            "soname": lib[0],
            "library": lib[1],
            "library_real": lib[2],
            # What the image's loader picks (its ld.so.cache): /lib/... on merged-/usr Debian.
            "library_ldcache": ldcache.get(lib[0]) if lib[0] else None,
            "mpiexec": launcher,
            "bin": f"/opt/nearmetal/{mpi}/bin",
        }
    meta["rootfs_bytes"] = _tree_bytes(rootfs)
    return meta


def _glibc_version(rootfs: Path) -> str | None:
    for rel in ("usr/lib/x86_64-linux-gnu/libc.so.6", "lib/x86_64-linux-gnu/libc.so.6",
                *(str(p.relative_to(rootfs)) for p in rootfs.glob("usr/lib/*/libc.so.6"))):
        path = _in_root(rootfs, "/" + rel)
        if path.is_file():
            match = re.search(rb"release version (\d+\.\d+(?:\.\d+)?)", path.read_bytes())
            if match:
                return match.group(1).decode()
    return None


def _dpkg_versions(rootfs: Path, packages, log) -> dict:
    out = _chroot_out(rootfs, ["dpkg-query", "-W", "-f", "${Package}\t${Version}\n", *packages], log)
    versions = {}
    for line in out.splitlines():
        pkg, _, version = line.partition("\t")
        if version:
            versions[pkg.split(":")[0]] = version
    return versions


def _ldcache(rootfs: Path, log) -> dict:
    """soname -> path from the image's `ldconfig -p`: the first (preferred) 64-bit entry per soname."""
    entries = {}
    for line in _chroot_out(rootfs, ["ldconfig", "-p"], log).splitlines():
        match = re.match(r"\s*(\S+) \(([^)]*)\) => (\S+)$", line)
        if match and ("x86-64" in match.group(2) or "64bit" in match.group(2)):
            entries.setdefault(match.group(1), match.group(3))
    return entries


def _upstream_version(deb_version: str) -> str | None:
    """4.1.4-3+b1 -> 4.1.4; 1:2.3-1 -> 2.3; 4.3.0+really4.2.1-1 -> 4.2.1."""
    if not deb_version:
        return None
    version = deb_version.split(":", 1)[-1]
    version = version.rsplit("-", 1)[0] if "-" in version else version
    # Debian's "+really" marks a downgrade: trixie's mpich is 4.3.0+really4.2.1.
    version = version.split("+really", 1)[-1]
    return version.split("+dfsg", 1)[0].split("~", 1)[0]


def _mpi_library(rootfs: Path, mpi: str, triple: str):
    """(soname, in-image path, in-image real file) of the MPI library nm-mpi-info links against."""
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile

    soname = None
    with open(rootfs / f"opt/nearmetal/{mpi}/bin/nm-mpi-info", "rb") as fh:
        for section in ELFFile(fh).iter_sections():
            if isinstance(section, DynamicSection):
                for tag in section.iter_tags():
                    if tag.entry.d_tag == "DT_NEEDED" and _MPI_LIB_RE[mpi].match(tag.needed):
                        soname = tag.needed
    if not soname:
        return None, None, None
    for d in (f"/usr/lib/{triple}", f"/lib/{triple}", "/usr/lib", "/lib", f"/usr/lib/{triple}/{mpi}/lib"):
        path = f"{d}/{soname}"
        host = _in_root(rootfs, path)
        if host.exists():
            return soname, path, "/" + str(host.relative_to(rootfs))
    return soname, None, None


def _in_root(root: Path, path: str, depth: int = 0) -> Path:
    """Resolve an absolute in-image path (following symlinks inside the image) to a host path."""
    if depth > 40:
        return root / path.lstrip("/")
    current = root
    parts = [p for p in path.split("/") if p and p != "."]
    for i, part in enumerate(parts):
        if part == "..":
            current = current.parent if current != root else root
            continue
        nxt = current / part
        if nxt.is_symlink():
            target = os.readlink(nxt)
            base = "/" if target.startswith("/") else "/" + str(current.relative_to(root))
            rest = "/".join(parts[i + 1:])
            return _in_root(root, f"{base}/{target}/{rest}", depth + 1)
        current = nxt
    return current


def _tree_bytes(root: Path) -> int:
    total = 0
    for dirpath, dirnames, filenames in os.walk(root):
        for n in filenames + dirnames:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, n)).st_blocks * 512
    return total


def _write_meta(image_dir: Path, meta: dict, formats):
    meta["formats"] = [f for f in FORMATS if f in formats]
    meta["podman_ref"] = podman_ref(meta["name"]) if "podman" in meta["formats"] else None
    text = json.dumps(meta, indent=2, sort_keys=False) + "\n"
    for path in (image_dir / "image.json", image_dir / "rootfs" / IN_IMAGE_JSON):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        tmp.write_text(text)
        os.replace(tmp, path)


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("name") else None


def _format_present(image_dir: Path, name: str, fmt: str) -> bool:
    if fmt == "dir":
        return (image_dir / "rootfs").is_dir()
    meta = _read_json(image_dir / "image.json") or {}
    if fmt not in meta.get("formats", []):
        return False
    if fmt == "squashfs":
        return (image_dir / f"{name}.sqfs").is_file()
    if fmt == "podman":
        from ..runtimes._podman_storage import podman_argv, podman_env

        if not shutil.which("podman"):
            return False
        done = subprocess.run([*podman_argv(), "image", "exists", podman_ref(name)], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **podman_env()})
        return done.returncode == 0
    return False


def _present_formats(image_dir: Path, name: str, meta: dict) -> list[str]:
    present = ["dir"]
    if "squashfs" in meta.get("formats", []) and (image_dir / f"{name}.sqfs").is_file():
        present.append("squashfs")
    if "podman" in meta.get("formats", []):
        present.append("podman")
    return present


def _image(meta: dict, rootfs: Path, sqfs: Path | None, podman: bool) -> Image:
    return Image(name=meta["name"], rootfs=rootfs, sqfs=sqfs,
                 podman_ref=podman_ref(meta["name"]) if podman else None,
                 distro=meta.get("distro", ""), mpis=list(meta.get("mpis", [])), meta=meta)


def _image_from_dir(image_dir: Path, meta: dict) -> Image:
    formats = meta.get("formats", [])
    sqfs = image_dir / f"{meta['name']}.sqfs"
    return _image(meta, rootfs=image_dir / "rootfs",
                  sqfs=sqfs if "squashfs" in formats and sqfs.is_file() else None,
                  podman="podman" in formats)


def _image_from_sqfs(path: Path) -> Image:
    # NAME.json beside it, the image directory it sits in, the image of that name, or inside it.
    meta = _read_json(path.with_suffix(".json"))
    for candidate in (path.parent / "image.json", images_dir() / path.stem / "image.json"):
        if meta:
            break
        meta = _read_json(candidate)
        if meta and meta["name"] != path.stem:
            meta = None
    if not meta and shutil.which("unsquashfs"):
        done = subprocess.run(["unsquashfs", "-cat", str(path), IN_IMAGE_JSON], capture_output=True,
                              stdin=subprocess.DEVNULL)
        if done.returncode == 0:
            with contextlib.suppress(ValueError):
                meta = json.loads(done.stdout)
    if not isinstance(meta, dict) or not meta.get("name"):
        raise NearmetalError(f"{path} is not a nearmetal image: no image.json beside it or inside it")
    rootfs = images_dir() / meta["name"] / "rootfs"
    podman = False
    if rootfs.is_dir():
        outer = _read_json(images_dir() / meta["name"] / "image.json") or {}
        podman = outer.get("digest") == meta.get("digest") and "podman" in outer.get("formats", [])
    else:
        rootfs = path  # a lone .sqfs: only SquashFS-capable runtimes can use it
    return _image(meta, rootfs=rootfs, sqfs=path, podman=podman)


# ----------------------------------------------------------------------------- processes, mounts


class _Log:
    def __init__(self, path: Path, truncate: bool):
        self.path = path
        self.fh = open(path, "w" if truncate else "a")

    def write(self, text):
        self.fh.write(text)
        self.fh.flush()

    def flush(self):
        self.fh.flush()

    def tell(self):
        self.fh.flush()
        return os.path.getsize(self.path)

    def last_line(self, start: int) -> str:
        self.fh.flush()
        with open(self.path, "rb") as fh:
            fh.seek(start)
            lines = [line.strip() for line in fh.read().decode(errors="replace").splitlines() if line.strip()]
        return lines[-1] if lines else "no output"

    def __del__(self):
        with contextlib.suppress(Exception):
            self.fh.close()


def _run(argv, log: _Log, what: str, env=None):
    log.write(f"$ {' '.join(argv)}\n")
    start = log.tell()
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=log.fh, stderr=subprocess.STDOUT, env=env)
    except FileNotFoundError:
        raise NearmetalError(f"{what} failed: {argv[0]} is not installed") from None
    if done.returncode != 0:
        raise NearmetalError(f"{what} failed: {log.last_line(start)} (log: {log.path})")


def _chroot(rootfs: Path, argv, log: _Log, what: str):
    _run(["chroot", str(rootfs), *argv], log, what, env=_CHROOT_ENV)


def _chroot_out(rootfs: Path, argv, log: _Log) -> str:
    done = subprocess.run(["chroot", str(rootfs), *argv], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, env=_CHROOT_ENV)
    if done.returncode != 0:
        log.write(f"$ chroot {rootfs} {' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()}\n")
        return ""
    return done.stdout


def _mounts_under(path: Path) -> list[str]:
    prefix = str(path.resolve())
    points = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            fields = line.split()
            if len(fields) > 4:
                point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
                if point == prefix or point.startswith(prefix + "/"):
                    points.append(point)
    return points


def _unmount_under(path: Path, log: _Log | None = None):
    """Unmount everything mounted under path, deepest first; lazily when busy."""
    for _ in range(3):
        points = _mounts_under(path)
        if not points:
            return
        for point in sorted(points, key=len, reverse=True):
            done = subprocess.run(["umount", point], stdin=subprocess.DEVNULL, capture_output=True, text=True)
            if done.returncode != 0:
                subprocess.run(["umount", "-l", point], stdin=subprocess.DEVNULL, capture_output=True)
            if log:
                log.write(f"# unmounted {point}\n")


def _rmtree(path: Path):
    """Remove a build tree, never following a bind mount (of /dev!) into the host."""
    _unmount_under(path)
    if _mounts_under(path):
        raise NearmetalError(f"cannot remove {path}: still has mounts ({', '.join(_mounts_under(path))}); "
                             "unmount them and remove it by hand")
    shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def _chroot_mounts(rootfs: Path, log: _Log):
    """/proc and /dev inside the rootfs for the duration of the block; always unmounted."""
    try:
        (rootfs / "proc").mkdir(exist_ok=True)
        (rootfs / "dev").mkdir(exist_ok=True)
        _run(["mount", "-t", "proc", "proc", str(rootfs / "proc")], log, "mounting /proc in the image")
        _run(["mount", "--bind", "/dev", str(rootfs / "dev")], log, "bind-mounting /dev in the image")
        yield
    finally:
        _unmount_under(rootfs, log)


def _clean_leftovers(name: str):
    """Remove temporary trees of builds of `name` that were killed outright."""
    base = images_dir()
    for pattern in (f".{name}.build-*", f".{name}.old-*"):
        for path in base.glob(pattern):
            pid = path.name.rsplit("-", 1)[-1]
            if pid.isdigit() and int(pid) != os.getpid() and _pid_alive(int(pid)):
                continue
            _rmtree(path)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def _locked(path: Path, report, what: str):
    with open(path, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            report.note(f"waiting for {what} to finish")
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# ----------------------------------------------------------------------------- progress


class _Reporter:
    """Step display: a rich spinner with elapsed time on a terminal, plain lines on stderr otherwise."""

    def __init__(self, name: str, progress: bool):
        self.name = name
        self.rich = bool(progress) and sys.stdout.isatty()
        self._progress = None

    def note(self, text: str):
        if self.rich:
            from rich.console import Console

            (self._progress.console if self._progress else Console()).print(f"[bold]nearmetal:[/bold] {text}")
        else:
            print(f"nearmetal: {text}", file=sys.stderr, flush=True)

    @contextlib.contextmanager
    def session(self, title: str):
        t0 = time.monotonic()
        if not self.rich:
            self.note(title)
            yield
            self.note(f"image '{self.name}' ready ({time.monotonic() - t0:.1f}s)")
            return
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), transient=False) as p:
            self._progress = p
            p.console.print(f"[bold]nearmetal:[/bold] {title}")
            try:
                yield
            finally:
                self._progress = None
        self.note(f"image '{self.name}' ready ({time.monotonic() - t0:.1f}s)")

    @contextlib.contextmanager
    def step(self, text: str, timings: dict | None = None, key: str | None = None):
        t0 = time.monotonic()
        task = None
        if self._progress is not None:
            task = self._progress.add_task(text, total=None)
        else:
            print(f"nearmetal: [{self.name}] {text} ...", file=sys.stderr, flush=True)
        failed = True
        try:
            yield
            failed = False
        finally:
            elapsed = time.monotonic() - t0
            if timings is not None and key:
                timings[key] = round(elapsed, 2)
            if task is not None:
                mark = "[red]✗[/red]" if failed else "[green]✓[/green]"
                self._progress.update(task, description=f"{mark} {text}", total=1, completed=1)
                self._progress.stop_task(task)
            else:
                status = "failed" if failed else "done"
                print(f"nearmetal: [{self.name}] {text}: {status} ({elapsed:.1f}s)", file=sys.stderr, flush=True)
