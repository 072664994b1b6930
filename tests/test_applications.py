"""Real applications as benchmarks: GROMACS (gmx_mpi), HPCC and Quantum ESPRESSO (pw.x),
Debian's builds (Open MPI), with their presets read from their real output; and real
studies of GROMACS and HPCC native vs hybrid vs bind on Charliecloud and Apptainer in an
image built with --packages. Bind runs are Open MPI only here: the programs are built with
Open MPI (an MPICH-built program's bind runs are covered by the recipe test)."""

import json
import shutil
import sqlite3

import pytest

from app_inputs import APP_IMAGE, APP_PACKAGES, gromacs_tpr, hpcc_input, qe_input
from conftest import nearmetal

pytestmark = pytest.mark.integration


def test_the_applications_are_installed():
    """scripts/setup.sh --test installs them: every test below needs them."""
    assert all(shutil.which(p) for p in ("gmx_mpi", "hpcc", "pw.x"))


@pytest.fixture(scope="session")
def app_image():
    """The applications' image: the default recipe plus Debian's gromacs, hpcc and quantum-espresso."""
    out = nearmetal("image", "build", "--mpi", "openmpi", "--name", APP_IMAGE, "--packages", APP_PACKAGES,
                    timeout=1800)
    assert out.returncode == 0, out.stderr[-2000:]
    return APP_IMAGE


def bench_json(*argv, workdir):
    out = nearmetal("bench", "--command", "--mpi", "openmpi", "--json", "--workdir", str(workdir), *argv)
    assert out.returncode == 0, out.stderr[-2000:]
    return {r["metric"]: r for r in (json.loads(l) for l in out.stdout.splitlines() if l.startswith("{"))}


def test_gromacs_preset_reads_real_mdrun_output(tmp_path):
    tpr = gromacs_tpr(tmp_path, nsteps=500)
    got = bench_json("--preset", "gromacs", "--", "gmx_mpi", "mdrun", "-s", tpr, "-ntomp", "1", workdir=tmp_path)
    assert got["ns_per_day"]["unit"] == "ns/day" and got["ns_per_day"]["value"] > 0
    assert 0 < got["mdrun_wall"]["value"] <= got["wall_time"]["value"]


def test_hpcc_preset_reads_every_summary_figure(tmp_path):
    hpcc_input(tmp_path)
    got = bench_json("--preset", "hpcc", "--", "hpcc", workdir=tmp_path)
    for metric, unit in (("hpl", "TFLOP/s"), ("star_stream_triad", "GB/s"), ("ptrans", "GB/s"),
                         ("mpi_random_access", "GUP/s"), ("pingpong_latency", "us"), ("pingpong_bandwidth", "GB/s"),
                         ("ring_latency", "us"), ("ring_bandwidth", "GB/s")):
        assert got[metric]["unit"] == unit and got[metric]["value"] > 0, metric


def test_quantum_espresso_preset_reads_pwscf_times(tmp_path):
    pw_in, _ = qe_input(tmp_path)
    got = bench_json("--preset", "qe", "--", "pw.x", "-in", pw_in, workdir=tmp_path)
    assert got["pwscf_wall"]["value"] > 0 and got["pwscf_cpu"]["value"] > 0


def test_a_preset_that_does_not_match_the_program_fails_in_one_line(tmp_path):
    hpcc_input(tmp_path)
    out = nearmetal("bench", "--command", "--mpi", "openmpi", "--preset", "gromacs", "--workdir", str(tmp_path),
                    "--", "hpcc")
    assert out.returncode == 2 and "wrote no file 'md.log'" in out.stderr.strip().splitlines()[-1]


def _study(tmp_path, name, bench):
    path = tmp_path / f"{name}.toml"
    path.write_text(f"""
[study]
name = "{name}"
repetitions = 3
seed = 11
timeout = 300
missing_runtimes = "skip"
[baseline]
mode = "native"
[matrix]
mode = ["native", "hybrid", "bind"]
runtime = ["charliecloud", "apptainer"]
mpi = ["openmpi"]
image = ["{APP_IMAGE}"]
[[benchmark]]
{bench}""")
    db = tmp_path / f"{name}.db"
    out = nearmetal("study", str(path), "--db", str(db), "--out", str(tmp_path / "report"), "--no-progress",
                    timeout=1800)
    assert out.returncode == 0, out.stderr[-3000:]
    con = sqlite3.connect(db)
    try:
        statuses = dict(con.execute("select status, count(*) from runs where warmup = 0 group by status"))
        metrics = {(v, m) for v, m in con.execute(
            "select distinct r.variant, x.metric from runs r join records x on x.run_id = r.id")}
        contexts = {v: json.loads(c) for v, c in con.execute(
            "select distinct r.variant, c.context_json from runs r join contexts c on c.id = r.context_id")}
    finally:
        con.close()
    html = (tmp_path / "report" / "report.html").read_text()
    return statuses, metrics, html, out, contexts


def _variants():
    from nearmetal import runtimes

    names = ["charliecloud"] + (["apptainer"] if runtimes.get("apptainer").path() else [])
    return ["native/openmpi"] + [f"{m}/{r}/openmpi/{APP_IMAGE}" for m in ("hybrid", "bind") for r in names]


def test_gromacs_study_native_hybrid_bind(tmp_path, app_image):
    tpr = gromacs_tpr(tmp_path / "inputs", nsteps=4000)
    statuses, metrics, html, out, contexts = _study(tmp_path, "gromacs", f"""
name = "water"
command = ["gmx_mpi", "mdrun", "-s", "topol.tpr", "-ntomp", "1"]
inputs = ["{tpr}"]
preset = "gromacs"
""")
    variants = _variants()
    assert statuses == {"ok": 3 * len(variants)}
    for v in variants:
        assert {(v, "ns_per_day"), (v, "mdrun_wall"), (v, "wall_time")} <= metrics, v
    assert "ns_per_day" in html and "water" in html
    # provenance: the file each variant ran, its digest, GROMACS's own version, the input's digest
    import hashlib

    tpr_digest = "sha256:" + hashlib.sha256(open(tpr, "rb").read()).hexdigest()
    native = contexts["native/openmpi"]["program"]
    assert native["path"] == "/usr/bin/gmx_mpi" and native["sha256"].startswith("sha256:")
    assert native["version"].startswith("2022") and native["inputs"] == {"topol.tpr": tpr_digest}
    bind = contexts[f"bind/charliecloud/openmpi/{APP_IMAGE}"]["program"]
    assert bind["path"] == "/usr/bin/gmx_mpi" and bind["version"] == native["version"]
    assert "sha256" in html
    # a verdict for every container variant on ns/day, in the terminal summary
    for v in variants[1:]:
        assert v.replace(f"/{APP_IMAGE}", "") in out.stdout or v in out.stdout


def test_hpcc_study_native_hybrid_bind(tmp_path, app_image):
    hpccinf = hpcc_input(tmp_path / "inputs")
    statuses, metrics, html, _, contexts = _study(tmp_path, "hpcc", f"""
command = ["hpcc"]
inputs = ["{hpccinf}"]
preset = "hpcc"
""")
    variants = _variants()
    assert statuses == {"ok": 3 * len(variants)}
    for v in variants:
        assert {(v, "hpl"), (v, "star_stream_triad"), (v, "ptrans"), (v, "ring_latency")} <= metrics, v
    assert "star_stream_triad" in html
