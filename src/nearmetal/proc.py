"""Processes as /proc shows them: find them by PID, environment, session and parentage, and
stop them by PID without ever signalling a recycled one.

A Proc records the process's start time (clock ticks after boot): a PID that now belongs to
another process has another start time, so `alive` and `send` act only on the one seen.
Zombies and dead processes (states Z, X) count as gone: they hold nothing, and on some
hosts PID 1 reaps orphans only every few seconds.
"""

import os
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Proc:
    pid: int
    comm: str
    state: str
    ppid: int
    pgrp: int
    sid: int
    start: int
    environ: frozenset  # b"KEY=VALUE" entries (empty when not readable or not asked for)

    def has_env(self, entry):
        """Whether the environment holds exactly `entry` ("KEY=VALUE")."""
        return entry.encode() in self.environ

    def has_env_key(self, key):
        return any(e.startswith(f"{key}=".encode()) for e in self.environ)


def read(pid, environ=True):
    """The live (not zombie) process `pid`, or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except (OSError, ValueError):
        return None
    try:
        # comm may hold blanks and parentheses: it ends at the last ')'
        lp, rp = data.index(b"("), data.rindex(b")")
        fields = data[rp + 2:].split()
        state = fields[0].decode()
        if state in ("Z", "X", "x"):
            return None
        env = frozenset()
        if environ:
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    env = frozenset(f.read().split(b"\0"))
            except OSError:
                pass
        return Proc(pid, data[lp + 1:rp].decode(errors="replace"), state, int(fields[1]), int(fields[2]),
                    int(fields[3]), int(fields[19]), env)
    except (ValueError, IndexError):
        return None


def all_processes(environ=True):
    """{pid: Proc} of every live process."""
    procs = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            p = read(int(name), environ)
            if p:
                procs[p.pid] = p
    return procs


def lineage(procs, pid=None):
    """PIDs of `pid` (default: this process), its ancestors and PID 1: never ours to stop."""
    keep, pid = {1}, os.getpid() if pid is None else pid
    while pid and pid not in keep:
        keep.add(pid)
        p = procs.get(pid) or read(pid, environ=False)
        pid = p.ppid if p else 0
    return keep


def with_descendants(procs, pids):
    """`pids` and every process below them in `procs` (children, grandchildren, ...)."""
    children = {}
    for pid, p in procs.items():
        children.setdefault(p.ppid, []).append(pid)
    out, todo = set(pids), list(pids)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def pid_exists(pid):
    """Whether any process has this PID (one we may not signal counts: it exists)."""
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def alive(p):
    """Whether the process `p` still runs (the same PID with the same start time)."""
    q = read(p.pid, environ=False)
    return q is not None and q.start == p.start


def send(p, sig):
    """Signal `p` if it still runs (never a recycled PID); gone or not ours: nothing."""
    if alive(p):
        try:
            os.kill(p.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def wait_gone(ps, timeout, ignoring=()):
    """Wait until every process in `ps` is gone, or only ones whose comm is in `ignoring`
    remain; returns those still running."""
    end = time.monotonic() + timeout
    left = [p for p in ps if alive(p)]
    while any(p.comm not in ignoring for p in left) and time.monotonic() < end:
        time.sleep(0.02)
        left = [p for p in left if alive(p)]
    return left


def tree_state(root, most=32):
    """What each live process of `root`'s tree (root included) is doing, read from /proc, in
    PID order: [{pid, comm, state, wchan, cpu_s}] (at most `most`). wchan: the kernel
    function a sleeping process waits in ("" when running or not shown); cpu_s: user +
    system seconds. Read before a hung job is ended, so its record says which rank waited
    and which spun."""
    procs = all_processes(environ=False)
    tick = os.sysconf("SC_CLK_TCK")
    out = []
    for pid in sorted(with_descendants(procs, {root}) & set(procs))[:most]:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                data = f.read()
            fields = data[data.rindex(b")") + 2:].split()
            cpu = (int(fields[11]) + int(fields[12])) / tick  # utime and stime: stat's fields 14 and 15
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        try:
            with open(f"/proc/{pid}/wchan") as f:
                wchan = f.read().strip()
        except OSError:
            wchan = ""
        out.append({"pid": pid, "comm": procs[pid].comm, "state": fields[0].decode(errors="replace"),
                    "wchan": "" if wchan == "0" else wchan, "cpu_s": round(cpu, 2)})
    return out
