"""Evidence (nearmetal.evidence), the parts that need no process: cgroup v1/v2 limits read
from fake trees, the ranks' files chosen and normalised, the store's rows read back, the
preload order. The library itself, in real ranks: tests/test_evidence.py."""

import json
import os

import pytest

from nearmetal.evidence import cgroup, collect, preloaded
from nearmetal.evidence.read import evidence_of, launcher_of

pytestmark = pytest.mark.unit


def tree(root, files):
    for path, text in files.items():
        full = root / path.lstrip("/")
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_text(text + "\n")


V1 = "12:name=systemd:/job\n4:memory:/job/rank\n2:cpu,cpuacct:/job/rank\n0::/job\n"


def test_v1_limits_are_the_smallest_on_the_way_up_to_the_root(tmp_path):
    tree(tmp_path, {
        "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "-1", "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000",
        "/sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_quota_us": "150000",
        "/sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_period_us": "100000",
        "/sys/fs/cgroup/cpu,cpuacct/job/rank/cpu.cfs_quota_us": "300000",
        "/sys/fs/cgroup/cpu,cpuacct/job/rank/cpu.cfs_period_us": "100000",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712",
        "/sys/fs/cgroup/memory/job/memory.limit_in_bytes": str(1 << 30),
        "/sys/fs/cgroup/memory/job/rank/memory.limit_in_bytes": str(3 << 30),
        "/sys/fs/cgroup/systemd/job/cpu.cfs_quota_us": "1000",  # a name= hierarchy: no limits there
    })
    files = cgroup.read_tree(V1, root=tmp_path)
    assert "/sys/fs/cgroup/cpu,cpuacct/job/rank/cpu.cfs_quota_us" in files
    assert not any("systemd" in p for p in files)
    assert cgroup.limits(V1, files) == {"cpu_quota_cores": 1.5, "memory_limit_bytes": 1 << 30, "version": 1}


def test_v2_limits_read_cpu_max_and_memory_max(tmp_path):
    proc = "0::/user.slice/job\n"
    tree(tmp_path, {
        "/sys/fs/cgroup/user.slice/cpu.max": "200000 100000",
        "/sys/fs/cgroup/user.slice/job/cpu.max": "max 100000",
        "/sys/fs/cgroup/user.slice/memory.max": "max",
        "/sys/fs/cgroup/user.slice/job/memory.max": "536870912",
    })
    files = cgroup.read_tree(proc, root=tmp_path)
    assert cgroup.limits(proc, files) == {"cpu_quota_cores": 2.0, "memory_limit_bytes": 1 << 29, "version": 2}


def test_a_hybrid_machine_reads_v2_files_under_unified_and_counts_as_v1(tmp_path):
    proc = "1:cpu:/\n0::/c\n"
    tree(tmp_path, {"/sys/fs/cgroup/unified/c/memory.max": "1048576", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us": "-1",
                    "/sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000"})
    assert cgroup.limits(proc, cgroup.read_tree(proc, root=tmp_path)) == {
        "cpu_quota_cores": None, "memory_limit_bytes": 1 << 20, "version": 1}


def test_a_container_in_its_own_cgroup_namespace_reads_the_mount_root(tmp_path):
    proc = "0::/\n"  # what a rank in a cgroup namespace sees: its cgroup is the root of its mount
    tree(tmp_path, {"/sys/fs/cgroup/cpu.max": "50000 100000"})
    assert cgroup.limits(proc, cgroup.read_tree(proc, root=tmp_path))["cpu_quota_cores"] == 0.5


@pytest.mark.parametrize("files", [{}, {"/sys/fs/cgroup/cpu.max": "garbage"}, {"/x/cpu.cfs_quota_us": "0"},
                                   {"/x/memory.max": "-5"}])
def test_no_or_unreadable_limits_are_none(files):
    got = cgroup.limits("0::/\n", files)
    assert got == {"cpu_quota_cores": None, "memory_limit_bytes": None, "version": 2}
    assert cgroup.limits("", files)["version"] is None


# -- the ranks' files -------------------------------------------------------------------------

