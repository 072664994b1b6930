"""`nearmetal study --submit` on a real local Slurm cluster: the runner as one batch job whose
time limit cuts the study in the middle, the follow-on job resuming it exactly, placement
across nodes, and the store kept in its cluster-file-system mode (runner-local copy written
back after every run)."""

import sqlite3
import subprocess
import time

import pytest

from conftest import local_slurm_env, nearmetal


@pytest.fixture(scope="module")
def slurm_env(tmp_path_factory):
    yield from local_slurm_env(tmp_path_factory, nodes=3)


STUDY = """
[study]
name = "chain"
scheduler = "slurm"
repetitions = 12
warmup = 0
timeout = 60
[slurm]
time = "1"
[matrix]
mode = ["native"]
mpi = ["openmpi"]
nodes = [1, 2]
ranks_per_node = [1]
[[benchmark]]
name = "where"
command = ["sh", "-c", "echo $SLURMD_NODENAME >> ../nodes.$SLURM_JOB_ID.$SLURM_STEP_ID; sleep 4"]
"""


def _queued(env):
    out = subprocess.run(["squeue", "-h", "-n", "nearmetal-study", "-o", "%i %T"], capture_output=True, text=True,
                         env=env, timeout=30)
    return out.stdout.split()


def test_a_submitted_study_survives_its_time_limit_and_completes_in_the_follow_on(slurm_env, tmp_path):
    env = dict(slurm_env, NEARMETAL_STORE_MODE="copy")
    study = tmp_path / "chain.toml"
    study.write_text(STUDY)
    db = tmp_path / "results" / "study.db"
    t0 = time.monotonic()
    out = nearmetal("study", study, "--db", db, "--submit", env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert time.monotonic() - t0 < 30  # queued, not run: the runner is the batch job
    assert "24 runs to do, submitted as batch job" in " ".join(out.stderr.split())
    deadline = time.monotonic() + 480  # 24 runs of 4 s, with 1-minute jobs: 2 or 3 of them
    while _queued(env):
        assert time.monotonic() < deadline, "the study's batch jobs did not finish in 8 minutes"
        time.sleep(3)

    con = sqlite3.connect(db)
    assert con.execute("SELECT status, count(*) FROM runs GROUP BY status").fetchall() == [("ok", 24)]
    states = [s for (s,) in con.execute("SELECT state FROM jobs WHERE run_id IS NULL ORDER BY id")]
    started = [s for s in states if s.startswith("runner started")]
    assert states[0] == "runner started 0" and len(started) >= 1, states  # cut short by its limit
    assert states[-2:] == ["runner ended", "runner cancelled"], states  # the last follow-on was not needed
    assert len(states) >= 3, states
    # each job ran its runs in the plan's (block) order
    rows = con.execute("SELECT position, started FROM runs ORDER BY position").fetchall()
    assert [s for _, s in rows] == sorted(s for _, s in rows)
    con.close()

    outputs = sorted((db.parent / "runner-jobs").glob("runner-*.out"))
    first = " ".join(outputs[0].read_text().split())
    assert "is ending (its time limit, or cancelled): the run it cut short stays planned" in first
    assert "study chain is complete" in " ".join(outputs[-1].read_text().split())
    assert (db.parent / "report.html").exists()

    # 2-node cells really ran on two nodes, 1-node cells on one
    spreads = {len(set(f.read_text().split())) for f in (db.parent / "nm-runs").glob("nodes.*")}
    assert spreads == {1, 2}
    # the shared database is a complete rollback-journal file: readable from any host, no -wal beside it
    assert db.read_bytes()[18:20] == b"\x01\x01"
    assert not (db.parent / "study.db-wal").exists()
