"""The one way nearmetal writes an image it did not build: tar layers (docker, OCI) here, a
root file system directory and the check after unsquashfs (SquashFS, SIF) in tree_import.py,
through the same Extractor.

Rules (docs/applications.md, "image import"): every path is resolved beneath the image's root (beneath.py),
never by the kernel following a link; an existing entry is removed and replaced, never
written through (so neither a planted symlink nor a hard link reaches its target); a hard
link only to a file already inside the image; whiteouts never through a link of the image;
device nodes, FIFOs and sockets are left out and listed; setuid/setgid bits and o+w (on
files, and on directories without the sticky bit: /tmp stays 1777) are cleared unless the
user asks to keep modes; the number of entries and their total size are bounded.
"""

from __future__ import annotations

import os
import stat
import tarfile

from ..errors import NearmetalError, one_line
from .beneath import DIR_FLAGS, Tree, lstat_at, remove, set_mode_at, split, write_all

MAX_FILES = 1_000_000
MAX_BYTES = 64 << 30
CHUNK = 1 << 20
FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
SPECIAL = {stat.S_IFCHR: "character device", stat.S_IFBLK: "block device", stat.S_IFIFO: "FIFO",
           stat.S_IFSOCK: "socket"}


def size_text(n: int) -> str:
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):g} {unit}"
    return f"{n} bytes"


def _time(t) -> int:
    """An archive's timestamp as utime takes it (a crafted one may be 1e30 or negative)."""
    try:
        return min(max(int(t), 0), 1 << 33)
    except (ValueError, OverflowError):
        return 0


def _ids(uid, gid, parts) -> tuple[int, int]:
    for n in (uid, gid):
        if not isinstance(n, int) or not 0 <= n < 0xFFFFFFFF:  # 2**32-1 is chown's "unchanged"
            raise NearmetalError(f"'{one_line('/'.join(parts))[:160]}': owner id {str(n)[:40]} is not a valid "
                                 "uid or gid (a corrupt or crafted archive)")
    return uid, gid


class Limits:
    __slots__ = ("max_files", "max_bytes", "keep_modes")

    def __init__(self, max_files=MAX_FILES, max_bytes=MAX_BYTES, keep_modes=False):
        self.max_files, self.max_bytes, self.keep_modes = max_files, max_bytes, keep_modes


def safe_mode(mode: int, is_dir: bool, keep: bool) -> int:
    """The mode an entry gets: setuid/setgid and o+w cleared (o+w kept on a sticky
    directory such as /tmp), unless the user keeps modes."""
    mode &= 0o7777
    if keep:
        return mode
    if is_dir:
        return mode & ~0o4000 if mode & 0o1000 else mode & ~0o4002
    return mode & ~0o6002


