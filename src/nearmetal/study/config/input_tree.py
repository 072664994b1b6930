"""A program benchmark's `inputs` as nearmetal stages them: regular files, directories and
symbolic links only, copied within a size limit.

An input is named by the user; what lies under it may not be what it seems. A character
device with /dev/zero's numbers never ends, a FIFO blocks its reader, a /proc file says it
is empty and is not: copying one would fill the file system (and a full disk would then be
blamed on the database). So a device, FIFO or socket anywhere in an input tree is refused in
one line naming it, when the study is planned and again when a run stages it; symbolic links
inside a tree are copied as links, never followed (the input itself may be a link: it is
what the user named); and a copy stops, with a one-line error, once it has written more
than the limit the input was measured against.
"""

import os
import stat

from ...errors import NearmetalError

_KINDS = {stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device", stat.S_IFIFO: "a FIFO",
          stat.S_IFSOCK: "a socket"}
_CHUNK = 1 << 20


def _refusal(path, mode):
    kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file, directory or symbolic link")
    return NearmetalError(f"input {path} is {kind}: only regular files, directories and symbolic links "
                          f"are staged")


def check(path):
    """A one-line NearmetalError for the first device, FIFO or socket in the tree at path (the
    path itself followed, nothing under it)."""
    try:
        mode = os.stat(path).st_mode
        if stat.S_ISREG(mode):
            return
        if not stat.S_ISDIR(mode):
            raise _refusal(path, mode)
        stack = [path]
        while stack:
            top = stack.pop()
            with os.scandir(top) as entries:
                for entry in entries:
                    mode = entry.stat(follow_symlinks=False).st_mode
                    if stat.S_ISDIR(mode):
                        stack.append(entry.path)
                    elif not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
                        raise _refusal(entry.path, mode)
    except OSError as e:
        raise NearmetalError(f"input {getattr(e, 'filename', None) or path}: {e.strerror or e}") from None


def copy(src, dst, limit):
    """Copy the input src (a file or a directory tree; src itself followed) to dst, writing
    at most limit bytes of file contents: symbolic links inside as links, modes and times
    kept, anything else refused. A NearmetalError (one line) for what cannot be copied."""
    budget = _Budget(src, limit)
    try:
        if not os.path.isdir(src):
            _copy_file(src, dst, budget, follow=True)
            return
        made = []
        stack = [(src, dst)]
        while stack:
            here, there = stack.pop()
            os.mkdir(there, 0o700)
            made.append((here, there))
            with os.scandir(here) as entries:
                for entry in sorted(entries, key=lambda e: e.name):
                    target = os.path.join(there, entry.name)
                    mode = entry.stat(follow_symlinks=False).st_mode
                    if stat.S_ISDIR(mode):
                        stack.append((entry.path, target))
                    elif stat.S_ISLNK(mode):
                        os.symlink(os.readlink(entry.path), target)
                    elif stat.S_ISREG(mode):
                        _copy_file(entry.path, target, budget, follow=False)
                    else:
                        raise _refusal(entry.path, mode)
        for here, there in reversed(made):  # last: a read-only directory was writable while filled
            st = os.stat(here)
            os.chmod(there, stat.S_IMODE(st.st_mode))
            os.utime(there, ns=(st.st_atime_ns, st.st_mtime_ns))
    except OSError as e:
        raise NearmetalError(f"cannot stage input {getattr(e, 'filename', None) or src}: {e.strerror or e}") from None


class _Budget:
    def __init__(self, src, limit):
        self.src, self.limit, self.left = src, limit, limit

    def spend(self, n):
        self.left -= n
        if self.left < 0:
            raise NearmetalError(f"input {self.src}: more than {_size(self.limit)} to copy, the copy limit (an "
                                 f"input over it when the run is planned is shown read-only instead): it grew, "
                                 f"or a file in it is not what its size says")


def _size(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n} bytes"


def _copy_file(src, dst, budget, follow):
    # O_NONBLOCK: a FIFO swapped in since the check does not block the open; fstat says what it is.
    fd = os.open(src, os.O_RDONLY | os.O_NONBLOCK | (0 if follow else os.O_NOFOLLOW))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _refusal(src, st.st_mode)
        out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            while chunk := os.read(fd, _CHUNK):
                budget.spend(len(chunk))
                view = memoryview(chunk)
                while view:
                    view = view[os.write(out, view):]
            os.fchmod(out, stat.S_IMODE(st.st_mode))
            os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
        finally:
            os.close(out)
    finally:
        os.close(fd)
