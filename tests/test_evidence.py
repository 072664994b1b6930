"""Evidence recorded for every run (nearmetal.evidence), with real ranks: a study's runs of
both MPI families, natively and in three container runtimes, each store one row per rank with
plausible facts and an MPI profile that counts the kernel's own calls; a Fortran program's
calls are counted through its bindings; a program without MPI leaves its constructor facts;
`evidence = false` records nothing and preloads nothing."""

import json
import os
import re
import sqlite3
import subprocess

import pytest

from conftest import nearmetal
from nearmetal.evidence import cgroup
from nearmetal.evidence.read import evidence_of, launcher_of
from nearmetal.study.store.store import Store

ITERATIONS, WARMUP = 50, 5
# nm-allreduce: one MPI_Allreduce per iteration and warm-up, and one more per message size:
# every rank's verdict on the results (kernels/csrc/common/osu.c, nm_osu_check)
ALLREDUCES = ITERATIONS + WARMUP + 1

STUDY = """
[study]
name = "{name}"
repetitions = 1
warmup = 0
timeout = 300
{extra}

[matrix]
mode = [{modes}]
runtime = [{runtimes}]
mpi = [{mpis}]

[[benchmark]]
{benchmark}
"""
ALLREDUCE = f'kernel = "allreduce"\nargs = ["-m", "1024:1024", "-i", "{ITERATIONS}", "-x", "{WARMUP}"]'


def run_study(tmp_path, name, benchmark=ALLREDUCE, modes='"native"', runtimes='"charliecloud"', extra="",
              mpis='"openmpi", "mpich"'):
    path = tmp_path / f"{name}.toml"
    path.write_text(STUDY.format(name=name, extra=extra, modes=modes, runtimes=runtimes, benchmark=benchmark,
                                 mpis=mpis))
    db = tmp_path / f"{name}.db"
    out = nearmetal("study", str(path), "--db", str(db), "--no-progress", timeout=900)
    assert out.returncode == 0, out.stderr
    store = Store(db, create=False, readonly=True)
    sid = store.study(name)["id"]
    runs = {r["id"]: dict(r) for r in store.runs(sid)}
    assert runs and all(r["status"] == "ok" for r in runs.values()), [r["stderr_tail"] for r in runs.values()]
    return store, sid, runs


def test_every_run_of_both_families_natively_and_in_three_runtimes_has_plausible_evidence(tmp_path):
    store, sid, runs = run_study(tmp_path, "ev", modes='"native", "hybrid"',
                                 runtimes='"charliecloud", "bwrap", "apptainer"')
    evidence, launchers = evidence_of(store, sid), launcher_of(store, sid)
    assert sorted(evidence) == sorted(runs) == sorted(launchers)  # 2 families x (native + 3 runtimes)
    assert len(runs) == 8
    for run_id, ranks in evidence.items():
        variant, launcher = runs[run_id]["variant"], launchers[run_id]
        native = variant.startswith("native/")
        assert "nm-evidence-" in runs[run_id]["argv_json"], variant  # the ranks' LD_PRELOAD, in the launch
        assert [r["rank"] for r in ranks] == [0, 1], variant
        assert launcher["launch_ns"] > 0 and set(launcher["ns"]) == {"user", "ipc", "net", "pid", "mnt"}
        for r in ranks:
            where = f"{variant} rank {r['rank']}"
            assert r["cpus_allowed"] and r["cpu_start"] in r["cpus_allowed"] and r["cpu_end"] in r["cpus_allowed"], where
            assert r["numa_node"] == 0 and r["seccomp"] in (0, 1, 2), where
            assert r["launcher_ns"] == launcher["ns"] and all(r["ns"].values()), where
            # natively the ranks share the launcher's mount namespace; every runtime gives them their own
            assert (r["ns"]["mnt"] == launcher["ns"]["mnt"]) is native, where
            assert 0 < r["t_main_s"] < r["t_init_end_s"] < 60, where
            lib = r["mpi_library"]
            assert "libmpi" in lib["path"] and lib["soname"].startswith("libmpi") and lib["inode"] > 0, where
            assert ("libmpich" in lib["soname"]) is variant.endswith(("/mpich", "/mpich/default")), where
            assert "nm-evidence" in r["ld_preload"] and r["ld_preload_others"] is None and r["ld_audit"] is None
            assert r["cgroup"]["version"] in (1, 2), where
            profile = r["mpi_profile"]
            assert profile["functions"]["MPI_Allreduce"]["calls"] == ALLREDUCES, where
            assert profile["classes"]["collective"]["calls"] >= ALLREDUCES + ITERATIONS + WARMUP, where  # + barriers
            assert profile["classes"]["io"]["calls"] == 0 and profile["finalized"], where
            assert profile["in_mpi_s"] > 0 and profile["wall_s"] > 0
            assert profile["in_mpi_s"] + profile["outside_mpi_s"] == pytest.approx(profile["wall_s"], abs=1e-6)
            if native:  # the C library's walk of the cgroup files is the Python one's, on the same tree
                assert r["cgroup_files"] == cgroup.read_tree(r["proc_cgroup"]), where