def raw(pid, mpi_rank=-1, env_rank=None, load=100, mpi=True, **more):
    out = {"format": 1, "why": "finalize" if mpi else "exit", "pid": pid, "host": "h", "exe": "/bin/x",
           "mpi_rank": mpi_rank, "env_rank": env_rank, "launch_ns": 1_000_000_000, "load_real_ns": 1_000_000_000 + load,
           "init_end_real_ns": 1_250_000_000 if mpi else -1, "cpus_allowed": [0, 1],
           "start": {"cpu": 1, "node": 0, "nr_migrations": 3, "voluntary": 1, "nonvoluntary": 0},
           "end": {"cpu": 0, "node": 0, "nr_migrations": 7, "voluntary": 11, "nonvoluntary": 2},
           "ns": {"user": 11, "ipc": 12, "net": 13, "pid": 14, "mnt": 15, "uts": 16, "cgroup": 17}, "seccomp": 2,
           "ld_audit": None, "ld_preload": "/tmp/nearmetal-0/nm-evidence-1.so /opt/mine.so",
           "proc_cgroup": "0::/\n", "cgroup_files": {"/sys/fs/cgroup/cpu.max": "100000 100000"},
           "mpi_library": {"path": "/usr/lib/libmpi.so.40", "soname": "libmpi.so.40", "inode": 5} if mpi else None,
           "mpi_profile": {"classes": {}, "functions": {}, "in_mpi_s": 0.1, "outside_mpi_s": 0.2, "wall_s": 0.3}
           if mpi else None}
    out.update(more)
    return out


def put(stage, name, value):
    (stage / name).write_text(value if isinstance(value, str) else json.dumps(value))


def test_one_file_per_rank_is_chosen_and_normalised(tmp_path):
    put(tmp_path, "ev-h-10.json", raw(10, mpi_rank=0))
    put(tmp_path, "ev-h-9.json", raw(9, env_rank="0", mpi=False, load=50))  # rank 0's wrapping shell
    put(tmp_path, "ev-h-11.json", raw(11, env_rank="1", mpi=False, load=10))  # a program without MPI: rank 1
    put(tmp_path, "ev-h-12.json", raw(12, env_rank="1", mpi=False, load=90))  # ... exec'd last: it wins
    put(tmp_path, "ev-h-13.json", raw(13, mpi=False))  # no rank at all: left out
    put(tmp_path, "ev-h-14.json", '{"format": 1, "pid":')  # torn: not read
    put(tmp_path, "ev-h-15.json.tmp", raw(15, mpi_rank=5))  # not renamed into place: not read
    launcher = {"rank": -1, "ns": {"user": 1, "ipc": 2, "net": 3, "pid": 4, "mnt": 5}}
    got = collect.collect(str(tmp_path), launcher)
    assert sorted(got) == [-1, 0, 1] and os.listdir(tmp_path) == []  # every file removed
    r0, r1 = got[0], got[1]
    assert set(collect.FIELDS) <= set(r0)
    assert (r0["pid"], r1["pid"]) == (10, 12)
    assert r0["cpus_allowed"] == [0, 1] and (r0["cpu_start"], r0["cpu_end"], r0["numa_node"]) == (1, 0, 0)
    assert r0["migrations"] == 4 and r0["ctxt_switches"] == {"voluntary": 10, "nonvoluntary": 2}
    assert r0["ns"] == {"user": 11, "ipc": 12, "net": 13, "pid": 14, "mnt": 15} and r0["launcher_ns"] == launcher["ns"]
    assert r0["cgroup"] == {"cpu_quota_cores": 1.0, "memory_limit_bytes": None, "version": 2}
    assert r0["seccomp"] == 2 and r0["ld_preload_others"] == "/opt/mine.so"
    assert r0["t_main_s"] == pytest.approx(1e-7) and r0["t_init_end_s"] == pytest.approx(0.25)
    assert r0["mpi_library"]["soname"] == "libmpi.so.40" and r0["mpi_profile"]["wall_s"] == 0.3
    assert r1["t_init_end_s"] is None and r1["mpi_library"] is None and r1["mpi_profile"] is None
    assert got[-1]["launch_ns"] == 1_000_000_000


def test_a_fifo_or_a_link_named_as_a_ranks_file_is_skipped_without_waiting(tmp_path):
    """Ranks run as another account (`--user`) write into a directory any account may write:
    a FIFO named as their file made the read wait for ever, holding nearmetal."""
    put(tmp_path, "ev-h-10.json", raw(10, mpi_rank=0))
    os.mkfifo(tmp_path / "ev-h-11.json")
    os.symlink(tmp_path / "ev-h-10.json", tmp_path / "ev-h-12.json")
    assert [r["pid"] for r in collect.read_files(str(tmp_path))] == [10]
    assert os.listdir(tmp_path) == []


def test_a_value_that_is_not_utf8_is_replaced_not_the_file_lost(tmp_path):
    text = json.dumps(raw(1, mpi_rank=0, ld_preload="/opt/XX.so")).replace("XX", "\\u00ff")
    (tmp_path / "ev-h-1.json").write_bytes(text.encode().replace(b"\\u00ff", b"\xff"))
    assert collect.collect(str(tmp_path))[0]["ld_preload"] == "/opt/\ufffd.so"


