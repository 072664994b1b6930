"""The study engine end to end: validation, planning, real runs into SQLite, failures,
timeouts, SIGKILL and --resume."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import NEARMETAL, assert_one_line_error, nearmetal
from nearmetal.errors import NearmetalError
from nearmetal.study.plan import study_file as config_mod
from nearmetal.study.plan.plan import cells, make_plan

SMALL = """
[study]
name = "{name}"
repetitions = {reps}
warmup = {warmup}
timeout = {timeout}
seed = 7

[matrix]
mode = ["native"]
mpi = ["openmpi", "mpich"]

[[benchmark]]
kernel = "pingpong"
args = {args}
"""


def write_study(tmp_path, name="s", reps=3, warmup=0, timeout=120, args='["-s", "8", "-i", "200", "-x", "20"]', extra=""):
    path = tmp_path / f"{name}.toml"
    path.write_text(SMALL.format(name=name, reps=reps, warmup=warmup, timeout=timeout, args=args) + extra)
    return path


@pytest.mark.parametrize("body, expect", [
    ("[study]\nname='x'\n[[benchmark]]\nkernel='pingpong'\nbogus=1\n", "benchmark[0].bogus: unknown key"),
    ("[study]\nname='x'\nrepetitions='many'\n[[benchmark]]\nkernel='pingpong'\n", "study.repetitions"),
    ("[study]\nname='x'\n[[benchmark]]\nkernel='nope'\n", "unknown kernel 'nope'"),
    ("[study]\nname='x'\n[matrix]\nmode=['teleport']\n[[benchmark]]\nkernel='pingpong'\n", "matrix.mode[0]"),
    ("[study]\nname='x'\n[matrix]\nranks=[1,2]\nthreads=[1]\nzips=[['ranks','threads']]\n[[benchmark]]\nkernel='pingpong'\n",
     "equal lengths"),
    ("[study]\nname='x'\n", "benchmark: required key is missing"),
    ("[study\nname='x'\n", "not valid TOML"),
])
def test_validation_errors_name_file_and_key(tmp_path, body, expect):
    path = tmp_path / "bad.toml"
    path.write_text(body)
    out = nearmetal("study", str(path), "--db", str(tmp_path / "db.sqlite"))
    err = assert_one_line_error(out)
    assert str(path) in err and expect in err
    # refused before anything is written: no database (nor its -wal/-journal files)
    assert [p.name for p in tmp_path.iterdir()] == ["bad.toml"]


def test_plan_matrix_zips_excludes_and_blocks():
    cfg = config_mod.parse("""
