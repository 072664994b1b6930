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

import fcntl
import hashlib
import lzma
import os
import sys
import tarfile
import time
import zlib
from pathlib import Path

from ..errors import NearmetalError, one_line
from .beneath import Tree
from .layouts import ArchiveFiles, LayoutFiles, docker_layers, oci_layers
from .recipe import MOUNT_POINTS, NAME_RE
from .safe_extract import Extractor, Limits, size_text
from .tree_import import check_unpacked, copy_tree

MAX_OUTER = 100_000  # members of a docker or OCI archive itself (layers, blobs, configs)
# A compressed outer archive's corrupt data: gzip's and xz's errors are not OSErrors
CORRUPT = (zlib.error, lzma.LZMAError)
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
            names = _archive_members(t, source)
    except (tarfile.TarError, OSError, EOFError, *CORRUPT):
        raise NearmetalError(f"{source} is not an image: not a directory, a tar archive (docker save, OCI), "
                             "a SquashFS file or a SIF") from None
    if "manifest.json" in names:
        return "docker archive"
    if "index.json" in names and "oci-layout" in names:
        return "OCI archive"
    raise NearmetalError(f"{source} is a tar archive but no image: it has neither manifest.json (docker save) "
                         "nor index.json and oci-layout (OCI)")


def _archive_members(outer: tarfile.TarFile, source) -> dict:
    """{normalized name: member} of an outer archive (docker save, OCI), bounded."""
    index = {}
    for m in outer:
        if len(index) >= MAX_OUTER:
            raise NearmetalError(f"{source}: more than {MAX_OUTER:,} files at its top level: not an image archive")
        index[os.path.normpath(m.name).lstrip("/")] = m
    return index


def _unpack(kind, source: Path, rootfs: Path, log, limits: Limits) -> Extractor:
    """The image's root file system into rootfs (which does not exist yet), by the rules of
    safe_extract.py; returns what was done (counts, what was left out)."""
    if kind in ("SquashFS", "SIF"):
        return _unsquash(kind, source, rootfs, log, limits)
    rootfs.mkdir(mode=0o755)
    ex = Extractor(rootfs, limits)
    try:
        if kind == "rootfs directory":
            copy_tree(ex, source)
        elif kind == "OCI layout":
            files = LayoutFiles(source)
            for blob in oci_layers(files, source):
                with files.open(blob) as f:
                    ex.layer_from(f, f"{source}: layer {blob}")
        else:
            with tarfile.open(source) as outer:
                files = ArchiveFiles(outer, source, _archive_members(outer, source))
                layers = docker_layers(files) if kind == "docker archive" else oci_layers(files, source)
                for name in layers:
                    ex.layer_from(files.open(name), f"{source}: layer {name}")
        ex.finish()
    except CORRUPT as e:
        raise NearmetalError(f"unpacking {source}: its compressed data is corrupt ({one_line(str(e))[:120]})") from None
    except OSError as e:
        raise NearmetalError(f"unpacking {source}: {one_line(e.strerror or str(e))[:200]}"
                             + (f" ({one_line(e.filename)[:120]})" if isinstance(e.filename, str) else "")) from None
    finally:
        ex.close()
    return ex


def _unsquash(kind, source, rootfs, log, limits) -> Extractor:
    """unsquashfs into a fresh directory, then the check of safe_extract.check_unpacked."""
    from . import chroot

    offset = []
    if kind == "SIF":
        from . import sif

        offset = ["-o", str(sif.primary_partition(source).offset)]
    unsquashfs_checked()
    count, size = squashfs_totals(source, offset)
    if count > limits.max_files:
        raise NearmetalError(f"the image has more than {limits.max_files:,} files and directories, the import limit "
                             "(raise it with --max-files)")
    if size > limits.max_bytes:
        raise NearmetalError(f"the image is larger than {size_text(limits.max_bytes)}, the import limit "
                             "(raise it with --max-size)")
    # -no-xattrs: file capabilities (security.capability) grant privileges as setuid does.
    chroot.run(["unsquashfs", "-no-progress", "-no-xattrs", *offset, "-d", str(rootfs), str(source)], log,
               f"unpacking the {kind}'s root file system")
    return check_unpacked(rootfs, limits)