def test_missing_counters_give_none_not_a_wrong_number(tmp_path):
    put(tmp_path, "ev-h-1.json", raw(1, mpi_rank=0, launch_ns=-1, start={"cpu": -1, "nr_migrations": -1},
                                     end={"cpu": 0, "nr_migrations": 5}))
    r = collect.collect(str(tmp_path))[0]
    assert r["migrations"] is None and r["cpu_start"] is None and r["t_main_s"] is None and r["t_init_end_s"] is None


def test_the_evidence_library_comes_first_in_ld_preload_once():
    env = preloaded({"LD_PRELOAD": "/opt/a.so /tmp/ev.so /opt/b.so", "X": "1"}, "/tmp/ev.so")
    assert env == {"LD_PRELOAD": "/tmp/ev.so /opt/a.so /opt/b.so", "X": "1"}
    assert preloaded({}, "/tmp/ev.so") == {"LD_PRELOAD": "/tmp/ev.so"}


# -- the store ---------------------------------------------------------------------------------

def test_evidence_rows_are_read_back_per_run_and_rank(tmp_path):
    from nearmetal.study.store.store import Store

    planned = [{"run_key": f"k{i}", "position": i, "block": 0, "repetition": i, "warmup": 0, "benchmark": "b",
                "kernel": "allreduce", "variant": "native/mpich", "variant_json": "{}", "ranks": 2, "threads": 1}
               for i in range(2)]
    with Store(tmp_path / "e.db", what="test") as store:
        sid = store.create_study("s", "", 1, 0.03, {}, "0", "now", planned=planned)
        r1, r2 = (row["id"] for row in store.pending(sid))
        store.set_evidence(r1, [(1, json.dumps({"rank": 1})), (0, json.dumps({"rank": 0})),
                                (-1, json.dumps({"rank": -1, "ns": {"user": 1}}))])
        store.set_evidence(r2, [(0, "not json"), (1, json.dumps({"rank": 1}))])
        store.set_evidence(r2, [(0, json.dumps({"rank": 0, "again": True}))])  # a run measured again: replaced
        assert evidence_of(store, sid) == {r1: [{"rank": 0}, {"rank": 1}], r2: [{"rank": 0, "again": True}]}
        assert launcher_of(store, sid) == {r1: {"rank": -1, "ns": {"user": 1}}}
        assert evidence_of(store, sid + 1) == {}


@pytest.mark.parametrize("text, ok", [("evidence = false", False), ("", True)])
def test_evidence_is_on_unless_a_study_opts_out(text, ok):
    from nearmetal.study.plan.study_file import parse

    cfg = parse(f'[study]\nname = "a"\n{text}\n[[benchmark]]\nkernel = "startup"\n', source="a.toml")
    assert cfg.study.evidence is ok


def test_evidence_takes_a_boolean_only():
    from nearmetal.errors import NearmetalError
    from nearmetal.study.plan.study_file import parse

    with pytest.raises(NearmetalError) as e:
        parse('[study]\nname = "a"\nevidence = "yes"\n[[benchmark]]\nkernel = "startup"\n', source="a.toml")
    assert "study.evidence" in str(e.value) and "\n" not in str(e.value)


def test_processes_that_each_initialised_mpi_as_a_job_of_one_are_lone_starts_of_a_larger_launch():
    """Every rank's program a 1-rank job of its own (another MPI than the launcher's): a lone
    start; a job that some process saw whole, one helper that started MPI alone, a launch of
    one rank, or processes without MPI are not. No rank variable of the environment is read."""
    from nearmetal.evidence.lone import lone_starts, why_failed

    alone = [{"mpi_size": 1, "mpi_rank": 0, "exe": "/opt/app"} for _ in range(4)]
    assert lone_starts(alone, 4) == alone and lone_starts(alone[:2], 4) == alone[:2]
    assert lone_starts(alone, 1) == []  # one rank asked: a job of one is the job
    assert lone_starts(alone + [{"mpi_size": 4, "mpi_rank": 2}], 4) == []  # the program joined the job
    assert lone_starts([{"mpi_size": 1}, {"mpi_size": -1}, {"mpi_size": True}, {}], 4) == []  # one helper alone
    assert lone_starts([{"mpi_size": 1, "env_rank": "0"}, {"mpi_size": 1, "env_rank": "0"}], 2)  # inherited: no matter
    why = why_failed(alone, 4, "mpich")
    assert why.startswith("nearmetal: the run exited 0 but is not one MPI job: 4 processes (/opt/app) each "
                          "initialised MPI as a job of one rank, where the launch has 4;") and "mpich" in why
    assert why_failed(alone, 1, "mpich") is None


