"""Images that arrive as a directory tree: a root file system directory copied entry by entry
through safe_extract.Extractor (nothing followed, special files left out, hard links kept
within the copy), and the check after unsquashfs has unpacked a SquashFS file or SIF into a
fresh directory (special files removed and listed, modes made safe, entries counted). Both
walk by descriptors, one open at a time, never following a link."""

from __future__ import annotations

import errno
import os
import stat

from ..errors import NearmetalError, one_line
from .beneath import Tree, set_mode_at, write_all
from .safe_extract import CHUNK, SPECIAL, Extractor, Limits, safe_mode


def copy_tree(ex: Extractor, source):
    """A directory's contents copied entry by entry: nothing followed, special files left
    out, hard links kept within the copy."""
    with Tree(source) as src:
        st = os.fstat(src.fd)
        ex.directory([], st.st_mode, st.st_uid, st.st_gid, st.st_mtime)
        linked: dict[tuple, list] = {}
        for fd, parts in _directories(src):
            for entry in sorted(os.scandir(fd), key=lambda e: e.name):
                _copy_entry(ex, fd, entry.name, parts + [entry.name], linked)

def _copy_entry(ex: Extractor, dirfd, name, parts, linked):
    st = os.lstat(name, dir_fd=dirfd)
    kind = stat.S_IFMT(st.st_mode)
    if kind == stat.S_IFDIR:
        ex.directory(parts, st.st_mode, st.st_uid, st.st_gid, st.st_mtime)
    elif kind == stat.S_IFLNK:
        ex.symlink(parts, os.readlink(name, dir_fd=dirfd), st.st_uid, st.st_gid, st.st_mtime)
    elif kind == stat.S_IFREG:
        key = (st.st_dev, st.st_ino)
        if st.st_nlink > 1 and key in linked:
            return ex.hardlink(parts, linked[key], "/".join(linked[key]))
        src = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dirfd)
        try:
            now = os.fstat(src)
            if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != key:
                raise NearmetalError(f"'{one_line('/'.join(parts))[:160]}' changed while it was copied")
            ex.regular(parts, now.st_mode, now.st_uid, now.st_gid, now.st_mtime, now.st_size,
                       lambda fd: copy_data(src, fd, now.st_size))
        finally:
            os.close(src)
        if st.st_nlink > 1:
            linked[key] = parts
    else:
        ex.special(parts, SPECIAL.get(kind, "special file"))


def _directories(tree: Tree):
    """(descriptor, parts) of every directory under the tree's root, parents first; one
    descriptor open at a time (a directory of 100,000 directories needs no more), each
    reopened from the root without following any link. The caller lists a directory before
    the next is yielded; its subdirectories are found from that listing."""
    pending = [[]]
    while pending:
        parts = pending.pop()
        fd = tree.dir_fd(parts, follow=False)
        if fd is None:  # replaced by something else meanwhile: nothing to walk
            continue
        try:
            yield fd, parts
            subdirs = [e.name for e in os.scandir(fd) if e.is_dir(follow_symlinks=False)]
        finally:
            os.close(fd)
        pending.extend(parts + [name] for name in sorted(subdirs, reverse=True))


def copy_data(src: int, dst: int, size: int):
    """At most `size` bytes (the size when the copy began: a growing file cannot make it
    endless): copy_file_range (reflinks where the file system has them), else read/write
    (another file system, /proc)."""
    left, fast = size, True
    while left > 0:
        if fast:
            try:
                n = os.copy_file_range(src, dst, min(left, 1 << 30))
            except OSError as e:
                if e.errno not in (errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EPERM):
                    raise
                fast = False
                continue
        else:
            block = os.read(src, min(CHUNK, left))
            write_all(dst, block)
            n = len(block)
        if n == 0:
            break
        left -= n


def check_unpacked(rootfs, limits: Limits) -> Extractor:
    """After unsquashfs: special files removed and listed, modes made safe, entries counted.
    Walks by descriptors, never following a link."""
    ex = Extractor(rootfs, limits)
    st = os.fstat(ex.tree.fd)
    mode = ex._mode(st.st_mode, True)
    if mode != st.st_mode & 0o7777:
        set_mode_at(ex.tree.fd, ".", mode)
    for fd, parts in _directories(ex.tree):
        for entry in list(os.scandir(fd)):
            st = os.lstat(entry.name, dir_fd=fd)
            kind = stat.S_IFMT(st.st_mode)
            if kind in SPECIAL:
                os.unlink(entry.name, dir_fd=fd)
                ex.special(parts + [entry.name], SPECIAL[kind])
                continue
            ex._count(st.st_size if kind == stat.S_IFREG else 0)
            if kind in (stat.S_IFDIR, stat.S_IFREG):
                mode = safe_mode(st.st_mode, kind == stat.S_IFDIR, limits.keep_modes)
                if mode != st.st_mode & 0o7777:
                    ex.cleared += 1
                    set_mode_at(fd, entry.name, mode)
    return ex
