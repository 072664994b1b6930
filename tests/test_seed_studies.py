"""examples/seeds/: one study file per seed study, each stating the paper's findings as
[[finding]] entries. Every file parses and names only real benchmarks and variants (unit),
passes a real --dry-run (every run planned, nothing created), and the quickest runs end to end
with its report opening with the findings."""

import re
from pathlib import Path

import pytest

from conftest import nearmetal

SEEDS = sorted((Path(__file__).resolve().parents[1] / "examples" / "seeds").glob("*.toml"))


def test_there_is_one_study_per_seed_that_can_run_here():
    assert [p.name[:3] for p in SEEDS] == ["000", "001", "002", "003", "004"]


@pytest.mark.unit
@pytest.mark.parametrize("path", SEEDS, ids=lambda p: p.name)
def test_a_seed_study_states_its_findings(path):
    from nearmetal.study.config import parse

    cfg = parse(path.read_text(), source=path.name)
    assert cfg.finding, "a seed study states the paper's findings"
    assert cfg.study.name.startswith("seed" + path.name[:3])
    for f in cfg.finding:
        assert f.source.startswith(f"seed {path.name[:3]}") and f.statement.endswith(".")
    text = path.read_text()
    assert "# Run:" in text and "# Scale:" in text  # how to run it here, and how on a cluster


@pytest.mark.parametrize("path", SEEDS, ids=lambda p: p.name)
def test_a_seed_study_dry_runs(path, tmp_path):
    out = nearmetal("study", path, "--dry-run", "--db", tmp_path / "r" / "study.db", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert re.search(r"^\s+1 (warmup|block 0) ", out.stdout, re.M), out.stdout[:2000]
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
    assert len(lines) == 9, text[:3000]
    html = (tmp_path / "r" / "report.html").read_text()
    assert html.index('id="findings"') < html.index('id="answer"')
