"""The build: debootstrap (cached per distro), apt-get inside a chroot, the kernels built
in the image, then the requested formats; locked per image and per distro cache.

A build happens in a temporary directory (.NAME.build-PID) renamed into place at the end,
so an interrupted build never leaves a half image that looks complete.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import time
from pathlib import Path

from ..errors import NearmetalError
from ..proc import pid_exists
from ..home import KERNELS_SRC, subdir
from . import chroot, formats
from .chroot import BuildLog, remove_tree
from .inspect import dpkg_versions, metadata, timestamp
from .progress import Reporter
from .recipe import (MOUNT_POINTS, check_generic, check_inputs, check_packages, check_portable_kernels, digest,
                     io_packages, kernel_bin, kernel_files, kernel_prefix, kernel_programs, mirror)
from .recipe import packages as recipe_packages
from .store import Image, image_from_dir, images_dir, read_json, recorded_formats, write_meta


def build(distro=None, mpis=None, fmt="dir", name=None, progress=True, packages=None, recipe=None,
          source=None, generic=None, portable_kernels=None) -> Image:
    """Build (or reuse) an image. `fmt` is a format's name (formats.names()) or a list of
    them; "dir" is always built. mpis: MPI family names (None: every family).

    A no-op when the image exists with the same inputs (recipe, distro, MPIs, packages,
    kernel sources, the application's recipe and source) and every requested format; missing
    formats are added without a rebuild. A rebuild (changed inputs) also rebuilds every
    format the old image had. recipe/source: an application built natively and in the image
    by one script (app_build.py); kept, like packages, when not given again.
    generic=True: the generic variant (generic.py: no shared-memory transport in the image's
    MPIs), named nm-DISTRO-generic-MPIS by default; None: as the image of that name is (kept
    when it is built again to add a format), else not generic.
    portable_kernels=True: the compute kernels built for any x86-64 CPU (-march=x86-64) under
    their usual names, as an image made to run anywhere ships them; needs a name of its own;
    None: as the image of that name is.
    """
    from . import app_build

    recipe, source = app_build.check(recipe, source)
    if recipe and name is None:
        raise NearmetalError("--recipe needs --name: the application's image is an image of its own")
    name_given = name is not None
    extra = check_packages(packages, name_given=name_given)
    distro, mpis, wanted, name = check_inputs(distro, mpis, fmt, name, formats.names(), generic=bool(generic))
    existing = read_json(images_dir() / name / "image.json") or {}  # what an option not given keeps
    if generic is None:
        generic = bool(existing.get("generic"))
    generic = check_generic(name, generic)
    if portable_kernels is None:
        portable_kernels = existing.get("kernels") == "portable"
    portable_kernels = check_portable_kernels(name, portable_kernels, name_given)
    if packages is None:  # not given: an existing image keeps its extra packages (adding a format)
        extra = list(existing.get("extra_packages", {}))
    package_list = recipe_packages(mpis, extra)
    image_digest = digest(distro, mpis, package_list, generic, portable_kernels)
    app = None
    if recipe:
        app = {"recipe": recipe, "source": source, "digest": app_build.digest(recipe, source)}
    elif name:  # an image built with a recipe keeps it; its files may have moved or gone meanwhile
        kept = existing.get("app") or {}
        if kept.get("digest"):
            there = os.path.isfile(kept.get("recipe", "")) and os.path.isdir(kept.get("source", ""))
            app = dict(kept, digest=app_build.digest(kept["recipe"], kept["source"]) if there else kept["digest"],
                       gone=not there)
    if app:
        image_digest = hashlib.sha256(f"{image_digest} {app['digest']}".encode()).hexdigest()
        _native_app(name, mpis, app, progress)
    report = Reporter(name, progress)
    final = images_dir() / name
    with _locked(images_dir() / f".{name}.lock", report, f"another build of image '{name}'"):
        _clean_leftovers(name)
        meta = read_json(final / "image.json")
        if meta and meta.get("digest") == image_digest and (final / "rootfs").is_dir():
            if app and not app.get("gone") and (meta.get("app") or {}).get("recipe") != app["recipe"]:
                # the same recipe and source, from where they are now
                meta["app"] = dict(meta["app"], recipe=app["recipe"], source=app["source"])
                write_meta(final, meta, recorded_formats(final, meta))
            missing = [f for f in wanted if not formats.get(f).present(final, meta)]
            if not missing:
                report.note(f"image '{name}' is up to date ({', '.join(recorded_formats(final, meta))}): nothing to do")
                return image_from_dir(final, read_json(final / "image.json"))
            with report.session(f"adding {', '.join(missing)} to image '{name}'"):
                log = BuildLog(images_dir() / f"{name}.build.log", truncate=False)
                for f in formats.names():
                    if f in missing:
                        formats.get(f).make(final, name, log, report, meta)
                        write_meta(final, meta, recorded_formats(final, meta) + [f])
            return image_from_dir(final, read_json(final / "image.json"))
        if meta and (final / "rootfs").is_dir():
            # A rebuild refreshes every format the old image had: a stale copy must not
            # outlive it, and dropping it would surprise whoever built it.
            kept = [f for f in recorded_formats(final, meta) if formats.get(f).available()]
            wanted = [f for f in formats.names() if f in wanted or f in kept]
        if app and app.get("gone"):
            raise NearmetalError(f"image '{name}' must be rebuilt, but its recipe {app['recipe']} or source "
                                 f"{app['source']} is gone: give --recipe and --source again")
        what = "".join([", generic" if generic else "", ", portable kernels" if portable_kernels else ""])
        with report.session(f"building image '{name}' ({distro}, {' + '.join(mpis)}{what})"):
            return _full_build(name, distro, mpis, wanted, package_list, image_digest, final, report, old_meta=meta,
                               extra=extra, app=app, generic=generic, portable_kernels=portable_kernels)


def _native_app(name, mpis, app, progress):
    """The application's native build, unless one from the same recipe and source is there."""
    from . import app_build

    stamp = app_build.host_root(name) / "digest"
    if stamp.is_file() and stamp.read_text().strip() == app["digest"]:
        return
    if app.get("gone"):
        raise NearmetalError(f"the native build of image '{name}' is missing, and its recipe {app['recipe']} or "
                             f"source {app['source']} is gone: give --recipe and --source again")
    say = (lambda m: print(m, flush=True)) if progress else (lambda m: None)
    say(f"nearmetal: [{name}] building the application natively ({os.path.basename(app['recipe'])})")
    app_build.build_native(name, mpis, app["recipe"], app["source"], say=say)
    stamp.write_text(app["digest"] + "\n")


def _full_build(name, distro, mpis, wanted, package_list, image_digest, final, report, old_meta, extra=(), app=None,
                generic=False, portable_kernels=False):
    base = images_dir()
    log = BuildLog(base / f"{name}.build.log", truncate=True)
    log.note(f"nearmetal image build {name}: distro={distro} mpis={mpis} formats={wanted} generic={generic} "
             f"mirror={mirror()} at {timestamp()}")
    tmp = base / f".{name}.build-{os.getpid()}"
    timings = {}
    ok = False
    try:
        tmp.mkdir()
        rootfs = tmp / "rootfs"
        cache = _debootstrap_cached(distro, log, report, timings)
        with report.step(f"copying the cached {distro} base system", timings, "copy_base"):
            chroot.run(["cp", "-a", "--reflink=auto", str(cache), str(rootfs)], log, "copying the base system")
        _prepare(rootfs)
        with chroot.chroot_mounts(rootfs, log):
            with report.step("apt-get update", timings, "apt_update"):
                chroot.in_chroot(rootfs, ["apt-get", "update"], log, "apt-get update")
            io_list = installable(rootfs, io_packages(mpis), log)
            with report.step(f"installing {' '.join(package_list + io_list)}", timings, "apt_install"):
                chroot.in_chroot(rootfs, ["apt-get", "install", "-y", "--no-install-recommends", *package_list,
                                          *io_list], log, "apt-get install")
                chroot.in_chroot(rootfs, ["apt-get", "clean"], log, "apt-get clean")
            with report.step("building the kernels", timings, "kernels"):
                _build_kernels(rootfs, mpis, log, portable_kernels)
            if app:
                from ..families import get as get_family
                from .app_build import build_in_image

                with report.step(f"building the application ({os.path.basename(app['recipe'])})", timings, "app"):
                    app["programs"] = build_in_image(rootfs, mpis, app["recipe"], app["source"], log,
                                                     {m: get_family(m).wrappers[0] for m in mpis})
        removed = None
        if generic:
            from .generic import make_generic

            with report.step("removing the MPIs' shared-memory transports (generic)", timings, "generic"):
                removed = make_generic(rootfs, mpis, kernel_bin, log)
        _finish(rootfs)
        with report.step("writing metadata"):
            meta = metadata(name, distro, mpis, package_list, image_digest, rootfs, log)
            meta["io_packages"] = dpkg_versions(rootfs, io_list, log) if io_list else {}
            meta["io_packages_unavailable"] = [p for p in io_packages(mpis) if p not in io_list]
            meta["extra_packages"] = dpkg_versions(rootfs, extra, log) if extra else {}
            if app:
                meta["app"] = {k: v for k, v in app.items() if k != "gone"}
            if removed:
                meta["generic"] = removed
            if portable_kernels:
                meta["kernels"] = "portable"
            meta["timings"] = timings
            write_meta(tmp, meta, ["dir"])
        for f in formats.names():
            if f in wanted and f not in meta["formats"] and formats.get(f).in_build_tree:
                formats.get(f).make(tmp, name, log, report, meta)
                write_meta(tmp, meta, meta["formats"] + [f])
        # Swap into place: the old image (if any) goes away only once the new one is complete.
        old = None
        if final.exists():
            old = base / f".{name}.old-{os.getpid()}"
            os.rename(final, old)
        os.rename(tmp, final)
        ok = True
        if old is not None:
            remove_tree(old)
        for f in (old_meta or {}).get("formats", []):
            if f in formats.names() and f not in wanted:
                formats.get(f).discard(name, log)  # the stale copy no longer matches this rootfs
        for f in formats.names():
            if f in wanted and f not in meta["formats"]:
                formats.get(f).make(final, name, log, report, meta)
                write_meta(final, meta, meta["formats"] + [f])
        log.write(f"# done at {timestamp()}\n")
        return image_from_dir(final, meta)
    except KeyboardInterrupt:
        log.write("# interrupted\n")
        raise
    finally:
        if not ok and tmp.exists():
            remove_tree(tmp)


def _build_kernels(rootfs: Path, mpis, log, portable=False):
    """nearmetal's kernel sources copied into the image and built there once per MPI family
    (portable: every compute kernel for any x86-64 CPU, the Makefile's KERNELS=portable)."""
    src = rootfs / "opt/nearmetal/src"
    src.mkdir(parents=True)
    for path in kernel_files():
        dest = src / path.relative_to(KERNELS_SRC)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, dest)
    for mpi in mpis:
        chroot.in_chroot(rootfs, ["make", "-C", "/opt/nearmetal/src", f"MPI={mpi}", f"PREFIX={kernel_prefix(mpi)}",
                                  *(["KERNELS=portable"] if portable else []), "install"], log,
                         f"building the kernels for {mpi}")
        for prog in kernel_programs(src):
            if not (rootfs / kernel_bin(mpi).lstrip("/") / prog).is_file():
                raise NearmetalError(f"building the kernels for {mpi} produced no {prog} (log: {log.path})")


