"""Every program's whole tree ends with its run (issue 26): a daemon the program leaves
(setsid, a double fork, a plain background child) neither keeps `run`, `bench` or a study
waiting nor survives it, natively for both MPI families and in containers; a SIGKILL of
nearmetal's whole process group ends it too; a SIGKILLed image build leaves nothing mounted.

Each test's leftovers are found two ways: below a test-owned subreaper (test_lifetime's
Reaped: whatever escapes nm-supervise is re-parented there) and by a unique argument
(`sleep 31NNN`) anywhere on the machine.
"""

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from conftest import NEARMETAL
from test_lifetime import Reaped

_counter = [31170 + os.getpid() % 500 * 20]


def unique_seconds():
    """A sleep length no other process on the machine uses: how a daemon is found."""
    _counter[0] += 1
    return str(_counter[0])


def holding(arg):
    """PIDs of live processes (anywhere) whose command line is `sleep ARG`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
            with open(f"/proc/{name}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if cmd[:2] == [b"sleep", arg.encode()] and state not in "ZX":
            found.append(int(name))
    return found


def assert_gone(arg, job=None, within=3.0):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not holding(arg) and (job is None or not job.alive()):
            return
        time.sleep(0.05)
    raise AssertionError(f"left behind after {within} s: sleep {arg} {holding(arg)}; "
                         f"below the reaper: {job.alive() if job else '-'}")


def daemon_program(style, seconds):
    """/bin/sh -c that leaves `sleep SECONDS` behind as `style` and prints x."""
    leave = {"setsid": f"setsid sleep {seconds} &",
             "double-fork": f"(sleep {seconds} &) ;",
             "background": f"sleep {seconds} &"}[style]
    return ["/bin/sh", "-c", f"{leave} echo x"]


def variant_args(mpi, mode, runtime):
    return ["--mpi", mpi] + ([] if mode == "native" else ["--mode", mode, "--runtime", runtime])


def timed(argv, timeout=120):
    """(CompletedProcess, seconds) of argv run below a subreaper, and what it left there."""
    t0 = time.monotonic()
    out = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout,
                         stdin=subprocess.DEVNULL)
    return out, time.monotonic() - t0


VARIANTS = [("openmpi", "native", None), ("mpich", "native", None), ("openmpi", "hybrid", "charliecloud"),
            ("mpich", "hybrid", "apptainer"), ("mpich", "hybrid", "podman"), ("openmpi", "hybrid", "bwrap")]


@pytest.mark.parametrize("mpi,mode,runtime", VARIANTS)
def test_daemon_neither_holds_nor_outlives_run(host_mpis, default_image, mpi, mode, runtime):
    """`run -- sh -c 'setsid sleep N & echo x'` returns once its ranks are done, within 3 s
    natively (a container's start-up on top in a container mode), and leaves nothing."""
    # In a container, the ranks first stay 0.5 s: ch-run's peers join the first rank's
    # namespaces by its PID, which a rank that ends at once takes away (with or without daemons).
    wait = "" if mode == "native" else "sleep 0.5; "
    plain, plain_s = timed([NEARMETAL, "run", *variant_args(mpi, mode, runtime), "--", "/bin/sh", "-c",
                            f"{wait}echo x"])
    assert plain.returncode == 0, plain.stderr
    seconds = unique_seconds()
    program = daemon_program("setsid", seconds)
    program[-1] = program[-1].replace("echo x", f"{wait}echo x")
    out, took = timed([NEARMETAL, "run", *variant_args(mpi, mode, runtime), "--", *program])
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["x", "x"], out.stdout
    bound = 3.0 if mode == "native" else 3.0 + plain_s
    assert took < bound, f"returned after {took:.2f} s (the same run without a daemon: {plain_s:.2f} s)"
    assert_gone(seconds, within=1.0)
    print(f"{mpi} {mode} {runtime}: {took:.2f} s with a daemon, {plain_s:.2f} s without")


@pytest.mark.parametrize("style", ["double-fork", "background"])
@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_other_daemon_styles_end_with_the_run(host_mpis, mpi, style):
    seconds = unique_seconds()
    job = Reaped([NEARMETAL, "run", "--mpi", mpi, "--", *daemon_program(style, seconds)])
    try:
        t0 = time.monotonic()
        job.wait_for(lambda procs: job.target not in procs, 3, "run returned")
        assert time.monotonic() - t0 < 3
        assert_gone(seconds, job, within=1.0)
    finally:
        job.close()


def test_ranks_still_running_keep_their_daemon(host_mpis):
    """The rule is 'the ranks are done', not 'a daemon appeared': while one rank still runs,
    the other rank's daemon stays (its output arrives at the end), then both end."""
    seconds = unique_seconds()
    program = ["/bin/sh", "-c", f'setsid sh -c "sleep 2; echo late; sleep {seconds}" & '
                                f'if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then sleep 3; fi; echo x']
    out, took = timed([NEARMETAL, "run", "--mpi", "openmpi", "--", *program])
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("late") == 2, out.stdout  # both daemons lived until rank 0 ended
    assert 3 <= took < 6, took
    assert_gone(seconds, within=1.0)


@pytest.mark.parametrize("mpi,mode,runtime", [("openmpi", "native", None), ("mpich", "native", None),
                                              ("mpich", "hybrid", "charliecloud")])
def test_sigkill_of_the_process_group_ends_daemons(host_mpis, default_image, mpi, mode, runtime):
    """nearmetal started in a process group of its own (setsid), ranks still running plus a
    daemon each; SIGKILL of the whole group: nothing of the job is alive 3 s later."""
    seconds, ranks_s = unique_seconds(), unique_seconds()
    program = ["/bin/sh", "-c", f"setsid sleep {seconds} & sleep {ranks_s}"]
    job = Reaped(["setsid", NEARMETAL, "run", *variant_args(mpi, mode, runtime), "--", *program])
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (len(holding(seconds)) < 2 or len(holding(ranks_s)) < 2):
            time.sleep(0.05)
        assert len(holding(seconds)) == 2 and len(holding(ranks_s)) == 2, job.alive()
        assert os.getpgid(job.target) == job.target  # the group that is killed is nearmetal's own
        os.killpg(job.target, signal.SIGKILL)
        t0 = time.monotonic()
        assert_gone(seconds, job)
        assert_gone(ranks_s, job)
        print(f"{mpi} {mode} {runtime}: gone {time.monotonic() - t0:.2f} s after SIGKILL of the group")
    finally:
        job.close()


def test_bench_command_returns_with_its_ranks(host_mpis):
    seconds = unique_seconds()
    out, took = timed([NEARMETAL, "bench", "--command", "--mpi", "mpich", "--fom", r"x:count:^x(\d)", "--",
                       "/bin/sh", "-c", f"setsid sleep {seconds} & echo x1"])
    assert out.returncode == 0, out.stderr
    assert "x = 1 count" in out.stdout + out.stderr
    assert took < 3 + 2, took  # bench's own start-up on top of run's 3 s
    assert_gone(seconds, within=1.0)


def test_study_stores_a_daemon_leaving_run_ok(host_mpis, tmp_path):
    seconds = unique_seconds()
    study = tmp_path / "daemon.toml"
    study.write_text(f"""
[study]
name = "daemon"
repetitions = 1
warmup = 0
timeout = 30
[baseline]
mode = "native"
[matrix]
mode = ["native"]
mpi = ["openmpi"]
ranks = [2]
[[benchmark]]
name = "leaves-a-daemon"
command = ["/bin/sh", "-c", "setsid sleep {seconds} & echo x1"]
success = "x1"
[[benchmark.fom]]
name = "x"
regex = '^x(\\d)'
unit = "count"
""")
    db = tmp_path / "study.db"
    out, took = timed([NEARMETAL, "study", study, "--db", db, "--no-progress"], timeout=300)
    assert out.returncode == 0, out.stderr
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT status, stderr_tail FROM runs").fetchall()
    assert [r[0] for r in rows] == ["ok"], rows
    assert took < 30, took
    assert_gone(seconds, within=1.0)


# ---- an interrupted image build -------------------------------------------------------

def _tiny_base_system(root: Path, hang_seconds: str):
    """A debootstrap cache of a few files: /bin/sh, sleep and their libraries, and an
    apt-get that waits (as one fetching from a mirror that does not answer)."""
    libs = set()
    for tool in ("/bin/sh", "/bin/sleep"):
        ldd = subprocess.run(["ldd", tool], capture_output=True, text=True, check=True).stdout
        libs.update(part for line in ldd.splitlines() for part in line.split() if part.startswith("/"))
    for path in ["/bin/sh", "/bin/sleep", *libs]:
        real = os.path.realpath(path)
        for where in {path, real}:
            dest = root / where.lstrip("/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            if not dest.exists():
                dest.write_bytes(Path(real).read_bytes())
                dest.chmod(0o755)
    apt = root / "usr/bin/apt-get"
    apt.parent.mkdir(parents=True, exist_ok=True)
    apt.write_text(f"#!/bin/sh\nexec sleep {hang_seconds}\n")
    apt.chmod(0o755)
    (root / "usr/sbin").mkdir(parents=True, exist_ok=True)
    (root / "etc").mkdir(exist_ok=True)
    (root / ".nearmetal-debootstrap.json").write_text('{"distro": "bookworm"}\n')


def _mounts_under(prefix: str, mountinfo="/proc/self/mountinfo"):
    with open(mountinfo) as f:
        return [line.split()[4] for line in f if line.split()[4].startswith(prefix)]


def test_sigkilled_image_build_leaves_nothing_mounted(tmp_path):
    """The cheapest real build that mounts: `image build` from a cached base system (a tiny
    one, in a test-owned nearmetal home) up to `apt-get update` in the chroot, which waits.
    The chroot's /proc and /dev are there for it (seen in its own mount table) but never in
    the host's; SIGKILL of nearmetal's process group ends it and leaves no mount and no process."""
    home, hang = tmp_path / "home", unique_seconds()
    _tiny_base_system(home / "cache" / "debootstrap" / "bookworm", hang)
    env = dict(os.environ, NEARMETAL_HOME=str(home))
    name = f"nm-lifetime-{os.getpid()}"
    job = Reaped(["setsid", NEARMETAL, "image", "build", "--distro", "bookworm", "--mpi", "mpich", "--name", name],
                 env=env)
    images = str(home / "images")
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not holding(hang):
            time.sleep(0.05)
        assert holding(hang), f"the build never reached apt-get: {job.alive()}; log: " + \
            "".join(p.read_text() for p in (home / "images").glob("*.log"))
        apt = holding(hang)[0]
        assert os.readlink(f"/proc/{apt}/root").startswith(images)  # chrooted into the build tree
        seen = _mounts_under("/", f"/proc/{apt}/mountinfo")  # mount points as seen from its root
        assert "/proc" in seen and "/dev" in seen, seen
        assert _mounts_under(images) == []  # the host never sees them
        os.killpg(job.target, signal.SIGKILL)
        assert_gone(hang, job)
    finally:
        job.close()
    assert _mounts_under(images) == []
    trees = list(Path(images).glob(f".{name}.build-*"))
    assert len(trees) == 1, trees  # killed outright: the next build of the name removes it
    for tree in trees:
        assert list((tree / "rootfs" / "dev").iterdir()) == []  # an empty mount point, not the host's /dev
        subprocess.run(["rm", "-rf", "--one-file-system", str(tree)], check=True)
    assert Path("/dev/null").exists()


def test_chroot_commands_see_proc_and_dev(tmp_path):
    """A chrooted build command gets /proc and /dev (in its own mount namespace), and a
    planted symbolic link at the image's /dev is refused, not followed."""
    from nearmetal.image import chroot

    root, hang = tmp_path / "root", unique_seconds()
    _tiny_base_system(root, hang)
    for point in ("proc", "dev"):
        (root / point).mkdir()
    log = chroot.BuildLog(tmp_path / "log", truncate=True)
    out = chroot.chroot_output(root, ["/bin/sh", "-c", "test -c /dev/null && test -r /proc/self/stat && echo ok"], log)
    assert out == "ok\n", (tmp_path / "log").read_text()
    assert _mounts_under(str(root)) == []
    (root / "dev").rmdir()
    (root / "dev").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "elsewhere").mkdir()
    done = chroot.chroot_capture(root, ["/bin/sh", "-c", "echo ran"])
    assert done.returncode == 127 and "ran" not in done.stdout, done
    assert "proc and dev" in done.stderr, done.stderr
    assert list((tmp_path / "elsewhere").iterdir()) == []
    assert _mounts_under(str(tmp_path)) == []


def test_supervisor_refuses_a_relative_chroot_and_keeps_its_group_apart(tmp_path):
    """--chroot needs an absolute path (bad usage: 125); the keeper is in a process group of
    its own while the job is back in the front's."""
    from nearmetal import supervise

    sup = supervise.binary()
    assert subprocess.run([sup, "--chroot", "rel", "--", "true"], capture_output=True).returncode == 125
    front = subprocess.Popen([sup, "--", "/bin/sh", "-c", "ps -o pgid= -p $PPID; ps -o pgid= -p $$"],
                             stdout=subprocess.PIPE, text=True, start_new_session=True)
    out, _ = front.communicate(timeout=30)
    keeper_group, job_group = (int(x) for x in out.split())
    assert job_group == front.pid  # the front leads its group; the job is in it
    assert keeper_group != front.pid, out


def test_private_mounts_stay_with_the_command(tmp_path):
    """--private-mounts (debootstrap's): what the command mounts is in its table, never in the host's."""
    from nearmetal import supervise

    point = tmp_path / "point"
    point.mkdir()
    out = subprocess.run(supervise.wrap(["/bin/sh", "-c", f"mount -t tmpfs nm-test {point} && cat /proc/self/mountinfo"],
                                        options=["--private-mounts"]), capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert f" {point} " in out.stdout
    assert _mounts_under(str(point)) == []