def test_a_fortran_program_is_profiled_through_its_bindings(tmp_path):
    source = tmp_path / "f.f90"
    # MPI_Sendrecv: 13 arguments with ierror, the most of any wrapped function; each ierror checked
    source.write_text("program f\n  use mpi\n  integer :: ierr, i, rank, other, st(MPI_STATUS_SIZE)\n"
                      "  double precision :: x, y\n"
                      "  call MPI_Init(ierr)\n  x = 1\n  do i = 1, 40\n"
                      "    call MPI_Allreduce(x, y, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)\n"
                      "  end do\n  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)\n  other = 1 - rank\n"
                      "  do i = 1, 100\n    ierr = -1\n"
                      "    call MPI_Sendrecv(x, 1, MPI_DOUBLE_PRECISION, other, 0, y, 1, MPI_DOUBLE_PRECISION, &\n"
                      "                      other, 0, MPI_COMM_WORLD, st, ierr)\n"
                      "    if (ierr /= 0) stop 3\n  end do\n"
                      "  call MPI_Barrier(MPI_COMM_WORLD, ierr)\n  call MPI_Finalize(ierr)\nend program\n")
    for family in ("openmpi", "mpich"):
        exe = tmp_path / f"f-{family}"
        subprocess.run([f"mpif90.{family}", "-o", str(exe), str(source)], check=True)
        store, sid, runs = run_study(tmp_path, f"fortran-{family}", benchmark=f'command = ["{exe}"]',
                                     mpis=f'"{family}"')
        (ranks,) = evidence_of(store, sid).values()
        assert [r["rank"] for r in ranks] == [0, 1]
        for r in ranks:
            functions = r["mpi_profile"]["functions"]
            assert functions["MPI_Allreduce"]["calls"] == 40 and functions["MPI_Barrier"]["calls"] == 1, family
            assert functions["MPI_Sendrecv"]["calls"] == 100, family
            assert 0 < r["t_main_s"] < r["t_init_end_s"] and "libmpi" in r["mpi_library"]["path"]


def test_a_program_without_mpi_leaves_the_facts_of_its_start(tmp_path):
    store, sid, runs = run_study(tmp_path, "nompi", benchmark='command = ["/bin/sleep", "0.2"]', mpis='"mpich"')
    (ranks,) = evidence_of(store, sid).values()
    assert [r["rank"] for r in ranks] == [0, 1]
    for r in ranks:
        assert r["exe"].endswith("sleep") and r["written_at"] == "exit"
        assert r["cpus_allowed"] and 0 < r["t_main_s"] < 60 and all(r["ns"].values())
        assert r["mpi_library"] is None and r["mpi_profile"] is None and r["t_init_end_s"] is None


def test_evidence_false_records_and_preloads_nothing(tmp_path):
    store, sid, runs = run_study(tmp_path, "off", extra="evidence = false", mpis='"mpich"')
    assert evidence_of(store, sid) == {} and launcher_of(store, sid) == {}
    assert all("nm-evidence" not in (r["argv_json"] + (r["env_json"] or "")) for r in runs.values())
    db = sqlite3.connect(store.path)
    assert db.execute("SELECT COUNT(*) FROM run_evidence").fetchone() == (0,)
    db.close()