def installable(rootfs: Path, package_list, log) -> list[str]:
    """The packages the image's apt can install (a candidate version exists): names differ
    between releases, and a release without one of them must still build."""
    done = chroot.chroot_capture(rootfs, ["apt-cache", "policy", *package_list])
    if done.returncode != 0:
        raise NearmetalError(f"apt-cache policy failed in the image: {done.stderr.strip() or 'no message'}")
    candidates, current = {}, None
    for line in done.stdout.splitlines():
        if line and not line[0].isspace() and line.rstrip().endswith(":"):
            current = line.strip()[:-1]
        elif current and line.strip().startswith("Candidate:"):
            candidates[current] = line.split(":", 1)[1].strip()
    have = [p for p in package_list if candidates.get(p, "(none)") != "(none)"]
    missing = [p for p in package_list if p not in have]
    if missing:
        log.write(f"# not in this release, not installed: {' '.join(missing)}\n")
    return have


def _debootstrap_cached(distro, log, report, timings) -> Path:
    """The bare `debootstrap --variant=minbase` result for `distro`, built once and cached
    under home()/cache/debootstrap/DISTRO; every image of that distro copies it (cp -a,
    under a second)."""
    cache_root = subdir("cache") / "debootstrap"
    cache_root.mkdir(parents=True, exist_ok=True)
    target = cache_root / distro
    with _locked(cache_root / f".{distro}.lock", report, f"another debootstrap of {distro}"):
        if (target / ".nearmetal-debootstrap.json").is_file():
            return target
        for leftover in cache_root.glob(f".{distro}.tmp-*"):
            remove_tree(leftover)
        tmp = cache_root / f".{distro}.tmp-{os.getpid()}"
        url = mirror()
        t0 = time.monotonic()
        try:
            with report.step(f"debootstrap {distro} from {url}", timings, "debootstrap"):
                chroot.run(["debootstrap", "--variant=minbase", distro, str(tmp), url], log, f"debootstrap {distro}",
                           private_mounts=True)  # its /proc and /sys vanish with it, killed or not
            chroot.unmount_under(tmp, log)  # debootstrap normally unmounts its own /proc, /sys
            (tmp / ".nearmetal-debootstrap.json").write_text(json.dumps(
                {"distro": distro, "mirror": url, "created": timestamp(),
                 "seconds": round(time.monotonic() - t0, 1)}) + "\n")
            if target.exists():
                remove_tree(target)
            os.rename(tmp, target)
        finally:
            if tmp.exists():
                remove_tree(tmp)
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


def _clean_leftovers(name: str):
    """Remove temporary trees of builds of `name` that were killed outright."""
    base = images_dir()
    for pattern in (f".{name}.build-*", f".{name}.old-*"):
        for path in base.glob(pattern):
            pid = path.name.rsplit("-", 1)[-1]
            if pid.isdigit() and int(pid) != os.getpid() and pid_exists(int(pid)):
                continue
            remove_tree(path)


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
