"""Paths resolved beneath an image's root directory, never by the kernel following a link.

An imported image is hostile input: its symbolic links may point anywhere on the host
(`/etc`, `/root/.ssh`), and a later archive member, whiteout or nearmetal's own files written
into the image must never land there. Every directory on a path is opened one component at
a time relative to its parent's descriptor with O_NOFOLLOW, so the kernel never follows a
link; where a component is a symbolic link of the image, its target is read and walked the
same way, as the image itself would see it (an absolute target starts again at the image's
root, `..` never climbs above it: openat2's RESOLVE_IN_ROOT, done in Python because openat2
has no Python binding and the syscall is Linux 5.6+ only). Callers that must not follow the
image's links at all (whiteouts) ask for follow=False.
"""

from __future__ import annotations

import errno
import os
import stat

from ..errors import NearmetalError, one_line

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
MAX_LINKS = 40  # the kernel's own limit on links in one path (ELOOP)
# Directories deep (real images: a few dozen; node_modules a hundred or so). A crafted tree
# thousands deep exhausted Python's recursion (RecursionError) in what walks it.
MAX_DEPTH = 512


def split(name: str, what: str) -> list[str]:
    """A member's path as components beneath the root: a leading '/' or './' is dropped (tar's
    convention); a '..' component is refused, since it can only mean reaching outside."""
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise NearmetalError(f"{what} '{one_line(name)[:160]}' has '..' in its path, which would reach outside "
                             "the image: refused (a crafted or corrupt archive)")
    return parts


class Tree:
    """The image's root directory, held open; every path below is resolved from it."""

    def __init__(self, path):
        self.path = str(path)
        self.fd = os.open(self.path, DIR_FLAGS)

    def close(self):
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def dir_fd(self, parts, create=False, follow=True):
        """A descriptor (the caller closes it) of the directory `parts` beneath the root, or None
        when it is missing (create=False), not a directory, or reached through a link with
        follow=False. create makes missing directories (0755, as tar does)."""
        stack = [os.dup(self.fd)]
        pending = list(parts)
        links = 0
        try:
            while pending:
                name = pending.pop(0)
                if name in ("", "."):
                    continue
                if name == "..":  # only from a link's target: never above the root
                    if len(stack) > 1:
                        os.close(stack.pop())
                    continue
                cur = stack[-1]
                if len(stack) > MAX_DEPTH:
                    raise NearmetalError(f"'{one_line('/'.join(parts))[:160]}' lies more than {MAX_DEPTH} directories "
                                         "deep (a crafted image)")
                try:
                    stack.append(os.open(name, DIR_FLAGS, dir_fd=cur))
                    continue
                except FileNotFoundError:
                    if not create:
                        return None
                    os.mkdir(name, 0o755, dir_fd=cur)
                    stack.append(os.open(name, DIR_FLAGS, dir_fd=cur))
                    continue
                except OSError as e:
                    if e.errno not in (errno.ELOOP, errno.ENOTDIR):
                        raise
                st = os.lstat(name, dir_fd=cur)
                if not stat.S_ISLNK(st.st_mode):
                    if create:
                        raise NearmetalError(f"'{one_line('/'.join(parts))[:160]}': '{one_line(name)[:80]}' on its way "
                                             "is a file, not a directory (a corrupt or crafted image)")
                    return None
                if not follow:
                    return None
                links += 1
                if links > MAX_LINKS:
                    raise NearmetalError(f"'{one_line('/'.join(parts))[:160]}': more than {MAX_LINKS} symbolic links "
                                         "on its way (a link loop in the image)")
                target = os.readlink(name, dir_fd=cur)
                if target.startswith("/"):
                    for fd in stack[1:]:
                        os.close(fd)
                    del stack[1:]
                pending[:0] = target.split("/")
            return stack.pop()
        finally:
            for fd in stack:
                os.close(fd)

    def makedirs(self, rel: str):
        """Make directory `rel` (and its parents) beneath the root."""
        fd = self.dir_fd(split(rel, "directory"), create=True)
        os.close(fd)

    def write_file(self, rel: str, data: bytes, mode=0o644):
        """Replace file `rel` beneath the root by a new one (a new file renamed over: a link
        planted there is replaced, never written through)."""
        parts = split(rel, "file")
        parent = self.dir_fd(parts[:-1], create=True)
        tmp = f".{parts[-1]}.tmp-{os.getpid()}"
        try:
            remove(parent, tmp)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode,
                         dir_fd=parent)
            try:
                write_all(fd, data)
                os.fchmod(fd, mode)
            finally:
                os.close(fd)
            existing = lstat_at(parent, parts[-1])
            if existing is not None and stat.S_ISDIR(existing.st_mode):
                remove(parent, parts[-1])
            os.replace(tmp, parts[-1], src_dir_fd=parent, dst_dir_fd=parent)
        finally:
            os.close(parent)


def lstat_at(dirfd: int, name: str):
    try:
        return os.lstat(name, dir_fd=dirfd)
    except FileNotFoundError:
        return None


def remove(dirfd: int, name: str) -> bool:
    """Remove entry `name` of directory dirfd, whatever it is; a directory with its contents
    (rmtree_at: it never follows a link). False when there was none."""
    st = lstat_at(dirfd, name)
    if st is None:
        return False
    if stat.S_ISDIR(st.st_mode):
        rmtree_at(dirfd, name)
    else:
        os.unlink(name, dir_fd=dirfd)
    return True


def rmtree_at(dirfd: int, name: str):
    """Remove directory `name` of dirfd with all it holds, never following a link: iterative,
    one descriptor open at a time (shutil.rmtree recurses and holds a descriptor per level:
    a tree 1,200 directories deep raised RecursionError). Climbs back with '..': only for
    nearmetal's own trees, which nothing else changes meanwhile."""
    fd = os.open(name, DIR_FLAGS, dir_fd=dirfd)
    down: list[str] = []
    try:
        while True:
            sub = None
            with os.scandir(fd) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        sub = entry.name
                        break
                    os.unlink(entry.name, dir_fd=fd)
            if sub is not None:
                below = os.open(sub, DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = below
                down.append(sub)
                continue
            if not down:
                break
            up = os.open("..", DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = up
            os.rmdir(down.pop(), dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=dirfd)


def write_all(fd: int, data) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def set_mode_at(dirfd: int, name: str, mode: int):
    """chmod of entry `name` (a file or directory, never a link's target): through an O_PATH
    descriptor, since Linux has no fchmodat(AT_SYMLINK_NOFOLLOW)."""
    fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dirfd)
    try:
        if stat.S_ISLNK(os.fstat(fd).st_mode):
            return
        os.chmod(f"/proc/self/fd/{fd}", mode)
    finally:
        os.close(fd)