def test_the_library_loads_in_older_images_and_owns_mpi_init():
    """No glibc symbol version newer than 2.17 (clock_gettime), libdl needed by name, no MPI
    linked: one host-built library for both families and older images; it defines MPI_Init
    and its kin (the one owner among nearmetal's preloads), the hook the tracer registers
    with, and the C and gfortran names of the profiled calls."""
    from nearmetal.evidence import library

    dynsyms = subprocess.run(["objdump", "-T", library()], capture_output=True, text=True, check=True).stdout
    versions = {tuple(int(x) for x in v.split(".")) for v in re.findall(r"\(GLIBC_([\d.]+)\)", dynsyms)}
    assert versions and max(versions) <= (2, 17), sorted(versions)
    needed = re.findall(r"NEEDED\s+(\S+)", subprocess.run(["objdump", "-p", library()], capture_output=True,
                                                          text=True, check=True).stdout)
    assert sorted(needed) == ["libc.so.6", "libdl.so.2"], needed
    for name in ("MPI_Init", "PMPI_Init", "MPI_Init_thread", "PMPI_Init_thread", "MPI_Finalize", "PMPI_Finalize",
                 "mpi_init_", "mpi_finalize_", "nm_mpi_hook_add", "MPI_Allreduce", "mpi_allreduce_", "MPI_Waitall",
                 "MPI_File_write_at_all"):
        assert re.search(rf"\sDF? ?\.text\s.*\s{name}$", dynsyms, re.M), name
    assert not re.search(r"\sPMPI_Allreduce$", dynsyms, re.M)  # the profile forwards; it takes no PMPI_ name


def test_every_profile_wrapper_forwards_by_a_jump_with_the_stack_untouched():
    """The wrappers take the register arguments only and must leave the caller's stack
    arguments where the function they jump to reads them: as built here, every MPI_X and
    mpi_x_ wrapper (not MPI_Init and its kin, which nm-mpi-owner.c wraps whole) builds no frame,
    calls nothing, touches no stack slot and ends each path in a jump."""
    import platform

    from nearmetal.evidence.build import library

    text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", library()], capture_output=True, text=True,
                          check=True).stdout
    bodies = dict(re.findall(r"^[0-9a-f]+ <((?:MPI_|mpi_)\w+)>:\n(.*?)(?:\n\n|\Z)", text, re.M | re.S))
    owned = {"MPI_Init", "MPI_Init_thread", "MPI_Finalize", "mpi_init_", "mpi_init_thread_", "mpi_finalize_"}
    wrappers = {name: body for name, body in bodies.items() if name not in owned}
    assert len(wrappers) >= 180 and {"MPI_Allreduce", "mpi_sendrecv_", "MPI_File_write_at_all"} <= set(wrappers)
    x86 = platform.machine() in ("x86_64", "AMD64")
    frame = r"\s(push|pop|call|ret|leave|sub\s+\S+,%rsp)\b|\(%rsp\)|\(%rbp\)" if x86 else r"\s(bl|ret|stp|ldp)\s"
    jump = r"\sjmp\s+\*" if x86 else r"\sbr\s"
    for name, body in wrappers.items():
        assert not re.search(frame, body), (name, body)
        assert re.search(jump, body), (name, body)


def test_run_evidence_writes_one_file_per_rank_into_the_directory(tmp_path):
    out = tmp_path / "ev"
    got = nearmetal("run", "--evidence", str(out), "--mpi", "openmpi", "-n", "2", "--", "nm-allreduce", "-m", "8:8",
                    "-i", "10", "-x", "1")
    assert got.returncode == 0, got.stderr
    files = [json.loads(p.read_text()) for p in sorted(out.iterdir())]
    assert sorted(f["mpi_rank"] for f in files) == [0, 1] and [f["mpi_size"] for f in files] == [2, 2]
    assert all(f["mpi_profile"]["functions"]["MPI_Allreduce"]["calls"] == 12 for f in files)  # 10 + 1 + verdict


def test_run_evidence_in_a_container_mode_needs_a_directory_under_tmp():
    from conftest import assert_one_line_error

    where = f"/var/tmp/nm-evidence-test-{os.getpid()}"
    got = nearmetal("run", "--evidence", where, "--mode", "hybrid", "--", "nm-startup")
    assert "must be under /tmp" in assert_one_line_error(got)
    assert not os.path.exists(where)  # nothing created, nothing run


