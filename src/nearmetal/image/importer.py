"""`nearmetal image import SOURCE --name NAME`: an image nearmetal did not build, made one
of its own images: a root file system directory (a Charliecloud image directory is one), a
`docker save`/`podman save` archive, an OCI layout (directory or archive), a SquashFS file,
or a SIF. The root file system is unpacked into home()/images/NAME/rootfs, the mount points
bind mode needs are added (runtimes such as Charliecloud cannot create them at run time),
and what the image holds (MPIs, glibc, programs) is described as for any foreign image
(foreign.py) into its image.json, with where it came from. Other formats (squashfs,
podman, sif) are made from that directory, once, with --format.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
import time
from pathlib import Path

from ..errors import NearmetalError
from .recipe import MOUNT_POINTS, NAME_RE

KINDS = ("rootfs directory", "docker archive", "OCI layout", "OCI archive", "SquashFS", "SIF")


def kind_of(source: Path) -> str:
    if source.is_dir():
        return "OCI layout" if (source / "oci-layout").is_file() and (source / "index.json").is_file() \
            else "rootfs directory"
    if not source.is_file():
        raise NearmetalError(f"{source}: no such file or directory")
    with open(source, "rb") as f:
        head = f.read(128)
    if head[:4] == b"hsqs":
        return "SquashFS"
    if b"SIF_MAGIC" in head[:64]:
        return "SIF"
    try:
        with tarfile.open(source) as t:
            names = set(t.getnames()[:10000])
    except (tarfile.TarError, OSError):
        raise NearmetalError(f"{source} is not an image: not a directory, a tar archive (docker save, OCI), "
                             "a SquashFS file or a SIF") from None
    if "manifest.json" in names:
        return "docker archive"
    if "index.json" in names and "oci-layout" in names:
        return "OCI archive"
    raise NearmetalError(f"{source} is a tar archive but no image: it has neither manifest.json (docker save) "
                         "nor index.json and oci-layout (OCI)")


def _safe(member, dest):
    """tarfile's 'tar' filter (no absolute paths, nothing outside dest, no links out of it),
    keeping the member's mode (setuid and sticky bits belong to the image)."""
    checked = tarfile.tar_filter(member, dest)
    return checked.replace(mode=member.mode, deep=False) if checked is not None else None


def apply_layer(fileobj, rootfs: Path):
    """One image layer (a tar, compressed or not) onto rootfs, whiteouts first."""
    try:
        layer = tarfile.open(fileobj=fileobj, mode="r:*")
    except tarfile.TarError as e:
        raise NearmetalError(f"an image layer cannot be read ({e}; zstd layers are not supported)") from None
    with layer:
        members = layer.getmembers()
        keep = []
        for m in members:
            parent, base = os.path.split(m.name.lstrip("./").lstrip("/"))
            if base == ".wh..wh..opq":  # opaque: the lower layers' contents of this directory go
                target = rootfs / parent
                if target.is_dir() and not target.is_symlink():
                    for child in target.iterdir():
                        _remove(child)
            elif base.startswith(".wh."):
                _remove(rootfs / parent / base[len(".wh."):])
            else:
                keep.append(m)
        for m in keep:  # a later file replaces an earlier one of another type
            target = rootfs / m.name.lstrip("./").lstrip("/")
            if (target.is_symlink() or target.exists()) and not (m.isdir() and target.is_dir()):
                _remove(target)
        layer.extractall(rootfs, members=keep, filter=_safe)


def _remove(path: Path):
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def _docker_archive(source: Path, rootfs: Path):
    with tarfile.open(source) as outer:
        manifest = json.load(outer.extractfile("manifest.json"))
        if not manifest or not manifest[0].get("Layers"):
            raise NearmetalError(f"{source}: manifest.json lists no layers")
        for name in manifest[0]["Layers"]:
            apply_layer(outer.extractfile(name), rootfs)


