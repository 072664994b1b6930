"""nearmetal run/bench through a real local Slurm cluster: srun with the right PMI plugin,
sbatch outside an allocation, heterogeneous (MPMD) steps, failures reported, never a hang."""

import os
import re
import subprocess

import pytest

from conftest import assert_one_line_error, local_slurm_env, nearmetal, ranks_json


@pytest.fixture(scope="module")
def slurm_env(tmp_path_factory):
    yield from local_slurm_env(tmp_path_factory, nodes=3)


def run(env, *args, timeout=180):
    return nearmetal("run", "--scheduler", "slurm", *args, env=env, timeout=timeout)


@pytest.mark.parametrize("mode", ["native", "hybrid", "bind"])
@pytest.mark.parametrize("family", ["openmpi", "mpich"])
def test_every_mode_through_slurm(slurm_env, default_image, family, mode):
    out = run(slurm_env, "--mpi", family, "--mode", mode, "-n", "2", "--", "nm-mpi-info", "--json")
    assert out.returncode == 0, out.stderr
    rows = ranks_json(out.stdout)
    assert [r["size"] for r in rows] == [2, 2]
    assert all(r["library"].startswith("/nm/host-mpi/") == (mode == "bind") for r in rows)


def test_batch_script_shown_by_dry_run(slurm_env):
    out = run(slurm_env, "--dry-run", "--mpi", "mpich", "--partition", "debug", "--time", "5", "-n", "1", "--",
              "nm-mpi-info", ":", "-n", "2", "--", "nm-mpi-info")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "#SBATCH --partition=debug" in text and "#SBATCH --time=5" in text
    assert text.count("#SBATCH --ntasks=") == 2 and "#SBATCH hetjob" in text
    assert "--mpi=pmi2" in text and " : -n 2 " in text
    # a dry run writes nothing: the path it names is where a run would write the script
    written = re.search(r"a run writes it to (\S+/job\.sh); a dry run writes nothing", text)
    assert written and not os.path.exists(os.path.dirname(written.group(1))), text[:300]  # nor its directory


