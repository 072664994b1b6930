"""SIF files (Apptainer/Singularity images): read the header, find the primary SquashFS
partition, and give nearmetal a directory to inspect.

A SIF is a global header, a table of descriptors and data objects; the container's root
file system is the data object of type "partition", file system SquashFS, partition type
"primary system". nearmetal reads that layout itself (a few struct fields, the SIF v2
layout of the Apptainer project's sif library) so it can tell a SIF from anything else in
one line before any rank starts, and extracts the partition read-only with `unsquashfs -o
OFFSET` into a cache keyed by the file's SHA-256 (home()/sif/<digest>/rootfs): that copy is
what doctor, hybrid and bind planning look into (MPIs, glibc, programs, library closures);
the runtime still runs the SIF itself. Nothing is ever written into the user's file.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import sys
import time
import subprocess
from pathlib import Path

from ..errors import NearmetalError

MAGIC = b"SIF_MAGIC\0"
# header: launch script[32] magic[10] version[3] arch[3] uuid[16], then 8 int64
HEADER = struct.Struct("<32s10s3s3s16sqqqqqqqq")
# descriptor: DataType int32, Used bool, ID/GroupID/LinkedID uint32, Offset, Size,
# SizeWithPadding, CreatedAt, ModifiedAt, UID, GID int64, Name[128], Extra[384]
DESCRIPTOR = struct.Struct("<i?IIIqqqqqqq128s384s")
PARTITION_EXTRA = struct.Struct("<ii3s")
DATA_PARTITION = 0x4004
FS_SQUASH, PART_PRIMSYS = 1, 2
SQUASHFS_MAGIC = b"hsqs"
# 2: extractions checked (tree_import.check_unpacked); a version-1 copy may hold device nodes
# and setuid files as the SIF had them, so it is never reused (the version is in the directory name)
EXTRACT_VERSION = 2


class SifPartition:
    __slots__ = ("offset", "size", "arch")

    def __init__(self, offset, size, arch):
        self.offset, self.size, self.arch = offset, size, arch


def primary_partition(path) -> SifPartition:
    """The primary SquashFS partition of a SIF; a one-line error for anything else."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            head = f.read(HEADER.size)
            if len(head) < HEADER.size or head[32:42] != MAGIC:
                raise NearmetalError(f"{path} is not a SIF image (no SIF_MAGIC header)")
            fields = HEADER.unpack(head)
            total, offset, size = fields[8], fields[9], fields[10]
            if not 0 < total <= 4096 or offset < HEADER.size or size != total * DESCRIPTOR.size:
                raise NearmetalError(f"{path}: corrupt SIF header (descriptor table)")
            f.seek(offset)
            table = f.read(size)
            if len(table) < size:
                raise NearmetalError(f"{path}: truncated SIF (descriptor table cut off)")
            file_size = os.fstat(f.fileno()).st_size
            for i in range(total):
                d = DESCRIPTOR.unpack_from(table, i * DESCRIPTOR.size)
                dtype, used, d_off, d_size, extra = d[0], d[1], d[5], d[6], d[13]
                if not used or dtype != DATA_PARTITION:
                    continue
                fstype, parttype, arch = PARTITION_EXTRA.unpack_from(extra)
                if fstype != FS_SQUASH or parttype != PART_PRIMSYS:
                    continue
                if d_off <= 0 or d_off + d_size > file_size:
                    raise NearmetalError(f"{path}: truncated SIF (its root file system ends past the file's end)")
                f.seek(d_off)
                if f.read(4) != SQUASHFS_MAGIC:
                    raise NearmetalError(f"{path}: corrupt SIF (its root partition is not a SquashFS file system)")
                return SifPartition(d_off, d_size, arch.rstrip(b"\0").decode("ascii", "replace"))
    except OSError as e:
        raise NearmetalError(f"{path}: {e.strerror or e}")
    raise NearmetalError(f"{path}: SIF without a SquashFS root file system (encrypted or ext3 images are not supported)")


