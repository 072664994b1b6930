"""run --user NAME for real (privilege.py, docs/privilege.md): the account is created through the
set-up option (scripts/setup.sh --create-user, idempotent), then two real ranks run natively and
in every runtime with both MPI families as that account — their uid is the account's, inside
the container and as the host's /proc sees them, and the files they write in the working
directory are the account's — while nearmetal itself runs as root (CI does). Rootless podman's
pause process does not outlive the job, even when nearmetal is killed with SIGKILL. What cannot
run unprivileged here is refused in one line before anything starts. The unit tier
(test_unit_privilege.py) checks the argv, the view and every message without a machine."""

import os
import pwd
import signal
import stat
import subprocess
import time

import pytest

from conftest import NEARMETAL, REPO, assert_one_line_error, nearmetal
from test_lifetime import LONG_LATENCY, Reaped, ranks_of

from nearmetal.privilege import SUGGESTED as NAME  # noqa: E402  (docs/privilege.md names it)
FAMILIES = ("openmpi", "mpich")


def setup_user(name):
    return subprocess.run(["bash", str(REPO / "scripts" / "setup.sh"), "--create-user", name], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def account():
    """The account, through the documented set-up option, run twice: the second run only checks."""
    assert os.geteuid() == 0, "run --user needs nearmetal to run as root, as CI runs the tests"
    first = setup_user(NAME)
    assert first.returncode == 0, first.stderr
    again = setup_user(NAME)
    assert again.returncode == 0, again.stderr
    assert f"setup: account {NAME} exists" in again.stdout and "has subordinate ids" in again.stdout
    entry = pwd.getpwnam(NAME)
    assert entry.pw_uid != 0 and os.path.isdir(entry.pw_dir)
    for table in ("/etc/subuid", "/etc/subgid"):
        with open(table) as f:
            assert any(line.split(":")[0] in (NAME, str(entry.pw_uid)) for line in f), table
    return entry


@pytest.fixture
def workdir(tmp_path, account):
    """A working directory of the account's own, under pytest's 0700 /tmp/pytest-of-root: the job
    reaches it through its own mount namespace (a tmpfs over what the account cannot search)."""
    work = tmp_path / "work"
    work.mkdir()
    os.chown(work, account.pw_uid, account.pw_gid)
    return work


def as_account(*args, workdir, **kw):
    return nearmetal("run", "--user", NAME, "--workdir", workdir, *args, **kw)


WHO = ["sh", "-c", "echo nm-uid=$(id -u) nm-home=$HOME nm-user=$USER; touch by-$(id -u)-$$; sleep 2"]

CASES = [("native", None, f) for f in FAMILIES] + [
    ("hybrid", rt, f) for rt in ("charliecloud", "bwrap", "apptainer", "podman") for f in FAMILIES]


@pytest.mark.parametrize("mode, runtime, family", CASES)
def test_the_ranks_run_as_the_account(mode, runtime, family, account, workdir, default_image):
    where = ["--mode", mode] + (["--runtime", runtime] if runtime else [])
    out = as_account(*where, "--mpi", family, "-n", "2", "--", *WHO, workdir=workdir)
    assert out.returncode == 0, out.stderr
    said = sorted(line for line in out.stdout.splitlines() if line.startswith("nm-uid="))
    assert said == [f"nm-uid={account.pw_uid} nm-home={account.pw_dir} nm-user={NAME}"] * 2, out.stdout
    written = list(workdir.iterdir())
    assert len(written) == 2 and all(f.stat().st_uid == account.pw_uid for f in written), written
    # and a real MPI kernel, over the MPI's own transports, as the account
    out = as_account(*where, "--mpi", family, "-n", "2", "--", "nm-latency", "-m", "8:8", "-i", "2000",
                     workdir=workdir)
    assert out.returncode == 0, out.stderr
    assert any(line.split()[:1] == ["8"] for line in out.stdout.splitlines()), out.stdout
    assert not account_processes(account), "a process of the account outlived the job"


def account_processes(account, name=None):
    """Live processes of the account (optionally with that command name): {pid: comm}."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        comm, uid, state = fields["Name"].strip(), int(fields["Uid"].split()[0]), fields["State"].split()[0]
        if uid == account.pw_uid and state != "Z" and (name is None or comm == name):
            found[int(pid)] = comm
    return found


def ranks(procs):
    """The nm-latency ranks themselves (not podman's client or conmon, whose arguments name it)."""
    return [p for p in ranks_of(procs, "nm-latency") if "podman" not in procs[p] and "conmon" not in procs[p]]


def host_uid(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(next(line for line in f if line.startswith("Uid:")).split()[1])


@pytest.mark.parametrize("mode, runtime, family", [("native", None, "openmpi"), ("hybrid", "charliecloud", "mpich"),
                                                   ("hybrid", "podman", "openmpi")])
def test_the_host_sees_the_accounts_uid_and_nothing_survives_sigkill(mode, runtime, family, account, workdir,
                                                                      default_image):
    """As /proc sees them, the launcher and the ranks are the account's; nearmetal (root) killed
    with SIGKILL ends them all, rootless podman's pause process included."""
    where = ["--mode", mode] + (["--runtime", runtime] if runtime else [])
    job = Reaped([NEARMETAL, "run", "--user", NAME, "--workdir", workdir, *where, "--mpi", family, "-n", "2", "--",
                  "nm-latency", *LONG_LATENCY])
    try:
        running = job.wait_for(lambda procs: len(ranks(procs)) >= 2, 120, "two ranks running")
        assert {host_uid(pid) for pid in ranks(running)} == {account.pw_uid}, running
        launchers = [p for p, cmd in running.items() if cmd.split()[0].rsplit("/", 1)[-1].startswith(("mpirun", "mpiexec"))]
        assert launchers and {host_uid(pid) for pid in launchers} == {account.pw_uid}, running
        supervisors = [p for p, cmd in running.items() if "/nm-supervise" in cmd.split()[0]]
        assert supervisors and {host_uid(pid) for pid in supervisors} == {0}  # it stays root to end the tree
        if runtime == "podman":
            assert account_processes(account, "podman pause"), "rootless podman runs a pause process"
        os.kill(job.target, signal.SIGKILL)
        job.wait_for(lambda procs: not procs, 10, "nothing left after SIGKILL")
    finally:
        job.close()
    assert not account_processes(account), "a process of the account outlived nearmetal"


@pytest.mark.parametrize("runtime", ["charliecloud", "podman"])
def test_the_schedulers_run_as_the_account_as_bench_and_studies_do(runtime, account, workdir, default_image):
    """RunRequest(user=...) through the local scheduler's run() (a supervised child whose output
    is captured: bench, trace and the study executor), not `run`'s exec."""
    from nearmetal import schedulers
    from nearmetal.run import RunRequest, plan

    req = RunRequest("sh", ["-c", "echo nm-uid=$(id -u); sleep 2"], mode="hybrid", runtime=runtime,
                     workdir=str(workdir), user=NAME)
    p = plan(req)
    assert p.account.uid == account.pw_uid and p.supervise_options[:2] == ["--as", p.account.as_option()]
    outcome = schedulers.get("local").run(p, req, [req], timeout=300)
    assert outcome.status == "ok", outcome.stderr
    assert sorted(line for line in outcome.stdout.splitlines() if line.startswith("nm-uid=")) == [
        f"nm-uid={account.pw_uid}"] * 2
    assert not account_processes(account)


# As the account: a traced write, and in the shared staging directory a link to a file only root
# may read and a FIFO, both named as trace files (what a hostile account could leave there).
HOSTILE_TRACED = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
int main(void)
{
    char path[4096];
    const char *stage = getenv("NM_TRACE_DIR");
    snprintf(path, sizeof path, "%s/trace-link.nmt", stage);
    symlink("/etc/shadow", path);
    snprintf(path, sizeof path, "%s/trace-fifo.nmt", stage);
    mkfifo(path, 0600);
    int f = open("by-account", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    write(f, "traced\n", 7);
    close(f);
    return 0;
}
"""


def test_trace_runs_the_ranks_as_the_account_and_collects_only_their_regular_files(account, workdir, tmp_path):
    """`trace --user` staged into a directory only root could write: the ranks wrote no trace and
    the command said none was written. The account's files are copied, not renamed, and only
    regular ones, opened without following a link."""
    (tmp_path / "hostile.c").write_text(HOSTILE_TRACED)
    subprocess.run(["cc", "-O1", "-o", workdir / "hostile", tmp_path / "hostile.c"], check=True, capture_output=True)
    out_dir = tmp_path / "tr"
    out = nearmetal("trace", "--user", NAME, "--workdir", workdir, "--out", out_dir, "-n", "1", "--",
                    workdir / "hostile", timeout=300)
    assert out.returncode == 0, out.stderr
    assert (workdir / "by-account").stat().st_uid == account.pw_uid
    files = sorted(p.name for p in out_dir.iterdir() if p.suffix == ".nmt")
    assert len(files) == 1 and files[0] not in ("trace-link.nmt", "trace-fifo.nmt"), files
    assert (out_dir / files[0]).lstat().st_uid == 0 and (out_dir / files[0]).is_file()
    from nearmetal.trace import reader

    (proc,) = reader.read(out_dir).processes
    assert [proc.file_of(c) for c in proc.calls("write")] == [str(workdir / "by-account")]
    assert not account_processes(account)


STUDY = """[study]
name = "as-account"
repetitions = 1
warmup = 0
[matrix]
mode = ["native", "hybrid"]
runtime = ["charliecloud"]
mpi = ["mpich"]
user = ["", "nmuser"]
[[benchmark]]
name = "uid"
command = ["sh", "-c", "id -u; sleep 1"]
[[benchmark.fom]]
name = "uid"
regex = '^([0-9]+)$'
[[benchmark]]
kernel = "latency"
args = ["-m", "8:8"]
"""


def test_the_user_dimension_runs_a_studys_ranks_as_the_account(account, tmp_path, default_image):
    """`user = [...]` in a study: the program's ranks say their uid (a figure of merit), the
    kernel's cells run, and each cell's context names the account; the caller's cells stay root.
    (The program outlives `id`: ch-run's joining rank enters the first rank's namespaces, which
    a program that is not MPI may already have left; an MPI program waits in MPI_Init.)"""
    import json
    import sqlite3

    path = tmp_path / "study.toml"
    path.write_text(STUDY)
    out = nearmetal("study", path, "--db", tmp_path / "db" / "study.db", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    with sqlite3.connect(tmp_path / "db" / "study.db") as db:
        rows = db.execute("SELECT r.run_key, r.status, rec.metric, rec.value, c.context_json FROM runs r "
                          "JOIN records rec ON rec.run_id = r.id JOIN contexts c ON c.id = r.context_id").fetchall()
    uids = {key.split("|")[3].split("#")[0]: value for key, status, metric, value, _ in rows if metric == "uid"}
    assert uids == {"native/mpich": 0, "native/mpich+as-nmuser": account.pw_uid,
                    "hybrid/charliecloud/mpich/default": 0,
                    "hybrid/charliecloud/mpich/default+as-nmuser": account.pw_uid}
    users = {key.split("|")[3].split("#")[0]: json.loads(ctx).get("user") for key, *_, ctx in rows
             if key.startswith("latency|")}
    assert users == {"native/mpich": None, "native/mpich+as-nmuser": {"name": NAME, "uid": account.pw_uid},
                     "hybrid/charliecloud/mpich/default": None,
                     "hybrid/charliecloud/mpich/default+as-nmuser": {"name": NAME, "uid": account.pw_uid}}
    assert all(status == "ok" for _, status, *_ in rows)
    assert not account_processes(account)
    # the ranks run as the account wrote their evidence into the study's staging directory
    from nearmetal.evidence.read import evidence_of
    from nearmetal.study.store.store import Store

    with Store(tmp_path / "db" / "study.db", create=False, readonly=True) as store:
        runs = {r["id"]: r["run_key"] for r in store.runs(store.study("as-account")["id"])}
        evidence = evidence_of(store, store.study("as-account")["id"])
    as_account = [run_id for run_id, key in runs.items() if key.startswith("latency|") and "as-nmuser" in key]
    assert len(as_account) == 2 and all([r["rank"] for r in evidence[i]] == [0, 1] for i in as_account)


def test_podman_leaves_no_pause_process_behind(account, workdir, default_image):
    out = as_account("--mode", "hybrid", "--runtime", "podman", "-v", "--", "nm-mpi-info", workdir=workdir)
    assert out.returncode == 0, out.stderr
    assert "--userns=keep-id" in out.stderr and f"{account.pw_dir}/.cache/nearmetal/podman/root" in out.stderr
    assert not account_processes(account, "podman pause")
    assert not account_processes(account)


def test_dry_run_says_who_runs_the_job(account, workdir):
    out = as_account("--dry-run", "--mode", "hybrid", "--", "nm-mpi-info", workdir=workdir)
    assert out.returncode == 0, out.stderr
    assert f"# as {NAME} (uid {account.pw_uid}, gid {account.pw_gid}): the launcher and every rank" in out.stdout
    assert f"USER={NAME}" in out.stdout and f"HOME={account.pw_dir}" in out.stdout
    assert not list(workdir.iterdir()) and not account_processes(account)


def fuse_usable_by(account):
    st = os.stat("/dev/fuse")
    groups = os.getgrouplist(account.pw_name, account.pw_gid)
    shift = 6 if st.st_uid == account.pw_uid else 3 if st.st_gid in groups else 0
    return (st.st_mode >> shift) & 6 == 6


def test_squashfs_with_ch_run_needs_fuse_for_the_account(account, workdir, default_image):
    """ch-run mounts a .sqfs with squashfuse: refused before launching where /dev/fuse is not
    the account's to open (0600 here), run where it is (Debian's default 0666)."""
    out = as_account("--mode", "hybrid", "--image", default_image.sqfs, "--", "nm-mpi-info", workdir=workdir)
    if fuse_usable_by(account):
        assert out.returncode == 0, out.stderr
    else:
        err = assert_one_line_error(out)
        mode = f"{stat.S_IMODE(os.stat('/dev/fuse').st_mode):04o}"
        assert f"--user {NAME}: ch-run cannot start SquashFS files as {NAME}: /dev/fuse is {mode}" in err
        assert not list(workdir.iterdir())  # nothing started


def test_an_account_without_subordinate_ids_is_refused_podman(workdir, default_image):
    """An account made without the set-up option (plain useradd gives a system account no
    /etc/subuid range): rootless podman is refused in one line; ch-run needs no range."""
    name = "nmnosubid"
    subprocess.run(["userdel", "-r", name], capture_output=True)
    for _ in range(10):  # 1: "cannot lock /etc/passwd; try again later" while another tool holds it
        made = subprocess.run(["useradd", "--system", "--create-home", "--user-group", name], capture_output=True,
                              text=True)
        if made.returncode != 1:
            break
        time.sleep(1)
    assert made.returncode == 0, made.stderr
    try:
        uid = pwd.getpwnam(name).pw_uid
        os.chown(workdir, uid, -1)
        out = nearmetal("run", "--user", name, "--workdir", workdir, "--mode", "hybrid", "--runtime", "podman", "--",
                        "nm-mpi-info")
        err = assert_one_line_error(out)
        assert (f"--user {name}: podman cannot start podman images as {name}: {name} has no range in /etc/subuid and "
                f"/etc/subgid") in err and f"scripts/setup.sh --create-user {name}" in err
        ok = nearmetal("run", "--user", name, "--workdir", workdir, "--mode", "hybrid", "--", "nm-mpi-info")
        assert ok.returncode == 0, ok.stderr
    finally:
        subprocess.run(["userdel", "-r", name], capture_output=True)


@pytest.mark.parametrize("args, message", [
    (["--user", "nosuchaccount"], "--user nosuchaccount: no such account (create one with: bash scripts/setup.sh "
                                  "--create-user nosuchaccount)"),
    (["--user", "root"], "--user root: root is uid 0 (root): to run as root, give no --user"),
    (["--user", "0"], "--user 0: give the account's name, not a uid"),
    (["--user", NAME, "--network", "isolated"], "--user with network isolated is not supported"),
    (["--user", NAME, "--scheduler", "slurm"], "--user runs jobs on this machine only"),
])
def test_refusals_are_one_line(args, message, account, workdir):
    err = assert_one_line_error(nearmetal("run", "--workdir", workdir, *args, "--", "nm-mpi-info"))
    assert message in err


def test_without_root_it_says_to_run_as_the_account(account, workdir):
    """nearmetal started as the account itself, through nm-supervise --as (the Python it runs on
    shown to the account as a job is, where it lives under /root as with pyenv)."""
    import sys

    from nearmetal import privilege, supervise

    acct = privilege.lookup(NAME)
    masks, shows = privilege.view(acct, [(sys.base_prefix, False)], privilege.Facts())
    argv = supervise.wrap([str(NEARMETAL), "run", "--user", NAME, "--", "nm-mpi-info"],
                          options=privilege.supervise_options(acct, masks, shows))
    env = privilege.environ(acct, dict(os.environ))
    out = subprocess.run(argv, capture_output=True, text=True, env=env, cwd="/", timeout=120, stdin=subprocess.DEVNULL)
    assert "--user needs root; run as nmuser instead" in assert_one_line_error(out)


def test_a_directory_the_account_cannot_write_is_refused_as_workdir(account, tmp_path):
    root_owned = tmp_path / "roots"
    root_owned.mkdir()
    err = assert_one_line_error(nearmetal("run", "--user", NAME, "--workdir", root_owned, "--", "nm-mpi-info"))
    assert f"--user {NAME}: {root_owned} is not writable by {NAME} (0755 root): make it writable by {NAME}" in err
