"""One writer per results database: an exclusive `flock` on `<db>.lock`.

The lock file beside the database holds the writer's PID, what it is doing (e.g.
"study 'x'") and its host (on a cluster file system a PID means nothing elsewhere). The lock itself is the kernel's flock on that file, not the file's
existence: it dies with the process however the process ends (even SIGKILL), so there
is never a stale lock to clean up, and a second writer is refused at once with the
holder's PID. Within one process the lock is re-entrant (`nearmetal io sweep` holds it
across its pre-selection and its sweep, each of which opens the store again).
"""

import errno
import fcntl
import os
import socket
import time
from pathlib import Path

from ...errors import NearmetalError
from ...proc import pid_exists

_HELD = {}
_HOST = socket.gethostname()   # realpath of the lock file -> [fd, count, what]


def lock_path(db_path):
    return Path(str(db_path) + ".lock")


class WriterLock:
    """A held writer lock; release() (or leaving the `with` block) lets it go."""

    def __init__(self, key, db_path):
        self._key, self.db_path, self._released = key, Path(db_path), False

    @property
    def path(self):
        return lock_path(self.db_path)

    def release(self):
        if self._released:
            return
        self._released = True
        held = _HELD.get(self._key)
        if held is None:
            return
        held[1] -= 1
        if held[1] == 0:
            del _HELD[self._key]
            fd = held[0]
            try:
                os.ftruncate(fd, 0)  # no PID of a finished writer left behind
            except OSError:
                pass
            os.close(fd)         # closing the only descriptor releases the flock

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


def lock_for_writing(db_path, what):
    """Take the writer lock of the database at `db_path` (creating its directory), or
    raise a one-line NearmetalError naming the PID that holds it. `what` says who writes
    ("study 'x'", "import of study 'y'", "I/O sweep 'z'"), for the refusal message."""
    path = lock_path(db_path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        key = os.path.realpath(path)
    except OSError as e:
        raise NearmetalError(f"cannot create the directory of results database {db_path}: {e.strerror}")
    if key in _HELD:
        _HELD[key][1] += 1
        return WriterLock(key, db_path)
    try:
        # O_NOFOLLOW: the file is truncated and written; a link planted there is refused (ELOOP)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise NearmetalError(f"refusing the lock file {path} of results database {db_path}: it is a symbolic "
                                 f"link") from None
        raise NearmetalError(f"cannot open the lock file {path} of results database {db_path}: {e.strerror}")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise NearmetalError(_refusal(path, db_path, what)) from None
    except OSError as e:
        os.close(fd)
        hint = ""
        if e.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):  # e.g. Lustre mounted without -o flock
            hint = "; its file system offers no locks: put the database on one that does (--db)"
        raise NearmetalError(f"cannot lock {path} (results database {db_path}): {e.strerror}{hint}") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n{what}\n{_HOST}\n".encode(), 0)
    _HELD[key] = [fd, 1, what]
    return WriterLock(key, db_path)


def refuse_if_held(db_path, what):
    """A one-line NearmetalError naming the holder when another process holds the writer lock;
    nothing is created or written (a reader's check: no lock file, no holder)."""
    path = lock_path(db_path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)  # a FIFO: no wait
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        raise NearmetalError(_refusal(path, db_path, what)) from None
    except OSError:
        return
    finally:
        os.close(fd)


def holder(db_path):
    """(pid, what, host) written by the current holder of the lock, or None."""
    path = lock_path(db_path)
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    lines = text.splitlines()
    if not lines or not lines[0].strip().isdigit():
        return None
    return int(lines[0]), (lines[1].strip() if len(lines) > 1 else ""), (lines[2].strip() if len(lines) > 2 else _HOST)


def _refusal(path, db_path, what):
    who = None
    for _ in range(20):  # the holder writes its PID just after taking the lock (until then: a past holder's)
        who = holder(db_path)
        if who and (who[2] != _HOST or pid_exists(who[0])):  # another host's PID cannot be checked here
            break
        who = None
        time.sleep(0.025)
    if who is None:
        return (f"{what} in {db_path}: the database is being written by another process (lock {path}); "
                f"wait for it to finish, or stop it")
    pid, theirs, host = who
    if host != _HOST:
        pid = f"{pid} on host {host}"
    if theirs == what:
        return f"{what} in {db_path} is being run by PID {pid}; wait for it to finish, or stop it, then try again"
    return (f"{what} in {db_path}: the database is being written by PID {pid} ({theirs or 'nearmetal'}); "
            f"wait for it to finish, or stop it, then try again")