def test_bind_mode_ranks_name_the_hosts_mpi_library_they_ran(tmp_path):
    """Bind mode brings the host's MPI into the image: the ranks see it under the bind mount,
    with the host file's inode."""
    import tempfile

    out = tempfile.mkdtemp(prefix="nm-evidence-bind-", dir="/tmp")
    try:
        got = nearmetal("run", "--evidence", out, "--mode", "bind", "--mpi", "mpich", "-n", "2", "--", "nm-allreduce",
                        "-m", "8:8", "-i", "10", "-x", "1")
        assert got.returncode == 0, got.stderr
        files = [json.loads(open(os.path.join(out, n)).read()) for n in sorted(os.listdir(out))]
    finally:
        import shutil

        shutil.rmtree(out, ignore_errors=True)
    assert sorted(f["mpi_rank"] for f in files) == [0, 1] and [f["mpi_size"] for f in files] == [2, 2]  # MPICH's world
    host_inode = os.stat("/usr/lib/x86_64-linux-gnu/libmpich.so.12").st_ino
    for f in files:
        lib = f["mpi_library"]
        assert lib["soname"] == "libmpich.so.12" and lib["inode"] == host_inode, lib
        assert not lib["path"].startswith("/usr/lib/"), lib  # the host's file, where the container mounted it


def test_a_traced_study_has_both_the_trace_and_the_profile_of_its_mpi_io(tmp_path):
    """The tracer hooks into the evidence library's MPI_Init (one owner): its ranks are MPI's
    own; the profile sees each MPI-IO call once per rank (ROMIO's own collectives inside them
    are not counted again: both families count the same)."""
    from nearmetal.study.config.traced import traces_dir
    from nearmetal.trace import reader

    iobench = ('kernel = "iobench"\nargs = ["-p", "shared", "-L", "mpiio", "-x", "64", "-y", "64", "-z", "4", '
               '"-t", "2", "-i", "2x1", "-d", "/dev/shm"]\ntrace = true')
    store, sid, runs = run_study(tmp_path, "traced", benchmark=iobench)
    profiles = {}
    for run_id, ranks in evidence_of(store, sid).items():
        assert [r["rank"] for r in ranks] == [0, 1]
        for r in ranks:
            io = {k: v["calls"] for k, v in r["mpi_profile"]["functions"].items() if v["class"] == "io"}
            assert io["MPI_File_write_at_all"] == 2 * 2  # 2 records x 2 variables
            profiles.setdefault(runs[run_id]["variant"], []).append(r["mpi_profile"]["classes"])
    assert sorted(profiles) == ["native/mpich", "native/openmpi"]
    assert {k: v["calls"] for k, v in profiles["native/mpich"][0].items()} == {
        k: v["calls"] for k, v in profiles["native/openmpi"][0].items()}
    dirs = [os.path.join(traces_dir(store.path), d) for d in os.listdir(traces_dir(store.path))]
    assert len(dirs) == 2
    for d in dirs:
        assert sorted(reader.read(d).by_rank()) == [0, 1]


def test_a_podman_cpu_quota_and_memory_limit_are_seen_by_the_ranks(default_image):
    """Podman's --cpus and --memory put each rank's container in a cgroup with those limits
    (cgroup v1 here): the ranks read them from their own view of /sys/fs/cgroup."""
    import shutil
    import tempfile

    from nearmetal.evidence.collect import collect

    out = tempfile.mkdtemp(prefix="nm-evidence-podman-", dir="/tmp")
    try:
        got = nearmetal("run", "--evidence", out, "--mode", "hybrid", "--runtime", "podman",
                        "--runtime-arg=--cpus=1.5", "--runtime-arg=--memory=512m", "--mpi", "openmpi", "-n", "2",
                        "--", "nm-allreduce", "-m", "8:8", "-i", "10", "-x", "1")
        assert got.returncode == 0, got.stderr
        ranks = collect(out)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    assert sorted(ranks) == [0, 1]
    for r in ranks.values():
        assert r["cgroup"]["cpu_quota_cores"] == 1.5 and r["cgroup"]["memory_limit_bytes"] == 512 << 20, r["cgroup"]


THREADED = r"""
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
static MPI_Comm comms[2];
static void *work(void *arg)
{
    double x = 1, y;
    for (int i = 0; i < 2000; i++) MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, comms[(long)arg]);
    return NULL;
}
int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (provided != MPI_THREAD_MULTIPLE) { fprintf(stderr, "no MPI_THREAD_MULTIPLE\n"); MPI_Abort(MPI_COMM_WORLD, 3); }
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[0]);
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[1]);
    pthread_t t[2];
    for (long i = 0; i < 2; i++) pthread_create(&t[i], NULL, work, (void *)i);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    MPI_Finalize();
    return 0;
}
"""


