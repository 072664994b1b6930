"""The results store on a cluster file system (NFS, Lustre, GPFS, BeeGFS, CephFS, ...).

SQLite's WAL mode keeps its index in a memory-mapped `-shm` file, which is not shared
between hosts on a network file system, and SQLite's own byte-range locks are unreliable
there. A study submitted as batch jobs (study/execute/submit.py) writes its store from whichever
node its job runs on, while the user reads it from a login node. So on such a file system
the writer works on a runner-local copy (in $TMPDIR, else /tmp) in WAL mode, and after
every committed transaction (each finished run is one) the copy is written back whole:
SQLite's backup API into a temporary file beside the database, journal mode DELETE,
fsync, then renamed over the database. The rename is atomic on these file systems, so a
reader on any host opens either the previous or the next complete database, never a torn
one; a job killed at any moment loses at most the transaction it was writing back, which
is then not finished and runs again.

Which file systems count: the types in NETWORK_FS, read from /proc/self/mountinfo for the
database's directory. NEARMETAL_STORE_MODE=copy or =direct overrides the detection (e.g.
copy for a file system this list does not know; the test suite uses copy on a local disk).
"""

import os
import shutil
import sqlite3
import tempfile
from urllib.parse import quote

from ...errors import NearmetalError

NETWORK_FS = frozenset({"nfs", "nfs4", "lustre", "gpfs", "beegfs", "cifs", "smb3", "smbfs", "ceph", "fuse.ceph",
                        "glusterfs", "fuse.glusterfs", "panfs", "wekafs", "afs", "9p", "pvfs2", "orangefs",
                        "fuse.sshfs", "davfs", "fuse.juicefs", "virtiofs"})
MODES = ("auto", "direct", "copy")


def _unescape(field):
    """mountinfo escapes blanks, tabs, newlines and backslashes as octal (\\040)."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def fs_type(path, mountinfo=None):
    """The type of the file system holding `path`, from
    /proc/self/mountinfo (or the given text); "" when unknown."""
    if mountinfo is None:
        try:
            with open("/proc/self/mountinfo") as f:
                mountinfo = f.read()
        except OSError:
            return ""
    where = os.path.realpath(path)  # symbolic links of the part that exists resolved
    best, kind = -1, ""
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        fields = left.split()
        if not sep or len(fields) < 5 or not right.split():
            continue
        point = _unescape(fields[4])
        inside = where == point or where.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= best:  # the last mount of the longest prefix covers it
            best, kind = len(point), right.split()[0]
    return kind


def copy_mode(path, environ=None, mountinfo=None):
    """Whether a writer of the database at `path` works on a runner-local copy."""
    mode = (environ if environ is not None else os.environ).get("NEARMETAL_STORE_MODE", "auto") or "auto"
    if mode not in MODES:
        raise NearmetalError(f"NEARMETAL_STORE_MODE={mode!r:.40}: expected one of {', '.join(MODES)}")
    if mode != "auto":
        return mode == "copy"
    return fs_type(os.path.dirname(os.path.abspath(path)) or ".", mountinfo) in NETWORK_FS


def local_copy(path):
    """A runner-local copy of the database at `path` (none yet: a path for a new one)."""
    work = tempfile.mkdtemp(prefix="nearmetal-store-", dir=os.environ.get("TMPDIR") or None)
    copy = os.path.join(work, "study.db")
    if os.path.exists(path):
        try:
            src = sqlite3.connect(f"file:{quote(os.path.abspath(path))}?mode=ro", uri=True)
            dst = sqlite3.connect(copy)
            with dst:
                src.backup(dst)
            src.close()
            dst.close()
        except sqlite3.Error as e:
            shutil.rmtree(work, ignore_errors=True)
            raise NearmetalError(f"cannot copy results database {path} to {copy}: {e}") from None
    return copy


def write_back(db, path):
    """The whole database of connection `db`, atomically over `path`."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".nearmetal-sync-", suffix=".db", dir=folder)
    os.close(fd)
    try:
        dst = sqlite3.connect(tmp)
        db.backup(dst)
        dst.execute("PRAGMA journal_mode=DELETE")
        dst.close()
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
        dirfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dirfd)
        finally:
            os.close(dirfd)
    except (OSError, sqlite3.Error) as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise NearmetalError(f"cannot write results database {path} back from its runner-local copy: "
                             f"{getattr(e, 'strerror', None) or e}") from None


def drop_copy(copy):
    shutil.rmtree(os.path.dirname(copy), ignore_errors=True)
