"""examples/seeds/: one study file per seed study, each stating the paper's findings as
[[finding]] entries. Every file parses and names only real benchmarks and variants (unit),
passes a real --dry-run (every run planned, nothing created), and the quickest runs end to end
with its report opening with the findings. Seed 001 runs GROMACS on a run input shipped beside
the seeds, made from the text files there by the commands its README gives."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import nearmetal

ROOT = Path(__file__).resolve().parents[1]
SEEDS = sorted((ROOT / "examples" / "seeds").glob("*.toml"))
WATER = ROOT / "examples" / "seeds" / "inputs" / "gromacs-water"


def test_there_is_one_study_per_seed_that_can_run_here():
    """And seed 001's GPU experiments beside its CPU ones (planned only where a GPU is)."""
    assert [p.name for p in SEEDS if p.name != "001-gpus.toml"] == ["000-mpi-models.toml", "001-runtimes.toml",
                                                                   "002-image-audit.toml", "003-container-os.toml",
                                                                   "004-parallel-io.toml"]
    assert (ROOT / "examples" / "seeds" / "001-gpus.toml") in SEEDS


def _has_gpu():
    from nearmetal.discovery.gpu import discover

    return bool(discover()["gpus"])


@pytest.mark.unit
@pytest.mark.parametrize("path", SEEDS, ids=lambda p: p.name)
def test_a_seed_study_states_its_findings(path):
    from nearmetal.study.plan.study_file import parse

    cfg = parse(path.read_text(), source=path.name)
    assert cfg.finding, "a seed study states the paper's findings"
    assert cfg.study.name.startswith("seed" + path.name[:3])
    for f in cfg.finding:
        assert f.source.startswith(f"seed {path.name[:3]}") and f.statement.endswith(".")
    text = path.read_text()
    assert "# Run:" in text and "# Scale:" in text  # how to run it here, and how on a cluster


@pytest.mark.parametrize("path", SEEDS, ids=lambda p: p.name)
def test_a_seed_study_dry_runs(path, tmp_path):
    """From the repository root, as the seeds' headers say (seed 001's input path is relative to it)."""
    out = nearmetal("study", path, "--dry-run", "--db", tmp_path / "r" / "study.db", cwd=ROOT)
    if path.name == "001-gpus.toml" and not _has_gpu():  # says so in one line, plans nothing
        assert out.returncode == 2 and out.stdout == "", out.stdout[:2000]
        assert out.stderr.count("\n") == 1 and "this machine has no NVIDIA GPU" in out.stderr, out.stderr
        assert out.stderr.rstrip().endswith("left out of study 'seed001-gpus': nothing to plan"), out.stderr
        assert not (tmp_path / "r").exists()
        return
    assert out.returncode == 0, out.stderr
    assert re.search(r"^\s+1 (warmup|block 0) ", out.stdout, re.M), out.stdout[:2000]
    assert not (tmp_path / "r").exists()


def test_seed_001_gpus_plans_nothing_on_a_machine_without_a_gpu(tmp_path):
    """Not a dry run: `nearmetal study` itself refuses in one line, before a database exists."""
    if _has_gpu():
        pytest.skip("this machine has a GPU: the study runs here (bench/gpu_check.sh checks GPU machines)")
    db = tmp_path / "r" / "study.db"
    out = nearmetal("study", ROOT / "examples" / "seeds" / "001-gpus.toml", "--db", db, cwd=ROOT)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1, out.stderr
    assert "this machine has no NVIDIA GPU" in out.stderr and re.search(r"the \d+ cells of GPU benchmarks", out.stderr)
    assert not (tmp_path / "r").exists()


def test_seed_003_runs_and_reports_its_findings_first(tmp_path, default_image, bullseye_image, trixie_image):
    """A quick seed end to end (bw, bibw, alltoall natively and in Apptainer with three
    container OSes; where Apptainer is not installed its cells are left out and its findings
    say so): every finding gets a verdict with figures or a reason, and the report starts
    with them."""
    path = next(p for p in SEEDS if p.name.startswith("003"))
    out = nearmetal("study", path, "--db", tmp_path / "r" / "study.db", cwd=tmp_path, timeout=900)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert text.lstrip().startswith("Findings"), text[:1500]
    lines = [line for line in text.splitlines() if re.match(r"(REPRODUCED|NOT REPRODUCED|UNDECIDED|NOT MEASURABLE "
                                                             r"HERE): ", line)]
    assert len(lines) == 10, text[:3000]
    html = (tmp_path / "r" / "report.html").read_text()
    assert html.index('id="findings"') < html.index('id="answer"')


@pytest.mark.unit
def test_seed_001_runs_gromacs_natively_in_containers_and_over_tcp(monkeypatch):
    """The paper's real application: Debian's gmx_mpi on the shipped topol.tpr, natively and in
    the image whose build command the header gives, and natively on an isolated network; its
    findings compare ns/day (higher is better: "slower" means fewer ns/day)."""
    from nearmetal.study.plan.study_file import parse

    path = next(p for p in SEEDS if p.name == "001-runtimes.toml")
    monkeypatch.chdir(ROOT)  # inputs are relative to the current directory: the seeds run from the root
    text = path.read_text()
    cfg = parse(text, source=path.name)
    gmx = {b.label: b for b in cfg.benchmark if b.command and b.command[0] == "gmx_mpi"}
    assert set(gmx) == {"gromacs", "gromacs-network"}
    for b in gmx.values():
        assert b.command[1] == "mdrun" and b.preset == "gromacs" and b.metrics == ["ns_per_day"]
        assert b.inputs == [str(WATER / "topol.tpr")]
    (image,) = gmx["gromacs"].image
    assert f"nearmetal image build --mpi openmpi --name {image} --packages gromacs --format podman" in text
    assert gmx["gromacs-network"].mode == ["native"] and gmx["gromacs-network"].network == ["host", "isolated"]
    found = {f.id: f for f in cfg.finding if f.benchmark in gmx}
    assert {f.expect for f in found.values()} == {"same", "slower"}
    assert all(f.metric == "ns_per_day" for f in found.values())
    assert found["gromacs-tcp-on-one-node"].variant == "native/openmpi+isolated"
    tpr = WATER / "topol.tpr"
    assert tpr.read_bytes()[8:30] == b"VERSION 2022.5-Debian_"  # a GROMACS 2022.5 run input (XDR)
    assert tpr.stat().st_size < 64 << 10


def test_seed_001_gromacs_input_is_made_by_its_readme_commands(tmp_path):
    """The README's commands, run on the shipped md.mdp and topol.top, make a topol.tpr whose
    contents (gmx dump) are the shipped one's: the binary input is reproducible from its text
    (set-up installs Debian's gromacs, as for tests/test_applications.py)."""
    commands = re.findall(r"^(gmx_mpi (?:solvate|grompp) [^#\n]*?)\s*(?:#.*)?$", (WATER / "README.md").read_text(), re.M)
    assert [c.split()[1] for c in commands] == ["solvate", "grompp"]
    made = tmp_path / "made"
    made.mkdir()
    for name in ("md.mdp", "topol.top"):
        shutil.copy(WATER / name, made)
    for command in commands:
        subprocess.run(command.split(), cwd=made, check=True, capture_output=True, timeout=120)
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    shutil.copy(WATER / "topol.tpr", shipped)

    def dump(d):
        out = subprocess.run(["gmx_mpi", "dump", "-s", "topol.tpr"], cwd=d, check=True, capture_output=True,
                             text=True, timeout=120)
        return out.stdout

    assert "natoms = 663" in dump(shipped)
    assert dump(made) == dump(shipped)