def unsquashfs_checked():
    """unsquashfs before 4.5.1 writes through a symbolic link a crafted file system plants
    beside a directory of the same name (CVE-2021-41072): refused."""
    import re
    import subprocess

    try:
        out = subprocess.run(["unsquashfs", "-version"], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise NearmetalError("importing a SquashFS file or SIF needs unsquashfs (Debian: squashfs-tools)") from None
    found = re.search(r"version (\d+)\.(\d+)(?:\.(\d+))?", out.stdout + out.stderr)
    version = tuple(int(x or 0) for x in found.groups()) if found else None
    if version is None or version < (4, 5, 1):
        shown = ".".join(map(str, version)) if version else "of unknown version"
        raise NearmetalError(f"unsquashfs {shown} can write outside its destination for a crafted image "
                             "(CVE-2021-41072): importing SquashFS or SIF needs squashfs-tools 4.5.1 or later")


def squashfs_totals(source, offset) -> tuple[int, int]:
    """(entries, bytes of regular files) of a SquashFS file, from its listing, before any
    byte is written (a small file can unpack to terabytes)."""
    import subprocess

    done = subprocess.run(["unsquashfs", "-lln", *offset, str(source)], capture_output=True, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        tail = (done.stderr.decode(errors="replace").strip().splitlines() or ["unsquashfs failed"])[-1]
        raise NearmetalError(f"{source}: cannot list its root file system: {one_line(tail)[:200]}")
    count = size = 0
    for line in done.stdout.splitlines():
        fields = line.split(None, 3)
        if len(fields) < 4 or len(fields[0]) != 10:
            continue
        count += 1
        if fields[0][:1] == b"-" and fields[2].isdigit():
            size += int(fields[2])
    return count, size


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


def import_image(source, name, fmt=("dir",), progress=True, limits: Limits | None = None):
    from . import formats
    from .chroot import BuildLog, remove_tree
    from .foreign import describe
    from .progress import Reporter
    from .store import image_from_dir, images_dir, write_meta

    limits = limits or Limits()
    if not name or not NAME_RE.match(name):
        raise NearmetalError(f"--name {name!r:.60}: an image's name is lowercase letters, digits, '.', '_' and '-', "
                             "starting with a letter or digit, at most 100")
    source = Path(source).expanduser().resolve()
    kind = kind_of(source)
    unknown = [f for f in fmt if f not in formats.names()]
    if unknown:
        raise NearmetalError(f"unknown format '{unknown[0]}' (choose from: {', '.join(formats.names())})")
    if kind == "rootfs directory" and images_dir().resolve().is_relative_to(source):
        raise NearmetalError(f"{source} holds nearmetal's own images directory ({images_dir()}): it cannot be "
                             "imported into itself; give the image's root file system directory")
    with _name_lock(images_dir(), name):
        final = images_dir() / name
        if final.exists():
            raise NearmetalError(f"image '{name}' exists already ({final}): choose another --name")
        # Progress off a terminal would make a refusal's stderr more than its one error line.
        report = Reporter(name, progress, quiet=not sys.stderr.isatty())
        # 0700 while it is unpacked (unsquashfs as root makes device nodes and setuid files
        # before the check removes them); an image that keeps its modes stays 0700.
        tmp = images_dir() / f".{name}.import-{os.getpid()}"
        log = BuildLog(images_dir() / f"{name}.build.log", truncate=True)
        ok = False
        try:
            with report.session(f"importing {source} ({kind}) as image '{name}'"):
                for stale in stale_imports(images_dir(), name):  # of imports that were killed: the lock is ours
                    remove_tree(stale)
                tmp.mkdir(mode=0o700)
                built, original = ["dir"], source
                keeper = next((formats.get(f) for f in formats.copies() if formats.get(f).kept_from == kind), None)
                if keeper:  # a SIF: kept as the image's SIF, copied first and unpacked from the
                    # copy, so the directory and the kept file are one content
                    with report.step(f"copying the {kind}"):
                        source = keeper.keep(source, tmp, name)
                    built.append(keeper.name)
                with report.step(f"unpacking the {kind}"):
                    done = _unpack(kind, source, tmp / "rootfs", log, limits)
                with Tree(tmp / "rootfs") as tree:
                    for mp in MOUNT_POINTS:  # bind mode's mount points: Charliecloud cannot create them
                        tree.makedirs(mp)
                with report.step("describing what it holds"):
                    digest = source_digest(source, kind)
                    meta = describe(tmp / "rootfs", name=name, digest=digest, source=str(original))
                    meta["imported"] = {"from": str(original), "kind": kind,
                                        "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                        "left_out": done.left_out[:100], "left_out_count": len(done.left_out), "modes_cleared": done.cleared,
                                        "kept_modes": limits.keep_modes}
                    if keeper:  # the digest is the copy's: what the runtime runs
                        keeper.kept(meta, source, digest)
                    write_meta(tmp, meta, built)
                if not limits.keep_modes:
                    os.chmod(tmp, 0o755)
                os.rename(tmp, final)
                ok = True
                for f in formats.copies():
                    if f in fmt and f not in built:
                        formats.get(f).make(final, name, log, report, meta)
                        write_meta(final, meta, meta["formats"] + [f])
            return image_from_dir(final, meta)
        finally:
            if not ok and tmp.exists():
                remove_tree(tmp)


def stale_imports(images: Path, name: str) -> list[Path]:
    """The temporary trees `.NAME.import-PID` of killed imports of this name; not another
    name's (".a.import-*" would also match image "a.import-x"'s ".a.import-x.import-PID",
    whose own import may be running under its own lock)."""
    prefix = f".{name}.import-"
    return [p for p in images.glob(f"{prefix}*") if p.name[len(prefix):].isdigit()]


def what_changed(imported: dict) -> list[str]:
    """What `image import` left out or changed, from image.json's "imported" record."""
    lines = []
    left_out = imported.get("left_out") or []
    if left_out:
        count = imported.get("left_out_count", len(left_out))
        shown = ", ".join(left_out[:5]) + (f" and {count - 5} more" if count > 5 else "")
        lines.append(f"left out {count} device node(s), FIFO(s) or socket(s) of the image "
                     f"(runtimes provide /dev): {one_line(shown)}")
    if imported.get("modes_cleared"):
        lines.append(f"cleared setuid/setgid or world-writable bits on {imported['modes_cleared']} file(s) and "
                     "directories (--keep-modes keeps them)")
    elif imported.get("kept_modes"):
        lines.append("modes kept as the image has them (--keep-modes): the image directory is 0700")
    return lines


class _name_lock:
    """One import per name at a time: a second one fails in one line instead of racing."""

    def __init__(self, images, name):
        self.path = images / f".{name}.import.lock"
        self.fd = -1

    def __enter__(self):
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self.fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(self.fd)
            raise NearmetalError(f"image '{self.path.name[1:-len('.import.lock')]}' is being imported by another "
                                 f"nearmetal (pid {holder}): wait for it to finish, or choose another --name") from None
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, f"{os.getpid()}\n".encode(), 0)
        return self

    def __exit__(self, *exc):
        os.close(self.fd)  # closing releases the lock; the file stays (removing it would race)
