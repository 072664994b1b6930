"""Files written into directories nearmetal did not create (reports, trace reports, I/O
hints, decision files), so that nothing planted there can redirect the write.

A file is written as a new temporary file in the same directory (O_CREAT|O_EXCL|O_NOFOLLOW:
never an existing file, never through a link), synced, then renamed over its final name.
A rename replaces the directory entry itself: even a link planted between the check and the
rename is replaced, never followed, so its target is never written. A final name that is a
symbolic link (or a directory, FIFO, device...) is refused in one line rather than replaced:
someone put it there, and the user should see that. A hard-linked file is replaced, not
written through, so its other names keep their contents.

    write_text(path, text)          the whole file at once
    with replacing(path) as f: ...  a file written piece by piece (f is binary)
    move_into(src, path)            a finished file moved (renamed, or copied) to path
    refuse_links(path, suffixes, what)  a file and those beside it that must not be links (databases)
"""

import errno
import os
import secrets
import shutil
import stat
from contextlib import contextmanager

from .errors import NearmetalError, one_line

MODE = 0o644  # reports are meant to be read by others; the umask still applies


def _q(path):
    return one_line(os.fspath(path))


def check_target(path, what="file"):
    """NearmetalError unless `path` is absent or a regular file (a link is never followed)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as e:
        raise NearmetalError(f"cannot write {what} {_q(path)}: {e.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        raise NearmetalError(f"refusing to write {what} {_q(path)}: it is a symbolic link (remove it, or choose "
                             f"another directory)")
    if not stat.S_ISREG(st.st_mode):
        raise NearmetalError(f"refusing to write {what} {_q(path)}: it exists and is not a regular file")


def refuse_links(path, suffixes, what):
    """NearmetalError when `path` + any of `suffixes` ("" for the path itself) is a symbolic
    link: a database's journal, WAL and lock files are written wherever a link points."""
    for suffix in suffixes:
        name = f"{os.fspath(path)}{suffix}"
        try:
            is_link = stat.S_ISLNK(os.lstat(name).st_mode)
        except FileNotFoundError:
            continue
        except OSError as e:
            raise NearmetalError(f"cannot check {what} {_q(name)}: {e.strerror}") from None
        if is_link:
            raise NearmetalError(f"refusing {what}{' file' if suffix else ''} {_q(name)}: it is a symbolic link "
                                 f"(give the real path instead, or remove the link)")


@contextmanager
def replacing(path, what="file", mode=MODE):
    """A new binary file that becomes `path` when the block ends without an exception (and is
    removed when it does not)."""
    path = os.path.abspath(os.fspath(path))
    folder, name = os.path.split(path)
    check_target(path, what)
    try:
        dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as e:
        raise NearmetalError(f"cannot write {what} {_q(path)}: {_q(folder)}: {e.strerror}") from None
    tmp = f".{name[:200]}.{secrets.token_hex(6)}.nearmetal-tmp"
    try:
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dfd)
        except OSError as e:
            raise NearmetalError(f"cannot write {what} {_q(path)}: {e.strerror}") from None
        try:
            with os.fdopen(fd, "wb") as f:
                yield f
                f.flush()
                os.fsync(f.fileno())
            check_target(path, what)  # again: the window left is the rename's, which replaces a link
            os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            tmp = None
            os.fsync(dfd)
        except OSError as e:
            raise NearmetalError(f"cannot write {what} {_q(path)}: {e.strerror}") from None
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp, dir_fd=dfd)
                except OSError:
                    pass
    finally:
        os.close(dfd)


def write_bytes(path, data, what="file", mode=MODE):
    with replacing(path, what, mode) as f:
        f.write(data)
    return path


def write_text(path, text, what="file", mode=MODE):
    return write_bytes(path, text.encode("utf-8"), what, mode)


def move_into(src, path, what="file"):
    """Move the finished file `src` (nearmetal's own) to `path`: renamed when both are on one
    file system (the rename replaces, never follows, whatever is at `path`), else copied
    through replacing() and removed."""
    check_target(path, what)
    try:
        os.rename(src, path)
        return path
    except OSError as e:
        if e.errno != errno.EXDEV:  # another file system
            raise NearmetalError(f"cannot move {what} to {_q(path)}: {e.strerror}") from None
    with open(src, "rb") as f, replacing(path, what) as out:
        shutil.copyfileobj(f, out, 1 << 20)
    os.unlink(src)
    return path