def test_inside_an_allocation_srun_is_used_directly(slurm_env):
    env = dict(os.environ, **slurm_env)
    argv = ["salloc", "-N2", "-n2", str(nearmetal.__globals__["NEARMETAL"]), "run", "-v", "--scheduler", "slurm",
            "--mpi", "openmpi", "-n", "2", "--", "nm-mpi-info", "--json"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert "--mpi=pmix" in out.stderr and "sbatch" not in out.stderr
    assert [r["size"] for r in ranks_json(out.stdout)] == [2, 2]


def run_het(env, *args):
    """A heterogeneous step, allowed two retries: Open MPI 4.1.4 het steps under srun --mpi=pmix
    hang in start-up about one time in ten here, natively as in containers (upstream; see
    docs/slurm-cluster.md); the hung job is cancelled before the retry."""
    for attempt in (1, 2, 3):
        try:
            return run(env, *args, timeout=90)
        except subprocess.TimeoutExpired:
            subprocess.run(["scancel", "--name", "nearmetal"], env=dict(os.environ, **env), capture_output=True)
            if attempt == 3:
                raise


@pytest.mark.parametrize("family", ["openmpi", "mpich"])
def test_heterogeneous_coupled_native_and_container(slurm_env, default_image, family):
    """The coupled proxy as a heterogeneous step on 2+ nodes: atmosphere native, ocean in bind mode."""
    out = run_het(slurm_env, "--mpi", family, "--nodes", "2", "-n", "1", "--", "nm-coupled", "--role", "atm",
                  "--couplings", "4", ":", "-n", "2", "--mode", "bind", "--", "nm-coupled", "--role", "ocn",
                  "--couplings", "4")
    assert out.returncode == 0, out.stderr
    assert "world_size=3" in out.stdout and "atm_ranks=1" in out.stdout and "ocn_ranks=2" in out.stdout


def test_heterogeneous_mixed_modes_share_comm_world(slurm_env, default_image):
    out = run_het(slurm_env, "--mpi", "mpich", "-n", "1", "--mode", "hybrid", "--", "nm-mpi-info", "--json",
              ":", "-n", "2", "--mode", "bind", "--", "nm-mpi-info", "--json")
    assert out.returncode == 0, out.stderr
    rows = ranks_json(out.stdout)
    assert [r["size"] for r in rows] == [3, 3, 3]
    assert [r["library"].startswith("/nm/host-mpi/") for r in rows] == [False, True, True]


def test_bench_through_slurm(slurm_env):
    out = nearmetal("bench", "latency", "--scheduler", "slurm", "--mpi", "mpich", "--json", "--", "-m", "8:8",
                    "-i", "100", "-x", "10", env=slurm_env, timeout=180)
    assert out.returncode == 0, out.stderr
    assert '"scheduler": "slurm"' in out.stdout and '"metric": "latency"' in out.stdout


def test_bad_partition_is_refused_with_slurms_reason(slurm_env):
    err = assert_one_line_error(run(slurm_env, "--partition", "nosuch", "--mpi", "mpich", "--", "nm-mpi-info"))
    assert "Slurm refused the job" in err and "partition" in err.lower()


def test_too_many_nodes_is_refused(slurm_env):
    err = assert_one_line_error(run(slurm_env, "--nodes", "9", "-n", "9", "--mpi", "mpich", "--", "nm-mpi-info"))
    assert "Slurm" in err


def test_failing_program_reports_exit_status(slurm_env):
    out = run(slurm_env, "--mpi", "mpich", "-n", "1", "--", "/bin/sh", "-c", "sleep 2; exit 3")
    assert out.returncode == 3
    assert "ended FAILED" in out.stderr
    # Slurm's job, which a SIGKILL of nearmetal cannot take along: its id said once it runs
    assert re.search(r"^nearmetal: Slurm job (\d+) accepted \(scancel \1 ends it; script and output in ", out.stderr,
                     re.M), out.stderr


def test_missing_pmi_plugin_simulated_by_a_wrapper_srun_is_a_clear_error(slurm_env, tmp_path):
    """A Slurm whose srun lacks the family's PMI plugin: refused before anything starts."""
    fake = tmp_path / "bin"
    fake.mkdir()
    real = subprocess.run(["which", "srun"], capture_output=True, text=True).stdout.strip()
    (fake / "srun").write_text(f"#!/bin/sh\nif [ \"$1\" = --mpi=list ]; then echo 'srun: MPI types are...'; "
                               f"echo none; exit 0; fi\nexec {real} \"$@\"\n")
    (fake / "srun").chmod(0o755)
    env = dict(slurm_env, PATH=f"{fake}:{os.environ['PATH']}")
    err = assert_one_line_error(run(env, "--mpi", "openmpi", "--", "nm-mpi-info"))
    assert "pmix" in err and "none" in err


def test_study_with_slurm_scheduler(slurm_env, tmp_path):
    study = tmp_path / "s.toml"
    study.write_text("""
[study]
name = "slurm-study"
repetitions = 2
warmup = 0
timeout = 120
scheduler = "slurm"
[slurm]
partition = "debug"
[matrix]
mode = ["native"]
mpi = ["mpich"]
[[benchmark]]
kernel = "pingpong"
args = ["-s", "8", "-i", "100", "-x", "10"]
""")
    db = tmp_path / "s.db"
    out = nearmetal("study", str(study), "--db", str(db), "--no-progress", "--out", str(tmp_path), env=slurm_env,
                    timeout=300)
    assert out.returncode == 0, out.stderr
    import sqlite3

    con = sqlite3.connect(db)
    rows = con.execute("SELECT status, argv_json FROM runs").fetchall()
    assert len(rows) == 2 and all(s == "ok" and "srun" in a for s, a in rows)


def test_no_reachable_slurm_is_a_clear_error(tmp_path):
    env = {"SLURM_CONF": str(tmp_path / "missing.conf")}
    err = assert_one_line_error(nearmetal("run", "--scheduler", "slurm", "--mpi", "mpich", "--", "nm-mpi-info",
                                          env=env, timeout=120))
    assert "no Slurm reachable" in err


def test_resume_cancels_the_batch_job_a_killed_runner_left(slurm_env, tmp_path):
    """A runner SIGKILLed while its sbatch job runs leaves the job in Slurm; the job id is in
    the store, and --resume cancels it before running the run again (exactly once)."""
    import signal
    import sqlite3
    import time

    from conftest import NEARMETAL

    study = tmp_path / "s.toml"
    study.write_text("""
[study]
name = "left-behind"
repetitions = 1
warmup = 0
timeout = 120
scheduler = "slurm"
[matrix]
mode = ["native"]
mpi = ["mpich"]
[[benchmark]]
kernel = "latency"
args = ["-m", "8:8", "-i", "4000000"]
""")
    db = tmp_path / "s.db"
    env = dict(os.environ, **slurm_env)
    runner = subprocess.Popen([NEARMETAL, "study", study, "--db", db, "--no-progress"], env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def jobs():
        try:
            with sqlite3.connect(db) as c:
                return c.execute("SELECT job_id, state FROM jobs").fetchall()
        except sqlite3.Error:  # not created yet
            return []

    deadline = time.monotonic() + 60
    while not jobs() and time.monotonic() < deadline:
        time.sleep(0.1)
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    [(job, state)] = jobs()
    assert state == "submitted"
    left = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], env=env, capture_output=True, text=True)
    assert left.stdout.strip() in ("PENDING", "RUNNING", "CONFIGURING"), left  # it outlived its runner

    out = nearmetal("study", str(study), "--db", str(db), "--resume", "--no-progress", "--out", str(tmp_path),
                    env=slurm_env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert f"cancelled 1 batch job(s) left by an earlier runner: {job}" in " ".join(out.stderr.split())
    state = subprocess.run(["scontrol", "show", "job", job], env=env, capture_output=True, text=True).stdout
    assert "JobState=CANCELLED" in state or not state.strip(), state
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT state FROM jobs WHERE job_id=?", (job,)).fetchone() == ("cancelled on resume",)
        runs = c.execute("SELECT status, (SELECT COUNT(*) FROM records WHERE run_id = runs.id) FROM runs").fetchall()
    assert runs == [("ok", 1)]


def test_a_heterogeneous_study_benchmark_is_a_heterogeneous_batch_job_per_run(slurm_env, default_image, tmp_path):
    """`components` under scheduler = "slurm": each run is an `#SBATCH hetjob` job whose srun
    step shares one MPI_COMM_WORLD (the coupled kernel says mpmd, 1 atm + 1 ocn rank), natively
    and in a container; `--submit` refuses it in one line before anything is planned."""
    import json
    import sqlite3

    small = '"--couplings", "4", "--atm-nx", "48", "--atm-ny", "24", "--ocn-nx", "72", "--ocn-ny", "36"'
    study = tmp_path / "s.toml"
    study.write_text(f"""
[study]
name = "het-study"
repetitions = 1
warmup = 0
timeout = 120
scheduler = "slurm"
[matrix]
mode = ["native", "hybrid"]
runtime = ["charliecloud"]
mpi = ["mpich"]
[[benchmark]]
name = "coupled-mpmd"
kernel = "coupled"
components = [{{ranks = 1, args = ["--role", "atm", {small}]}}, {{ranks = 1, args = ["--role", "ocn", {small}]}}]
""")
    refused = nearmetal("study", str(study), "--submit", "--db", str(tmp_path / "r" / "s.db"), env=slurm_env)
    err = assert_one_line_error(refused)
    assert "a heterogeneous (MPMD) benchmark (coupled-mpmd) does not run inside one runner job" in err
    assert not (tmp_path / "r").exists()
    db = tmp_path / "s.db"
    out = nearmetal("study", str(study), "--db", str(db), "--no-progress", "--out", str(tmp_path), env=slurm_env,
                    timeout=400)
    assert out.returncode == 0, out.stderr
    con = sqlite3.connect(db)
    runs = con.execute("SELECT status, argv_json, stderr_tail FROM runs").fetchall()
    assert len(runs) == 2 and all(s == "ok" for s, _, _ in runs), runs
    assert all(" : " in " ".join(json.loads(a)) for _, a, _ in runs)
    points = [json.loads(p) for (p,) in con.execute("SELECT point_json FROM records WHERE metric = 'exchanges'")]
    assert len(points) == 2 and all((p["launch"], p["atm_ranks"], p["ocn_ranks"]) == ("mpmd", 1, 1) for p in points)