def test_bench_under_evidence_reads_only_the_files_its_launch_wrote(tmp_path, capsys):
    """`bench --evidence DIR`: DIR may hold earlier runs' files; the lone-start check reads the
    new or rewritten ones, leaves them all in DIR, and words its remedy as --mpi. A launch none
    of whose processes initialised MPI (a program that links none) is said: N copies."""
    from types import SimpleNamespace

    from nearmetal.errors import NearmetalError
    from nearmetal.evidence.run_dir import check_launch, listing

    plan = SimpleNamespace(components=[SimpleNamespace(ranks=2, installation={"family": "mpich"})])
    args = SimpleNamespace(command="bench")
    alone = json.dumps({"mpi_size": 1, "mpi_rank": 0, "exe": "/opt/app"})

    def check(before):
        try:
            check_launch(args, (str(tmp_path), before), plan)
        except NearmetalError as e:
            return str(e)
        return None

    for pid in (11, 12):  # an earlier launch that was no MPI job
        (tmp_path / f"ev-h-{pid}.json").write_text(alone)
    before = listing(tmp_path)
    assert sorted(before) == ["ev-h-11.json", "ev-h-12.json"]
    # nothing new: the old files are not this launch's (and the note says nothing was checked)
    assert check(before) is None and "no rank wrote its evidence" in capsys.readouterr().err
    for pid in (21, 22):  # this launch: one 2-rank job
        (tmp_path / f"ev-h-{pid}.json").write_text(json.dumps({"mpi_size": 2, "mpi_rank": pid - 21}))
    assert check(before) is None and capsys.readouterr().err == ""
    before = listing(tmp_path)
    for pid in (31, 32):
        (tmp_path / f"ev-h-{pid}.json").write_text(alone)
    why = check(before)
    assert why.startswith("the run exited 0 but is not one MPI job: 2 processes (/opt/app)"), why
    assert "run it with --mpi naming the MPI it links, or rebuild it against mpich" in why, why
    assert len(list(tmp_path.glob("ev-*.json"))) == 6  # the user's directory keeps every file
    os.unlink(tmp_path / "ev-h-31.json")
    os.rename(tmp_path / "ev-h-32.json", tmp_path / "ev-h-11.json")  # rewritten under an old name: read
    (tmp_path / "ev-h-12.json").write_text(alone)
    later = before["ev-h-12.json"][0] + 10**9  # a clock tick may be coarser than the test is quick
    os.utime(tmp_path / "ev-h-12.json", ns=(later, later))
    assert check(before)
    before = listing(tmp_path)
    for pid in (41, 42):  # a program that links no MPI: its processes never initialised it
        (tmp_path / f"ev-h-{pid}.json").write_text(json.dumps({"exe": "/opt/serial"}))
    assert check(before) is None
    assert "note: no process of the launch was seen initialising MPI: a program that links no MPI runs as 2 copies" \
        in capsys.readouterr().err
    assert listing(tmp_path / "missing") == {}


def test_a_staging_directory_a_killed_process_left_is_removed_when_the_next_is_made(tmp_path):
    """A SIGKILLed study cannot remove its cells' staging directories: the next one made under
    the shared directory removes those whose owner's PID is gone, and no other."""
    from nearmetal.supervise import stage_dir

    with open("/proc/sys/kernel/pid_max") as f:
        gone = int(f.read()) + 1  # a PID no process can have
    ns = os.stat("/proc/self/ns/pid").st_ino
    dead = tmp_path / f"evidence-{gone}.{ns}-abc"
    live = tmp_path / f"evidence-{os.getppid()}.{ns}-def"  # pytest's parent: alive
    elsewhere = tmp_path / f"evidence-{gone}.{ns + 1}-jkl"  # another PID namespace's: not judged from here
    unnamed, other = tmp_path / "evidence-k3j_x9", tmp_path / f"trace-{gone}.{ns}-ghi"
    for d in (dead, live, elsewhere, unnamed, other):
        d.mkdir()
    (dead / "ev-h-1.json").write_text("{}")
    made = stage_dir("evidence", str(tmp_path))
    assert os.path.basename(made).startswith(f"evidence-{os.getpid()}.{ns}-")
    assert not dead.exists() and all(d.exists() for d in (live, elsewhere, unnamed, other))
