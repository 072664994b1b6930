"""nearmetal.proc, the generic process walker: real child processes found by PID,
environment, session and parentage, and stopped by PID only while they are the process
that was seen (same start time)."""

import os
import signal
import subprocess
import time
from dataclasses import replace

import pytest

from nearmetal import proc


@pytest.fixture
def children():
    """Popen objects started by a test; killed (by their own PID) and reaped afterwards."""
    started = []
    yield started
    for c in started:
        if c.poll() is None:
            os.killpg(c.pid, signal.SIGKILL)  # each child leads its own session
        c.wait()


def start(children, argv, **env):
    c = subprocess.Popen(argv, env=dict(os.environ, **env), start_new_session=True, stdin=subprocess.DEVNULL)
    children.append(c)
    return c


def wait_for(condition, timeout=5.0):
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "condition not met in time"
        time.sleep(0.01)


def test_read_this_process():
    me = proc.read(os.getpid())
    assert me.pid == os.getpid() and me.ppid == os.getppid() and me.sid == os.getsid(0)
    assert me.pgrp == os.getpgrp() and me.state in "RS"
    assert me.has_env(f"PATH={os.environ['PATH']}") and me.has_env_key("PATH") and not me.has_env_key("NO_SUCH_NM_VAR")
    assert proc.read(os.getpid(), environ=False).environ == frozenset()
    assert proc.read(2 ** 22 + 1) is None  # beyond pid_max


def test_find_by_environment_session_and_parentage(children):
    marker = f"NM_PROC_TEST={os.getpid()}"
    shell = start(children, ["sh", "-c", "sleep 30 & sleep 31 & wait"], NM_PROC_TEST=str(os.getpid()))
    # three in the session, and both children past their exec (a forked child is 'sh' for a moment)
    wait_for(lambda: sorted(p.comm for p in proc.all_processes().values() if p.sid == shell.pid)
             == ["sh", "sleep", "sleep"])
    procs = proc.all_processes()
    marked = {pid for pid, p in procs.items() if p.has_env(marker)}
    assert marked == {p.pid for p in procs.values() if p.sid == shell.pid}  # the shell and both sleeps
    sleeps = {pid for pid, p in procs.items() if p.ppid == shell.pid}
    assert {procs[pid].comm for pid in sleeps} == {"sleep"} and len(sleeps) == 2
    assert proc.with_descendants(procs, {shell.pid}) == {shell.pid} | sleeps
    assert proc.with_descendants(procs, set()) == set()
    mine = proc.lineage(procs)
    assert {os.getpid(), os.getppid(), 1} <= mine and shell.pid not in mine
    assert proc.lineage(procs, shell.pid) >= {shell.pid, os.getpid(), 1}


def test_send_and_wait_gone_only_for_the_process_seen(children):
    child = start(children, ["sleep", "30"])
    wait_for(lambda: (p := proc.read(child.pid)) is not None and p.comm == "sleep")
    seen = proc.read(child.pid)
    recycled = replace(seen, start=seen.start - 1)  # the same PID, another process's start time
    assert proc.alive(seen) and not proc.alive(recycled)
    proc.send(recycled, signal.SIGKILL)
    assert proc.wait_gone([seen], 0.2) == [seen]  # still running: nothing was sent
    assert proc.wait_gone([seen], 0, ignoring=("sleep",)) == [seen]  # only ignored ones left: no wait
    proc.send(seen, signal.SIGTERM)
    assert proc.wait_gone([seen], 5.0) == []  # ended, not reaped by us yet: a zombie counts as gone
    with open(f"/proc/{child.pid}/stat") as f:
        assert f.read().rsplit(")", 1)[1].split()[0] == "Z"
    assert proc.read(child.pid) is None and not proc.alive(seen)
    assert child.wait() == -signal.SIGTERM