class Extractor:
    """Writes entries into one image root; counts and reports what it changed."""

    def __init__(self, rootfs, limits: Limits | None = None):
        self.tree = Tree(rootfs)
        self.limits = limits or Limits()
        self.files = self.bytes = self.cleared = 0
        self.left_out: list[str] = []  # "path (what)" of each special file not written
        self.dirs: dict[tuple, tuple] = {}  # directory attributes, set at the end (a 0555 one stays writable)
        self.layer: set[str] = set()  # paths written by the current layer: its own whiteouts spare them
        self.owner = os.geteuid() == 0  # ownership as the image has it: only root can give files away

    def close(self):
        self.tree.close()

    def _count(self, size=0):
        self.files += 1
        self.bytes += size
        if self.files > self.limits.max_files:
            raise NearmetalError(f"the image has more than {self.limits.max_files:,} files and directories, the "
                                 f"import limit (raise it with --max-files)")
        if self.bytes > self.limits.max_bytes:
            raise NearmetalError(f"the image is larger than {size_text(self.limits.max_bytes)}, the import limit "
                                 f"(raise it with --max-size)")

    def _mode(self, mode, is_dir):
        safe = safe_mode(mode, is_dir, self.limits.keep_modes)
        if safe != mode & 0o7777:
            self.cleared += 1
        return safe

    def _place(self, parts, keep_dir=False):
        """(parent descriptor, name) for a new entry; what was there is removed (a directory
        over a directory stays). Only ever acts inside the resolved parent."""
        if not parts:
            raise NearmetalError("an archive member names the image's root as a file (a corrupt or crafted archive)")
        parent = self.tree.dir_fd(parts[:-1], create=True)
        try:
            st = lstat_at(parent, parts[-1])
            if st is not None and not (keep_dir and stat.S_ISDIR(st.st_mode)):
                remove(parent, parts[-1])
        except BaseException:
            os.close(parent)
            raise
        for i in range(1, len(parts) + 1):  # its parents too: an opaque whiteout spares the layer's own
            self.layer.add("/".join(parts[:i]))
        return parent, parts[-1]

    def _own(self, fd, uid, gid):
        if self.owner:
            os.fchown(fd, uid, gid)

    def directory(self, parts, mode, uid, gid, mtime):
        self._count()
        uid, gid = _ids(uid, gid, parts)
        if parts:
            parent, name = self._place(parts, keep_dir=True)
            try:
                if lstat_at(parent, name) is None:
                    os.mkdir(name, 0o755, dir_fd=parent)
            finally:
                os.close(parent)
        self.dirs[tuple(parts)] = (self._mode(mode, True), uid, gid, _time(mtime))

    def regular(self, parts, mode, uid, gid, mtime, size, fill):
        """A file of `size` bytes, written by fill(descriptor) into a new file (never an old one)."""
        self._count(size)
        uid, gid = _ids(uid, gid, parts)
        parent, name = self._place(parts)
        try:
            fd = os.open(name, FILE_FLAGS, 0o600, dir_fd=parent)
        finally:
            os.close(parent)
        try:
            fill(fd)
            self._own(fd, uid, gid)  # before chmod: chown clears setuid bits
            os.fchmod(fd, self._mode(mode, False))
            os.utime(fd, (_time(mtime),) * 2)
        finally:
            os.close(fd)

    def symlink(self, parts, target, uid, gid, mtime):
        """A link stored as it is: nearmetal never follows it while writing."""
        self._count()
        uid, gid = _ids(uid, gid, parts)
        parent, name = self._place(parts)
        try:
            os.symlink(target, name, dir_fd=parent)
            if self.owner:
                os.chown(name, uid, gid, dir_fd=parent, follow_symlinks=False)
            os.utime(name, (_time(mtime),) * 2, dir_fd=parent, follow_symlinks=False)
        finally:
            os.close(parent)

    def hardlink(self, parts, target_parts, shown):
        """A hard link to a file already inside the image (never to anything outside)."""
        self._count()
        tdir = self.tree.dir_fd(target_parts[:-1]) if target_parts else None
        try:
            st = lstat_at(tdir, target_parts[-1]) if tdir is not None else None
            if st is None or stat.S_ISDIR(st.st_mode):
                raise NearmetalError(f"hard link '{one_line('/'.join(parts))[:160]}' -> '{one_line(shown)[:160]}': "
                                     "its target is not a file extracted earlier into the image: refused")
            if target_parts == parts:
                return
            parent, name = self._place(parts)
            try:
                os.link(target_parts[-1], name, src_dir_fd=tdir, dst_dir_fd=parent, follow_symlinks=False)
            finally:
                os.close(parent)
        finally:
            if tdir is not None:
                os.close(tdir)

    def special(self, parts, what):
        """A device node, FIFO or socket: not created; listed (runtimes provide /dev)."""
        self._count()
        self.left_out.append(f"/{'/'.join(parts)} ({what})")

    def whiteout(self, parts):
        """`.wh.NAME`: NAME of a lower layer goes; resolved without following any link."""
        self._count()
        if "/".join(parts) in self.layer:  # the layer's own file: whiteouts hide lower layers only
            return
        parent = self.tree.dir_fd(parts[:-1], follow=False)
        if parent is not None:
            try:
                remove(parent, parts[-1])
            finally:
                os.close(parent)

    def opaque(self, parts):
        """`.wh..wh..opq`: the lower layers' contents of the directory go, the layer's own stay."""
        self._count()
        fd = self.tree.dir_fd(parts, follow=False)
        if fd is not None:
            try:
                self._remove_lower(fd, "/".join(parts))
            finally:
                os.close(fd)

    def _remove_lower(self, fd, prefix):
        for entry in list(os.scandir(fd)):
            rel = f"{prefix}/{entry.name}" if prefix else entry.name
            if rel not in self.layer:
                remove(fd, entry.name)
            elif entry.is_dir(follow_symlinks=False):
                sub = os.open(entry.name, DIR_FLAGS, dir_fd=fd)
                try:
                    self._remove_lower(sub, rel)
                finally:
                    os.close(sub)

    def end_layer(self):
        self.layer = set()

    def finish(self):
        """Directory attributes, deepest first, on directories that are still directories."""
        for parts in sorted(self.dirs, key=len, reverse=True):
            mode, uid, gid, mtime = self.dirs[parts]
            fd = self.tree.dir_fd(parts, follow=False)
            if fd is None:
                continue
            try:
                if self.owner:
                    os.fchown(fd, uid, gid)
                set_mode_at(fd, ".", mode)
                os.utime(fd, (mtime, mtime))
            finally:
                os.close(fd)
        self.dirs = {}

    # --- tar layers ---------------------------------------------------------------------

    def member(self, m: tarfile.TarInfo, layer: tarfile.TarFile):
        parts = split(m.name, "archive member")
        base = parts[-1] if parts else ""
        if base == ".wh..wh..opq":
            return self.opaque(parts[:-1])
        if base.startswith(".wh..wh."):  # aufs's own bookkeeping, not part of the image
            return self._count()
        if base.startswith(".wh."):
            hidden = base[len(".wh."):]
            if hidden in ("", ".", ".."):
                raise NearmetalError(f"whiteout '{one_line(m.name)[:160]}' names no file: refused (a crafted archive)")
            return self.whiteout(parts[:-1] + [hidden])
        if m.isdir():
            return self.directory(parts, m.mode, m.uid, m.gid, m.mtime)
        if m.isreg():
            source = layer.extractfile(m)
            return self.regular(parts, m.mode, m.uid, m.gid, m.mtime, m.size,
                                lambda fd: _copy_stream(source, fd, m.size, parts))
        if m.issym():
            return self.symlink(parts, m.linkname, m.uid, m.gid, m.mtime)
        if m.islnk():
            return self.hardlink(parts, split(m.linkname, "hard link target"), m.linkname)
        what = {tarfile.CHRTYPE: "character device", tarfile.BLKTYPE: "block device",
                tarfile.FIFOTYPE: "FIFO"}.get(m.type, f"tar type {m.type!r}")
        return self.special(parts, what)

    def layer_from(self, fileobj, what: str):
        """One image layer (a tar, gzip/bzip2/xz or not) read as a stream, in order."""
        try:
            with tarfile.open(fileobj=fileobj, mode="r|*") as layer:
                for m in layer:
                    layer.members = []  # a stream: keep no list of members (memory stays flat)
                    self.member(m, layer)
        except NearmetalError:
            raise
        except (tarfile.TarError, EOFError, ValueError) as e:
            raise NearmetalError(f"{what} cannot be read as a tar layer ({one_line(str(e))[:200]}; "
                                 "zstd layers are not supported)") from None
        except OSError as e:
            raise NearmetalError(f"{what}: {one_line(e.strerror or str(e))[:200]} while unpacking it") from None
        finally:
            self.end_layer()


def _copy_stream(source, fd, size, parts):
    left = size
    while left > 0:
        block = source.read(min(CHUNK, left))
        if not block:
            raise NearmetalError(f"'{one_line('/'.join(parts))[:160]}' is cut short in the archive "
                                 f"({size - left} of {size} bytes)")
        write_all(fd, block)
        left -= len(block)