@pytest.mark.parametrize("family", ["openmpi", "mpich"])
def test_under_mpi_thread_multiple_concurrent_calls_are_all_counted(family, tmp_path):
    """Two threads of each rank call MPI_Allreduce at once: the counters are added atomically
    when MPI_THREAD_MULTIPLE was provided, so none is lost."""
    from nearmetal.evidence.collect import collect

    src, exe = tmp_path / "mt.c", tmp_path / f"mt-{family}"
    src.write_text(THREADED)
    subprocess.run([f"mpicc.{family}", "-pthread", "-o", str(exe), str(src)], check=True)
    out = tmp_path / "ev"
    got = nearmetal("run", "--evidence", str(out), "--mpi", family, "-n", "2", "--", str(exe))
    assert got.returncode == 0, got.stderr
    ranks = collect(str(out))
    assert sorted(ranks) == [0, 1]
    for r in ranks.values():
        assert r["mpi_profile"]["thread_multiple"] is True
        assert r["mpi_profile"]["functions"]["MPI_Allreduce"]["calls"] == 2 * 2000
        assert r["mpi_profile"]["functions"]["MPI_Comm_dup"]["calls"] == 2


SAMPLED = r"""
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv)
{
    int rank;
    double x = 1, y;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double t0 = MPI_Wtime();
    for (int i = 0; i < 400000; i++) MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_SELF);
    double loop = MPI_Wtime() - t0;
    for (int i = 0; i < 5; i++) {
        if (rank == 1) usleep(20000);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    printf("loop %d %.9f\n", rank, loop);
    MPI_Finalize();
    return 0;
}
"""


def _sample_rate():
    """NM_EV_SAMPLE as the library is built with it (1 in that many short calls timed)."""
    from nearmetal.evidence import CSRC

    with open(os.path.join(CSRC, "nm-profile.c")) as f:
        return int(re.search(r"^#define NM_EV_SAMPLE (\d+)$", f.read(), re.M)[1])


@pytest.mark.parametrize("family", ["openmpi", "mpich"])
def test_short_calls_are_sampled_and_few_long_ones_timed_each(family, tmp_path):
    """400,000 short allreduces: every one counted, a random 1 in NM_EV_SAMPLE timed after the first 64,
    and their time estimated from those, within reason of the program's own timing of the loop
    (some 10 ms: a preemption of a few ms moves it, or a timed call, less than the bounds);
    5 barriers in which rank 0 waits 20 ms each: few calls, each timed."""
    from nearmetal.evidence.collect import collect

    src, exe = tmp_path / "sampled.c", tmp_path / f"sampled-{family}"
    src.write_text(SAMPLED)
    subprocess.run([f"mpicc.{family}", "-o", str(exe), str(src)], check=True)
    out = tmp_path / "ev"
    got = nearmetal("run", "--evidence", str(out), "--mpi", family, "-n", "2", "--", str(exe))
    assert got.returncode == 0, got.stderr
    loops = {int(r): float(s) for _, r, s in (line.split() for line in got.stdout.splitlines() if line.startswith("loop"))}
    ranks = collect(str(out))
    assert sorted(ranks) == sorted(loops) == [0, 1]
    for rank, r in ranks.items():
        short, barrier = r["mpi_profile"]["functions"]["MPI_Allreduce"], r["mpi_profile"]["functions"]["MPI_Barrier"]
        assert short["calls"] == 400000
        expected = 64 + (400000 - 64) / _sample_rate()
        assert 0.9 * expected < short["timed_calls"] < 1.1 * expected, short
        # one sampled call preempted for 0.2 ms adds rate x 0.2 ms (some 50 ms) to the estimate of
        # a 10 ms loop: CI saw 50 ms against 12 on a busy 2-core machine
        assert 0.2 * loops[rank] < short["time_s"] < 4 * loops[rank] + _sample_rate() * 0.0002, (short, loops[rank])
        assert barrier["calls"] == barrier["timed_calls"] >= 5, barrier
        if rank == 0:
            assert barrier["time_s"] >= 0.09, barrier  # five waits of 20 ms, each timed
