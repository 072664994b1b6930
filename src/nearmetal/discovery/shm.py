"""The node's /dev/shm as MPI jobs see it: its size and free space, and the shared-memory
segments that MPI jobs stopped before MPI_Finalize left there.

Every MPI keeps its intra-node segments in /dev/shm (Open MPI's vader: about 4 MiB a rank).
When it is small or full, jobs fail with a bus error or fall back to a slower path; a stale
segment holds node memory until removed, and can clash with a new job's (Open MPI #7308).
SEGMENT_PREFIXES are the names nm-supervise's keeper removes after a job of nearmetal's that
did not end cleanly (supervise/nm-supervise-shm.c): the same list, kept in step by a test.
"""

import os
import stat

SHM = "/dev/shm"
SEGMENT_PREFIXES = ("vader_segment.", "sm_segment.", "ucx_shm_posix_", "mpich_shar_tmp", "open_mpi.")
# ch-run --join's files: unused by design while a job's peers join (each unmaps them before the
# last arrives), so only the minimum age tells an old one from a live job's; the keeper,
# which has no age to go by, leaves them to the Charliecloud runtime and to doctor
JOIN_PREFIXES = ("ch-run_shm-", "sem.ch-run_sem-")
NAMES = SEGMENT_PREFIXES + JOIN_PREFIXES
SEGMENT_BYTES_PER_RANK = 4 * 2**20  # Open MPI's vader segment, the largest of the defaults
MIN_AGE_S = 60  # a segment younger than this may belong to a job still starting: never called stale


def _pid_namespace_nested():
    """In a child PID namespace /proc lists only part of the node's processes."""
    try:
        with open("/proc/self/status") as f:
            line = next((l for l in f if l.startswith("NSpid:")), None)
    except OSError:
        return True
    return line is not None and len(line.split()) > 2


def in_use():
    """{(device, inode)} of the segments live processes have open or mapped (each process's
    descriptors first, then its mappings: a segment is opened, mapped and closed, so one in
    neither was not in use); None where /proc is missing or shows only a PID namespace. A
    process whose /proc entries this account cannot read (another account's, a non-dumpable
    agent or init) is taken not to hold one: MPI ranks are readable by their own account."""
    if _pid_namespace_nested():
        return None
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None
    used = set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
            for fd in fds:
                try:
                    # the link's text first: a stat of every open file would wait on a hung NFS mount
                    if not os.path.basename(os.readlink(f"/proc/{pid}/fd/{fd}")).startswith(NAMES):
                        continue
                    st = os.stat(f"/proc/{pid}/fd/{fd}")  # followed: the open file itself, not its path
                except OSError:
                    continue
                used.add((st.st_dev, st.st_ino))
            with open(f"/proc/{pid}/maps", errors="replace") as f:
                for line in f:
                    fields = line.split(maxsplit=5)
                    if len(fields) >= 5 and fields[4] != "0":
                        major, minor = (int(x, 16) for x in fields[3].split(":"))
                        used.add((os.makedev(major, minor), int(fields[4])))
        except (OSError, ValueError):  # gone meanwhile, or not readable by this account
            continue
    return used


def _identity(st):
    """A file as found: device and inode first (what in_use compares), then its size and times,
    which a new job's truncation or write changes (its size too, where the kernel's times are
    coarser than the two steps)."""
    return st.st_dev, st.st_ino, st.st_size, st.st_ctime_ns, st.st_mtime_ns


def stale_segments(directory=SHM, uid=None, now=None):
    """[(name, bytes)] of this account's MPI segments in `directory` that no process uses
    and that are older than MIN_AGE_S; [] when use cannot be known (in_use)."""
    return [(name, size) for name, size, _ in _stale(directory, uid, now)]


def _stale(directory, uid, now):
    """stale_segments with each file's _identity, checked again before removal."""
    import time

    uid = os.getuid() if uid is None else uid
    now = time.time() if now is None else now
    try:
        names = [n for n in os.listdir(directory) if n.startswith(NAMES)]
    except OSError:
        return []
    found = []
    for name in names:
        try:
            st = os.lstat(os.path.join(directory, name))
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_uid == uid and now - st.st_ctime >= MIN_AGE_S:
            found.append((name, st.st_size, _identity(st)))
    used = in_use() if found else set()
    if used is None:
        return []
    return [(n, size, ident) for n, size, ident in found if ident[:2] not in used]


def describe(directory=SHM):
    """{path, total_bytes, free_bytes, stale_segments, stale_bytes}; None where there is no
    such directory."""
    try:
        fs = os.statvfs(directory)
    except OSError:
        return None
    stale = stale_segments(directory)
    return {"path": str(directory), "total_bytes": fs.f_blocks * fs.f_frsize, "free_bytes": fs.f_bavail * fs.f_frsize,
            "stale_segments": len(stale), "stale_bytes": sum(size for _, size in stale)}


def remove_stale(directory=SHM, now=None):
    """Remove this account's stale segments (stale_segments): (count, bytes) removed."""
    removed, freed = 0, 0
    for name, size, ident in _stale(directory, None, now):
        path = os.path.join(directory, name)
        try:
            st = os.lstat(path)
            if _identity(st) != ident:  # made again, truncated or written since: a new job's
                continue
            os.unlink(path)
        except OSError:
            continue
        removed, freed = removed + 1, freed + size
    return removed, freed