def file_digest(path) -> str:
    """sha256:HEX of a file, remembered per (path, size, mtime) so a run does not re-hash."""
    from ..home import subdir

    path = Path(path).resolve()
    st = path.stat()
    index = subdir("sif") / "digests.json"
    try:
        known = json.loads(index.read_text())
    except (OSError, ValueError):
        known = {}
    key = f"{path}:{st.st_size}:{st.st_mtime_ns}"
    if key in known:
        return known[key]
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    digest = f"sha256:{h.hexdigest()}"
    known = {k: v for k, v in known.items() if not k.startswith(f"{path}:")}
    known[key] = digest
    tmp = index.with_name(f".digests.json.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(known, indent=0))
    os.replace(tmp, index)
    return digest


def extracted(path, log=None) -> tuple[Path, str]:
    """(rootfs directory, digest) of a SIF's root file system, extracted once per content.

    The copy carries the mount points bind mode and --workdir need (nm/host-mpi, nm/work),
    so other runtimes that start from a directory (Charliecloud, bubblewrap) can run it too.
    """
    from ..home import subdir
    from .beneath import Tree
    from .chroot import remove_tree, supervised  # remove_tree: iterative: a crafted SIF's tree may be thousands deep
    from .recipe import MOUNT_POINTS
    from .safe_extract import Limits
    from .tree_import import check_unpacked

    path = Path(path).resolve()
    part = primary_partition(path)
    digest = file_digest(path)
    root = subdir("sif") / f"{digest.split(':', 1)[1][:24]}-v{EXTRACT_VERSION}"
    done = root / "extracted.json"
    if done.is_file():
        return root / "rootfs", digest
    if not shutil.which("unsquashfs"):
        raise NearmetalError("reading a SIF needs unsquashfs (Debian: squashfs-tools)")
    from .importer import unsquashfs_checked

    unsquashfs_checked()
    tmp = root.with_name(f".{root.name}.tmp-{os.getpid()}")
    remove_tree(tmp)
    tmp.mkdir(parents=True, mode=0o700)  # unsquashfs as root makes device nodes and setuid files before the check
    # Once per SIF content, and seconds for a large one: say what is happening (on a terminal:
    # a refused run's stderr stays its one error line).
    say = sys.stderr.isatty()
    if say:
        print(f"nearmetal: reading {path.name} ({part.size / 1e6:.0f} MB): its root file system is extracted "
              f"read-only, once, into {root}", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    try:
        # -no-xattrs: security labels of the image's files mean nothing here; -n: no progress.
        done_run = subprocess.run(supervised(["unsquashfs", "-n", "-no-xattrs", "-o", str(part.offset), "-d",
                                              str(tmp / "rootfs"), str(path)]), capture_output=True, text=True,
                                  stdin=subprocess.DEVNULL)
        if done_run.returncode != 0 or not (tmp / "rootfs").is_dir():
            tail = (done_run.stderr.strip().splitlines() or ["unsquashfs failed"])[-1]
            raise NearmetalError(f"{path}: cannot read its root file system: {tail}")
        # The same check as `image import` (safe_extract.py): no device node, FIFO or socket,
        # no setuid/setgid or world-writable file stays in the copy; the mount points are made
        # beneath the copy's root (an image's /nm may be a link to a host directory).
        check_unpacked(tmp / "rootfs", Limits(max_files=1 << 40, max_bytes=1 << 60))
        with Tree(tmp / "rootfs") as tree:
            for mp in MOUNT_POINTS:
                tree.makedirs(mp)
        (tmp / "extracted.json").write_text(json.dumps({"sif": str(path), "digest": digest,
                                                        "version": EXTRACT_VERSION, "arch": part.arch}))
        os.chmod(tmp, 0o755)
        try:
            os.rename(tmp, root)
        except OSError:  # another process extracted it first
            pass
        if say:
            print(f"nearmetal: {path.name} read in {time.monotonic() - t0:.1f} s", file=sys.stderr, flush=True)
    finally:
        remove_tree(tmp)
    return root / "rootfs", digest
