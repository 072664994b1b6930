"""No process outlives nearmetal (issue 10): SIGKILL or SIGTERM of `study` or `run` while real
MPI ranks run ends the whole job within a second or two, natively for both MPIs and in a
container; a killed study resumes with every planned run stored exactly once; time-outs
store their reason.

The job's processes are found by the process tree, not by names: the nearmetal under test
runs below a small child subreaper (SUBREAPER below), so whatever it leaves behind,
daemonized or orphaned, stays a descendant of that reaper, where we look.
"""

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from conftest import NEARMETAL

# A child subreaper that starts argv, prints its PID, and reaps until stdin closes.
SUBREAPER = r"""
import ctypes, os, subprocess, sys, threading
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
p = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(p.pid, flush=True)
def reap():
    while True:
        try:
            pid, status = os.wait()
            if pid == p.pid:  # the target's exit status, for Reaped.status()
                print(os.waitstatus_to_exitcode(status), flush=True)
        except ChildProcessError:
            threading.Event().wait(0.05)
threading.Thread(target=reap, daemon=True).start()
sys.stdin.read()
"""


def _table():
    """{pid: (ppid, state, cmdline)} of every process."""
    procs = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        procs[int(name)] = (int(fields[1]), fields[0], cmd)
    return procs


def descendants(root):
    """Live (not zombie) processes below `root`: {pid: cmdline}."""
    procs = _table()
    found, grew = set(), True
    while grew:
        grew = False
        for pid, (ppid, state, _) in procs.items():
            if pid not in found and (ppid == root or ppid in found):
                found.add(pid)
                grew = True
    return {p: procs[p][2] for p in found if procs[p][1] not in "ZX"}


class Reaped:
    """`argv` started below a subreaper; .target is argv's PID, .alive() what is left below."""

    def __init__(self, argv, env=None):
        self.reaper = subprocess.Popen([sys.executable, "-c", SUBREAPER, *map(str, argv)], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, text=True, env=env)
        self.target = int(self.reaper.stdout.readline())

    def alive(self):
        return descendants(self.reaper.pid)

    def status(self):
        """The target's exit status once it has ended (-N: killed by signal N)."""
        return int(self.reaper.stdout.readline())

    def wait_for(self, predicate, timeout, what):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            left = self.alive()
            if predicate(left):
                return left
            time.sleep(0.05)
        raise AssertionError(f"{what} within {timeout} s; processes: {self.alive()}")

    def close(self):
        for pid in self.alive():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.reaper.stdin.close()
        self.reaper.kill()
        self.reaper.wait()


def ranks_of(procs, program):
    return [p for p, cmd in procs.items() if program in cmd and "nm-supervise" not in cmd
            and "mpirun" not in cmd and "mpiexec" not in cmd and "ch-run" not in cmd]


# One ping-pong of 8 bytes, repeated for minutes: a job that is still running when the test
# looks 3 s after the kill, unless nearmetal ended it (and, on resume, runs into the time-out).
LONG_LATENCY = ["-m", "8:8", "-i", "200000000"]
SHORT_LATENCY = ["-m", "8:8", "-i", "1000"]


def study_file(tmp_path, mpi, mode, timeout=15):
    """Two benchmarks: `long` (killed mid-run; on resume it runs into the study's time-out)
    and `short` (completes)."""
    f = tmp_path / "long.toml"
    f.write_text(f"""
[study]
name = "long"
repetitions = 1
warmup = 0
seed = 1
timeout = {timeout}
[baseline]
mode = "{mode}"
[matrix]
mode = ["{mode}"]
mpi = ["{mpi}"]
[[benchmark]]
name = "long"
kernel = "latency"
args = {LONG_LATENCY!r}
[[benchmark]]
name = "short"
kernel = "latency"
args = {SHORT_LATENCY!r}
""".replace("'", '"'))
    return f


def stored(db):
    """{benchmark: (status, records, stored stderr)}; asserts no run key twice."""
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT run_key, benchmark, status, stderr_tail, "
                         "(SELECT COUNT(*) FROM records WHERE run_id = runs.id) FROM runs").fetchall()
    assert len({r[0] for r in rows}) == len(rows)
    return {bench: (status, n, tail) for _, bench, status, tail, n in rows}


def long_running(procs):
    return len(ranks_of({p: c for p, c in procs.items() if LONG_LATENCY[-1] in c}, "nm-latency")) >= 2


@pytest.mark.parametrize("mpi,mode,how", [("openmpi", "native", signal.SIGKILL), ("mpich", "native", signal.SIGKILL),
                                          ("mpich", "hybrid", signal.SIGKILL), ("openmpi", "hybrid", signal.SIGTERM)])