def _oci(read, source):
    """Layers of an OCI layout, through read(path) -> file object: index -> manifest (the
    linux/amd64 one of a multi-platform index) -> layers."""
    def blob(digest):
        algo, _, hexd = digest.partition(":")
        return read(f"blobs/{algo}/{hexd}")

    doc = json.load(read("index.json"))
    for _ in range(4):  # nested indexes
        manifests = doc.get("manifests") or []
        if not manifests:
            break
        pick = next((m for m in manifests if (m.get("platform") or {}).get("architecture") in ("amd64", None)),
                    manifests[0])
        doc = json.load(blob(pick["digest"]))
    if not doc.get("layers"):
        raise NearmetalError(f"{source}: its OCI manifest lists no layers")
    return [blob(layer["digest"]) for layer in doc["layers"]]


def _unpack(kind, source: Path, rootfs: Path, log):
    from . import chroot

    if kind == "rootfs directory":
        chroot.run(["cp", "-a", "--reflink=auto", f"{source}/.", str(rootfs)], log, "copying the root file system")
    elif kind == "docker archive":
        _docker_archive(source, rootfs)
    elif kind == "OCI layout":
        for layer in _oci(lambda p: open(source / p, "rb"), source):
            with layer:
                apply_layer(layer, rootfs)
    elif kind == "OCI archive":
        with tarfile.open(source) as outer:
            for layer in _oci(lambda p: outer.extractfile(p), source):
                apply_layer(layer, rootfs)
    elif kind == "SquashFS":
        rootfs.rmdir()
        chroot.run(["unsquashfs", "-no-progress", "-d", str(rootfs), str(source)], log, "unpacking the SquashFS file")
    else:  # SIF: its primary partition, as sif.py reads one
        from . import sif

        part = sif.primary_partition(source)
        rootfs.rmdir()
        chroot.run(["unsquashfs", "-no-progress", "-o", str(part.offset), "-d", str(rootfs), str(source)], log,
                   "unpacking the SIF's root file system")


def source_digest(source: Path, kind: str) -> str:
    """sha256 of the file; of a directory: of its files' paths, sizes and modification times."""
    h = hashlib.sha256()
    if source.is_file():
        with open(source, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    else:
        for root, dirs, files in os.walk(source):
            dirs.sort()
            for name in sorted(files):
                st = os.lstat(os.path.join(root, name))
                h.update(f"{os.path.relpath(os.path.join(root, name), source)}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return "sha256:" + h.hexdigest()


def import_image(source, name, fmt=("dir",), progress=True):
    from . import formats
    from .chroot import BuildLog, remove_tree
    from .foreign import describe
    from .progress import Reporter
    from .store import image_from_dir, images_dir, write_meta

    if not name or not NAME_RE.match(name):
        raise NearmetalError(f"--name {name!r:.60}: lowercase letters, digits, '.', '_' and '-' (an image needs a name)")
    source = Path(source).expanduser().resolve()
    kind = kind_of(source)
    final = images_dir() / name
    if final.exists():
        raise NearmetalError(f"image '{name}' exists already ({final}): choose another --name")
    unknown = [f for f in fmt if f not in formats.names()]
    if unknown:
        raise NearmetalError(f"unknown format '{unknown[0]}' (choose from: {', '.join(formats.names())})")
    report = Reporter(name, progress)
    tmp = images_dir() / f".{name}.import-{os.getpid()}"
    log = BuildLog(images_dir() / f"{name}.build.log", truncate=True)
    ok = False
    try:
        with report.session(f"importing {source} ({kind}) as image '{name}'"):
            (tmp / "rootfs").mkdir(parents=True)
            with report.step(f"unpacking the {kind}"):
                _unpack(kind, source, tmp / "rootfs", log)
            for mp in MOUNT_POINTS:  # bind mode's mount points: Charliecloud cannot create them
                (tmp / "rootfs" / mp).mkdir(parents=True, exist_ok=True)
            with report.step("describing what it holds"):
                digest = source_digest(source, kind)
                meta = describe(tmp / "rootfs", name=name, digest=digest, source=str(source))
                meta["imported"] = {"from": str(source), "kind": kind,
                                    "at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
                write_meta(tmp, meta, ["dir"])
            os.rename(tmp, final)
            ok = True
            for f in formats.copies():
                if f in fmt:
                    formats.get(f).make(final, name, log, report, meta)
                    write_meta(final, meta, meta["formats"] + [f])
        return image_from_dir(final, meta)
    finally:
        if not ok and tmp.exists():
            remove_tree(tmp)