[study]
name = "m"
repetitions = 4
warmup = 1
seed = 3
[matrix]
mode = ["native", "hybrid", "bind"]
runtime = ["charliecloud", "bwrap"]
mpi = ["openmpi", "mpich"]
ranks = [4, 2, 1]
threads = [1, 2, 4]
zips = [["ranks", "threads"]]
exclude = [{mode = "bind", runtime = "bwrap"}]
[[benchmark]]
kernel = "pingpong"
""")
    cs = cells(cfg)
    # native: 2 MPIs (runtime collapses); hybrid: 2 runtimes x 2; bind: 1 runtime x 2 -> 8 variants x 3 zipped placements
    assert len(cs) == 8 * 3
    assert {(c.ranks, c.threads) for c in cs} == {(4, 1), (2, 2), (1, 4)}
    assert not [c for c in cs if c.variant["mode"] == "bind" and c.variant["runtime"] == "bwrap"]
    runs = make_plan(cfg, seed=3)
    assert len(runs) == len(cs) * (1 + 4)
    blocks = {}
    for r in runs:
        if not r.warmup:
            blocks.setdefault(r.block, []).append(r.cell.key)
    assert all(sorted(b) == sorted(c.key for c in cs) for b in blocks.values())   # every cell once per block
    assert len({tuple(b) for b in blocks.values()}) > 1                            # shuffled
    again = [r.key for r in make_plan(cfg, seed=3)]
    assert again == [r.key for r in runs]                                          # reproducible from the seed


def test_dry_run_prints_every_run_with_argv(tmp_path):
    path = write_study(tmp_path, reps=2)
    out = nearmetal("study", str(path), "--dry-run")
    assert out.returncode == 0, out.stderr
    argv_lines = [l for l in out.stdout.splitlines() if "nm-pingpong" in l]
    assert len(argv_lines) == 4 and any("mpirun" in l for l in argv_lines) and any("mpiexec" in l for l in argv_lines)


def test_the_quickstart_dry_run_says_each_working_directory_once(tmp_path):
    """Its I/O benchmarks are one entry per MPI family: the dry run said each one's /dev/shm twice."""
    out = nearmetal("study", "--dry-run", cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr
    said = [l for l in out.stdout.splitlines() if ": working directory " in l]
    assert "# benchmark io-serial: working directory /dev/shm (exists)" in said
    assert len(said) == len(set(said)), said


def _db_rows(db, sql):
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_real_study_stores_runs_and_reports(tmp_path):
    path = write_study(tmp_path, reps=3, warmup=1)
    db = tmp_path / "s.db"
    out = nearmetal("study", str(path), "--db", str(db), "--no-progress", timeout=600)
    assert out.returncode == 0, out.stderr
    rows = _db_rows(db, "SELECT status, warmup, COUNT(*) FROM runs GROUP BY status, warmup")
    assert sorted(rows) == [("ok", 0, 6), ("ok", 1, 2)]
    recs = _db_rows(db, "SELECT metric, COUNT(*) FROM records GROUP BY metric")
    assert dict(recs) == {"latency": 8, "bandwidth": 8}
    ctx = [json.loads(r[0]) for r in _db_rows(db, "SELECT context_json FROM contexts")]
    assert all(c["nearmetal_version"] and c["cpu"]["model"] and c["mpi"] for c in ctx)
    argv = [json.loads(r[0]) for r in _db_rows(db, "SELECT argv_json FROM runs")]
    assert all("nm-pingpong" in " ".join(a) for a in argv)
    assert "report:" in out.stdout and (tmp_path / "report.html").exists()
    again = nearmetal("study", str(path), "--db", str(db))
    assert "--resume" in assert_one_line_error(again)


def test_failed_and_timed_out_runs_are_recorded_and_the_study_goes_on(tmp_path):
    extra = """
[[benchmark]]
kernel = "pingpong"
name = "broken"
args = ["-q"]

[[benchmark]]
kernel = "pingpong"
name = "slow"
args = ["-s", "8", "-i", "2000000000"]
"""
    path = write_study(tmp_path, reps=1, timeout=3, extra=extra)
    db = tmp_path / "f.db"
    t0 = time.monotonic()
    out = nearmetal("study", str(path), "--db", str(db), "--no-progress", timeout=600)
    assert time.monotonic() - t0 < 120
    rows = dict(((b, s), n) for b, s, n in _db_rows(db, "SELECT benchmark, status, COUNT(*) FROM runs GROUP BY benchmark, status"))
    assert rows == {("pingpong", "ok"): 2, ("broken", "failed"): 2, ("slow", "timeout"): 2}
    tails = [r[0] for r in _db_rows(db, "SELECT stderr_tail FROM runs WHERE benchmark='broken'")]
    assert all("invalid option" in t or "usage" in t for t in tails)
    # no rank of a timed-out run survives its process group
    left = subprocess.run(["pgrep", "-f", "nm-pingpong -s 8 -i 2000000000"], capture_output=True, text=True)
    assert left.stdout.strip() == ""


def test_sigkill_then_resume_completes_exactly_the_missing_runs(tmp_path):
    path = write_study(tmp_path, name="k", reps=6)
    db = tmp_path / "k.db"
    env = dict(os.environ)
    proc = subprocess.Popen([str(NEARMETAL), "study", str(path), "--db", str(db), "--no-progress"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    done = 0
    while time.monotonic() < deadline:
        time.sleep(0.2)
        if db.exists():
            try:
                done = _db_rows(db, "SELECT COUNT(*) FROM runs WHERE status='ok'")[0][0]
            except sqlite3.OperationalError:
                continue
            if done >= 3:
                break
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    finished = _db_rows(db, "SELECT run_key FROM runs WHERE status='ok'")
    assert 3 <= len(finished) < 12
    out = nearmetal("study", str(path), "--db", str(db), "--resume", "--no-progress", timeout=600)
    assert out.returncode == 0, out.stderr
    rows = _db_rows(db, "SELECT run_key, status FROM runs")
    assert len(rows) == 12 and all(s == "ok" for _, s in rows)
    assert len({k for k, _ in rows}) == 12
    per_run = _db_rows(db, "SELECT run_id, COUNT(*) FROM records GROUP BY run_id")
    assert len(per_run) == 12 and all(n == 2 for _, n in per_run)   # one latency + one bandwidth each, no duplicates
    # runs finished before the kill were not repeated
    kept = {k for (k,) in finished}
    assert kept <= {k for k, _ in rows}


def test_resume_refuses_a_changed_study_file(tmp_path):
    path = write_study(tmp_path, name="c", reps=1)
    db = tmp_path / "c.db"
    assert nearmetal("study", str(path), "--db", str(db), "--no-progress", timeout=300).returncode == 0
    path.write_text(path.read_text().replace("repetitions = 1", "repetitions = 2"))
    err = assert_one_line_error(nearmetal("study", str(path), "--db", str(db), "--resume"))
    assert "different study file" in err


def test_import_aquaplanet_table3(tmp_path):
    """Seed 000, Table 3: hybrid 12% -> 102% slower than bare metal, bind within 1-7%."""
    csv_path = Path(__file__).resolve().parents[1] / "examples" / "aquaplanet_table3.csv"
    db = tmp_path / "a.db"
    out = nearmetal("import", str(csv_path), "--study", "aquaplanet", "--baseline", "bare-metal", "--db", str(db),
                    "--out", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "report.html").exists()
    out = nearmetal("report", "--db", str(db), "--format", "json", "--out", str(tmp_path))
    assert out.returncode == 0, out.stderr
    analysis = json.loads((tmp_path / "analysis.json").read_text())
    ratios = {(p["variant"], p["point"]["cores"]): p["comparison"]["ratio"] for p in analysis["points"] if p["comparison"]}
    assert ratios[("hybrid", 216)] == pytest.approx(1745.50 / 1533.07)
    assert ratios[("hybrid", 1728)] == pytest.approx(2.016, abs=0.001)
    assert all(0.98 < ratios[("bind", c)] < 1.07 for c in (216, 384, 432, 576, 864, 1152, 1728))
    # one run per point: nothing can be said about noise
    assert {p["comparison"]["verdict"] for p in analysis["points"] if p["comparison"]} == {"inconclusive"}


def test_import_summary_rows(tmp_path):
    csv_path = tmp_path / "s.csv"
    csv_path.write_text("variant,metric,unit,size,mean,n,std\n"
                        "native,latency,us,8,1.00,20,0.01\nbind,latency,us,8,1.005,20,0.01\n"
                        "hybrid,latency,us,8,1.50,20,0.02\n")
    db = tmp_path / "s.db"
    out = nearmetal("import", str(csv_path), "--study", "s", "--baseline", "native", "--db", str(db),
                    "--out", str(tmp_path))
    assert out.returncode == 0, out.stderr
    nearmetal("report", "--db", str(db), "--format", "json", "--out", str(tmp_path), check=True)
    pts = {p["variant"]: p for p in json.loads((tmp_path / "analysis.json").read_text())["points"]}
    assert pts["bind"]["comparison"]["verdict"] == "equivalent"
    assert pts["hybrid"]["comparison"]["verdict"] == "slower"


@pytest.mark.parametrize("content, baseline, expect", [
    ("metric,value\nx,1\n", "native", "variant"),
    ("variant,metric,value\nnative,t,abc\n", "native", "line 2"),
    ("variant,metric,value\nnative,t,1\n", "bare", "baseline variant 'bare'"),
    ("variant,metric,mean\nnative,t,1\n", "native", "summary rows"),
])
def test_import_bad_input(tmp_path, content, baseline, expect):
    p = tmp_path / "bad.csv"
    p.write_text(content)
    err = assert_one_line_error(nearmetal("import", str(p), "--study", "b", "--baseline", baseline,
                                          "--db", str(tmp_path / "b.db")))
    assert expect in err
