"""A study with a GPU benchmark beside a CPU one, run for real on this machine: without a GPU
the GPU benchmark's cells are left out in one line (in the dry run too) and the CPU
benchmark's runs are planned, run and stored; the store holds no run of the GPU benchmark.
(On a GPU machine the GPU cells would run: there the test says so and skips.)"""

import sqlite3

import pytest

from conftest import nearmetal

STUDY = """\
[study]
name = "gpu-mixed"
repetitions = 2
warmup = 0
seed = 5
timeout = 120

[matrix]
mode = ["native"]
mpi = ["mpich"]
ranks = [2]

[[benchmark]]
kernel = "allgather"

[[benchmark]]
name = "gpu-stream"
kernel = "stream"
gpus = ["", "all"]
"""


@pytest.fixture
def no_gpu():
    from nearmetal.discovery.gpu import discover

    if discover()["gpus"]:
        pytest.skip("this machine has a GPU: its GPU cells run here (tests/test_gpu.py covers GPU machines)")


def test_a_gpu_benchmarks_cells_are_left_out_and_the_rest_runs(tmp_path, no_gpu):
    path = tmp_path / "s.toml"
    path.write_text(STUDY)
    dry = nearmetal("study", path, "--dry-run", cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    line = ("# this machine has no NVIDIA GPU (no driver in /proc/driver/nvidia, no NVML, no nvidia-smi): the 2 cells "
            "of GPU benchmarks are left out of study 'gpu-mixed'")
    assert line in dry.stdout.splitlines()
    assert "gpu-stream" not in dry.stdout.replace(line, "") and dry.stdout.count("allgather|n=2") == 2
    db = tmp_path / "r" / "study.db"
    out = nearmetal("study", path, "--db", db, "--no-progress", cwd=tmp_path, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert line[2:] in " ".join(out.stderr.split())  # the console wraps it: the same words
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT benchmark, status FROM runs").fetchall()
    assert sorted(rows) == [("allgather", "ok"), ("allgather", "ok")]