def test_killed_study_leaves_no_process_and_resumes_exactly(tmp_path, host_mpis, default_image, mpi, mode, how):
    f, db = study_file(tmp_path, mpi, mode), tmp_path / "study.db"
    job = Reaped([NEARMETAL, "study", f, "--db", db, "--no-progress"])
    try:
        running = job.wait_for(long_running, 60, "the long run's two ranks running")
        assert job.target in running
        os.kill(job.target, how)
        t0 = time.monotonic()
        job.wait_for(lambda procs: not procs, 3, f"nothing left after {signal.Signals(how).name}")
        print(f"{mpi} {mode} {signal.Signals(how).name}: job gone after {time.monotonic() - t0:.2f} s")
    finally:
        job.close()
    assert stored(db)["long"][0] == "planned"  # the run in flight is run again

    out = subprocess.run([NEARMETAL, "study", f, "--db", db, "--resume", "--no-progress"], capture_output=True,
                         text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    runs = stored(db)
    assert runs["short"][:2] == ("ok", 1), runs
    status, n, tail = runs["long"]
    assert (status, n) == ("timeout", 0), runs
    assert tail.startswith("nearmetal: timed out after 15 s; the job's process tree was ended"), tail


def test_sigterm_of_a_study_is_an_interrupt(tmp_path, host_mpis):
    f, db = study_file(tmp_path, "openmpi", "native"), tmp_path / "study.db"
    proc = subprocess.Popen([NEARMETAL, "study", f, "--db", db, "--no-progress"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not long_running(descendants(proc.pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM, err
    # one line to paste, at any width (a pipe's 80 columns once split it after `nearmetal study`)
    [said] = [line for line in err.splitlines() if "resume with:" in line]
    assert re.search(r"^terminated: [01] of 2 runs finished and stored; resume with: nearmetal study \S+ --resume "
                     r"--db \S+$", said), err
    assert "Traceback" not in err


def test_an_interrupt_while_nearmetal_is_imported_is_one_line():
    """A ^C while Python still imports nearmetal reaches the entry script, before main()'s
    handler: one line and 130, not a KeyboardInterrupt traceback. The installed script runs with
    its import of nearmetal.cli interrupted (the seam: a real ^C lands there only by chance)."""
    seam = ("import sys\n"
            "class Interrupt:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'nearmetal.cli':\n"
            "            raise KeyboardInterrupt\n"
            "sys.meta_path.insert(0, Interrupt())\n")
    out = subprocess.run([sys.executable, "-c", seam + NEARMETAL.read_text()], capture_output=True, text=True,
                         timeout=30)
    assert (out.returncode, out.stderr) == (130, "nearmetal: interrupted\n"), out


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_killed_run_takes_its_job_along(host_mpis, mpi):
    """`run` execs into nm-supervise: the PID a user or a batch system kills is the job's."""
    job = Reaped([NEARMETAL, "run", "--mpi", mpi, "-n", "2", "--", "nm-latency", *LONG_LATENCY])
    try:
        job.wait_for(lambda procs: len(ranks_of(procs, "nm-latency")) >= 2, 60, "two ranks running")
        with open(f"/proc/{job.target}/cmdline", "rb") as f:
            assert b"nm-supervise" in f.read()  # same PID, now the supervisor
        os.kill(job.target, signal.SIGKILL)
        job.wait_for(lambda procs: not procs, 3, "nothing left after SIGKILL")
    finally:
        job.close()


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_a_run_stopped_by_sigterm_says_so_in_its_exit_status(host_mpis, mpi):
    """A batch script that stops `run` sees 143 (killed by SIGTERM), not the launcher's own code:
    MPICH's hydra exits 0 when told to stop, which would read as success."""
    job = Reaped([NEARMETAL, "run", "--mpi", mpi, "-n", "2", "--", "nm-latency", *LONG_LATENCY])
    try:
        job.wait_for(lambda procs: len(ranks_of(procs, "nm-latency")) >= 2, 60, "two ranks running")
        os.kill(job.target, signal.SIGTERM)
        job.wait_for(lambda procs: not procs, 10, "nothing left after SIGTERM")
        status = job.status()
    finally:
        job.close()
    assert status == -signal.SIGTERM, status  # the shell shows it as 143


def test_supervisor_passes_exit_status_and_signals(tmp_path):
    from nearmetal import supervise

    sup = supervise.binary()
    assert subprocess.run([sup, "--", "sh", "-c", "exit 7"]).returncode == 7
    assert subprocess.run([sup, "--", "sh", "-c", "kill -KILL $$"]).returncode == -signal.SIGKILL
    # stopped on request: killed by the signal forwarded, though the job itself exits 0 on it
    job = subprocess.Popen([sup, "--", "sh", "-c", "trap 'exit 0' TERM; while :; do sleep 0.05; done"])
    time.sleep(0.5)
    job.send_signal(signal.SIGTERM)
    assert job.wait(timeout=10) == -signal.SIGTERM
    # ... but a job that had ended by itself keeps its own status, though a signal came while
    # its leftovers lingered
    job = subprocess.Popen([sup, "--linger-ms", "3000", "--", "sh", "-c", "sleep 30 & exit 3"])
    time.sleep(0.5)
    job.send_signal(signal.SIGTERM)
    assert job.wait(timeout=10) == 3
    missing = subprocess.run([sup, "--", str(tmp_path / "nope")], capture_output=True, text=True)
    assert missing.returncode == 127 and "cannot start" in missing.stderr
    assert subprocess.run([sup, "--grace-ms", "x", "--", "true"], capture_output=True).returncode == 125
    # A daemonized leftover (its own session, its parent gone) is ended once the job is over.
    t0 = time.monotonic()
    marker = tmp_path / "survived"
    subprocess.run([sup, "--linger-ms", "200", "--", "sh", "-c", f"setsid sh -c 'sleep 3; touch {marker}' &"],
                   timeout=10)
    assert time.monotonic() - t0 < 2.5
    time.sleep(3.5)
    assert not marker.exists()


SHM = "/dev/shm"


def _identity(path):
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None  # gone meanwhile: not an orphan
    return st.st_dev, st.st_ino


def _segments():
    from nearmetal.discovery.shm import SEGMENT_PREFIXES

    return {n for n in os.listdir(SHM) if n.startswith(SEGMENT_PREFIXES)}


def test_a_job_that_fails_leaves_no_unused_segment_of_its_own_in_dev_shm(tmp_path):
    """Segments (by the MPI libraries' names) that a failed job created and nothing uses are
    removed; one that another process holds (made after the job started, so only its use
    keeps it), one from before the job, another name and another account's file are kept;
    a job that exits 0 is not looked at."""
    from nearmetal import supervise

    sup = supervise.binary()  # built first: a build must not fall between the files and the job
    tag = f"nmtest{os.getpid()}"
    old, held, left, other = (f"vader_segment.{tag}.{k}" for k in ("old", "held", "left", "x"))
    mine = f"{tag}-not-a-segment"
    paths = {n: os.path.join(SHM, n) for n in (old, held, left, other, mine)}
    for name in (old, other):
        open(paths[name], "w").close()
    time.sleep(0.05)  # file times are coarse (a few ms): the job starts after these were made
    holder = None
    try:
        create = (f"touch {paths[left]} {paths[mine]} && chown 65534 {paths[other]}; "
                  f"while [ ! -e {paths[held]} ]; do sleep 0.01; done; exit 3")
        job = subprocess.Popen([sup, "--", "sh", "-c", create])
        deadline = time.monotonic() + 30
        while not os.path.exists(paths[left]) and time.monotonic() < deadline:
            time.sleep(0.01)
        # another job's live segment, made while this one runs: open by a process outside the job
        holder = subprocess.Popen([sys.executable, "-c", "import sys; f = open(sys.argv[1], 'w'); sys.stdin.read()",
                                   paths[held]], stdin=subprocess.PIPE)
        assert job.wait(timeout=30) == 3
        assert sorted(n for n in os.listdir(SHM) if tag in n) == sorted([old, held, other, mine])
        # the same after a job that exits 0: nothing is removed
        subprocess.run([sup, "--", "sh", "-c", f"touch {paths[left]}"], check=True, timeout=30)
        assert os.path.exists(paths[left])
    finally:
        if holder:
            holder.stdin.close()
            holder.wait()
        for p in paths.values():
            if os.path.exists(p):
                os.unlink(p)


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_a_stopped_run_leaves_no_unused_shared_memory_segment(host_mpis, how):
    """Open MPI's ranks stopped before MPI_Finalize left their vader segments (4 MiB a rank) in
    /dev/shm for good (Open MPI issue #7394), ^C or SIGKILL of nearmetal alike: the keeper
    removes what nothing uses any more. (MPICH unlinks its segments once every rank has
    attached them: it leaves none to remove.)"""
    before = _segments()
    job = Reaped([NEARMETAL, "run", "--mpi", "openmpi", "-n", "2", "--", "nm-latency", *LONG_LATENCY])
    try:
        job.wait_for(lambda procs: len(ranks_of(procs, "nm-latency")) >= 2, 60, "two ranks running")
        deadline = time.monotonic() + 30  # past MPI_Init: a segment a rank (else the test tests nothing)
        while len([n for n in _segments() - before if n.startswith(("vader_segment.", "sm_segment."))]) < 2:
            assert time.monotonic() < deadline, "the ranks made no vader (Open MPI 4) or sm (5) segments in /dev/shm"
            time.sleep(0.05)
        os.kill(job.target, how)
        job.wait_for(lambda procs: not procs, 10, "nothing left")
    finally:
        job.close()
    from nearmetal.discovery.shm import in_use

    used = in_use()
    orphans = [n for n in _segments() - before if (i := _identity(os.path.join(SHM, n))) and i not in used]
    assert not orphans, orphans
