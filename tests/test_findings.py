"""[[finding]] entries: validated with the study file, evaluated on the study's own points
(analysis/findings.py), rendered first in every report. Unit tests on hand-made analyses whose
true ratios are known; the seed studies run them for real (tests/test_seed_studies.py)."""

import json
import math

import numpy as np
import pytest

from nearmetal.errors import NearmetalError
from nearmetal.study.plan.study_file import parse
from nearmetal.analysis.findings import evaluate

pytestmark = pytest.mark.unit

STUDY = """
[study]
name = "f"
repetitions = 12
margin = 0.05
[baseline]
mode = "native"
[matrix]
mode = ["native", "bind"]
runtime = ["charliecloud"]
mpi = ["openmpi"]
[[variant]]
name = "generic"
mode = "hybrid"
mpi = "openmpi"
env = {OMPI_MCA_btl = "self,tcp"}
[[benchmark]]
kernel = "allgather"
[[benchmark]]
kernel = "cg"
name = "cg-fast"
[[benchmark]]
kernel = "cg-portable"
name = "cg-slow"
"""

BIND = "bind/charliecloud/openmpi/default"


def toml_value(v):
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + "}"
    return json.dumps(v)


def finding(**kw):
    return "[[finding]]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in kw.items())


def analysis_of(effects, blocks=12, noise=0.01, seed=1):
    """Points of allgather (latency at 3 sizes, us) and of two cg benchmarks (GFLOP/s, higher
    is better) for native/openmpi, bind and generic; `effects[(variant, bench)]` multiplies
    the cost (1.3: 30% slower). Per-block noise is shared by every point of a block."""
    rng = np.random.default_rng(seed)
    shared = rng.normal(0, noise, blocks)
    points = []
    for bench, kernel, metric, unit, sizes, hib in (("allgather", "allgather", "latency", "us", (8, 1024, 65536), False),
                                                   ("cg-fast", "cg", "gflops", "GFLOP/s", (None,), True),
                                                   ("cg-slow", "cg-portable", "gflops", "GFLOP/s", (None,), True)):
        for size in sizes:
            for vid in ("native/openmpi", BIND, "generic"):
                cost = effects.get((vid, bench), 1.0)
                base = 10.0 if size is None else 1 + size / 1e4
                vals = base * np.exp(shared + rng.normal(0, noise, blocks)) * (1 / cost if hib else cost)
                point = {"size": size} if size is not None else {"simd": "sse2" if kernel == "cg-portable" else "avx2"}
                points.append({"benchmark": bench, "kernel": kernel, "metric": metric, "unit": unit,
                               "higher_is_better": hib, "point": point,
                               "ranks": 2, "threads": 1, "variant": vid, "values": vals.tolist(),
                               "blocks": list(range(blocks)), "baseline": None if vid == "native/openmpi" else
                               "native/openmpi", "comparison": None if vid == "native/openmpi" else {}})
    return {"study": {"name": "f", "margin": 0.05}, "sequential": {"ci_level": 0.95},
            "variants": [{"id": "native/openmpi", "baseline": "native/openmpi"},
                         {"id": BIND, "baseline": "native/openmpi"}, {"id": "generic", "baseline": "native/openmpi"}],
            "points": points, "environment": [{"host": "node1"}]}


def test_verdicts_follow_the_measured_ratio_and_the_expectation():
    cfg = parse(STUDY
                + finding(id="bind-same", statement="Bind performs like native.", benchmark="allgather",
                          variant=BIND, expect="same")
                + finding(id="generic-slower", statement="A generic MPI is slower.", benchmark="allgather",
                          variant="generic", baseline=BIND, expect="slower", at_least=0.1, paper="up to 2x")
                + finding(id="generic-2x", statement="A generic MPI is 2x slower.", benchmark="allgather",
                          variant="generic", baseline=BIND, expect="slower", at_least=1.0)
                + finding(id="generic-faster", statement="Wrong way round.", benchmark="allgather",
                          variant="generic", expect="faster")
                + finding(id="bind-slower", statement="Bind costs 20%.", benchmark="allgather",
                          variant=BIND, expect="slower", at_least=0.2)
                + finding(id="one-size", statement="Only at 64 KiB.", benchmark="allgather", variant="generic",
                          where={"size": 65536}, expect="slower")
                + finding(id="portable", statement="The slow build is slower.", benchmark="cg-slow",
                          baseline_benchmark="cg-fast", variant="native/openmpi", expect="slower", at_least=0.1)
                + finding(id="scale", statement="Across nodes.", benchmark="allgather", variant=BIND,
                          expect="same", needs=["multi-node"]))
    found = {f["id"]: f for f in evaluate(analysis_of({("generic", "allgather"): 1.3, ("native/openmpi", "cg-slow"): 1.4,
                                                        (BIND, "cg-slow"): 1.4, ("generic", "cg-slow"): 1.4}), cfg)}
    verdicts = {k: v["verdict"] for k, v in found.items()}
    assert verdicts == {"bind-same": "reproduced", "generic-slower": "reproduced", "generic-2x": "not reproduced",
                        "generic-faster": "not reproduced", "bind-slower": "not reproduced", "one-size": "reproduced",
                        "portable": "reproduced", "scale": "not measurable here"}
    m = found["generic-slower"]["measured"]
    assert m["n_points"] == 3 and m["n_blocks"] == 12 and m["verdict"] == "slower"
    assert m["ci_low"] < 1.3 < m["ci_high"] and abs(math.log(m["cost_ratio"] / 1.3)) < 0.02
    assert found["portable"]["measured"]["n_points"] == 1 and abs(found["portable"]["measured"]["cost_ratio"] - 1.4) < 0.03
    assert found["one-size"]["measured"]["n_points"] == 1
    assert "less than the 100%" in found["generic-2x"]["why"] and "any difference is smaller than the 20%" in found["bind-slower"]["why"]
    assert found["scale"]["why"] == "the runs used one node; the finding concerns communication between nodes"
    assert found["bind-same"]["reference"] == "native/openmpi" and found["generic-slower"]["reference"] == BIND


def test_a_side_without_results_is_not_measurable_and_noise_leaves_it_undecided():
    cfg = parse(STUDY + finding(id="a", statement="s", benchmark="allgather", variant="generic", expect="slower")
                + finding(id="b", statement="s", benchmark="allgather", variant=BIND, expect="same"))
    a = analysis_of({("generic", "allgather"): 1.05}, blocks=12, noise=0.12)
    a["points"] = [p for p in a["points"] if p["variant"] != BIND]
    found = {f["id"]: f for f in evaluate(a, cfg)}
    assert found["b"]["verdict"] == "not measurable here"
    assert found["b"]["why"].startswith(f"{BIND} has no allgather results here")
    assert found["a"]["verdict"] == "undecided" and "not decided" in found["a"]["why"]


@pytest.mark.parametrize("entry,message", [
    (finding(id="x", statement="s", benchmark="nope", variant=BIND, expect="same"),
     "finding[0].benchmark: no benchmark is named 'nope'"),
    (finding(id="x", statement="s", benchmark="allgather", variant="podman-thing", expect="same"),
     "finding[0].variant: the study has no variant 'podman-thing'"),
    (finding(id="x", statement="s", benchmark="allgather", variant=BIND, expect="same", at_least=0.1),
     "at_least applies to expect"),
    (finding(id="x", statement="s", benchmark="allgather", variant=BIND, expect="worse"),
     "finding[0].expect: Input should be 'slower', 'faster' or 'same'; found 'worse'"),
    (finding(id="x", statement="s", benchmark="allgather", variant=BIND, expect="same", needs=["gpu"]),
     "finding[0].needs[0]: Input should be 'multi-node', 'interconnect' or 'setuid'; found 'gpu'"),
    (finding(id="x", statement="s", benchmark="allgather", variant=BIND, expect="same")
     + finding(id="x", statement="t", benchmark="allgather", variant=BIND, expect="same"),
     "finding[1].id: 'x' is also the id of finding[0]"),
])
def test_bad_findings_are_refused_with_their_key(entry, message):
    with pytest.raises(NearmetalError) as e:
        parse(STUDY + entry, source="s.toml")
    assert message in str(e.value) and "\n" not in str(e.value)


def test_reports_open_with_the_findings():
    from rich.console import Console

    from nearmetal.report.summaries import findings
    from nearmetal.report.tables import render_markdown
    from nearmetal.report.terminal import render_terminal

    cfg = parse(STUDY + finding(id="bind-same", statement="Bind performs like native.", source="seed 000, Fig. 3",
                                benchmark="allgather", variant=BIND, expect="same"))
    a = analysis_of({})
    a["findings"] = evaluate(a, cfg)
    (row,) = findings(a)
    assert row["verdict"] == "reproduced" and row["compared"] == f"{BIND} allgather vs native/openmpi"
    md = render_markdown(a)
    assert md.index("## Findings") < md.index("REPRODUCED: Bind performs like native [seed 000, Fig. 3]. Here,")
    console = Console(record=True, width=200)
    render_terminal(a, console)
    text = console.export_text()
    assert text.startswith("Findings\nREPRODUCED: Bind performs like native [seed 000")


def test_findings_on_a_runtime_missing_here_parse_and_say_why(monkeypatch):
    """seed 001 names Apptainer variants: where Apptainer is not installed the study still
    parses, and those findings are not measurable here, saying why."""
    from pathlib import Path

    from nearmetal import runtimes

    monkeypatch.setattr(type(runtimes.get("apptainer")), "path", lambda self: None)
    text = (Path(__file__).resolve().parents[1] / "examples" / "seeds" / "001-runtimes.toml").read_text()
    cfg = parse(text, source="001.toml")
    a = {"study": {"margin": 0.1}, "variants": [], "points": [], "environment": []}
    found = {f["id"]: f for f in evaluate(a, cfg)}
    assert found["cpu-same-apptainer"]["verdict"] == "not measurable here"
    assert found["cpu-same-apptainer"]["why"].endswith("(its runtime, apptainer, is not installed here)")


def test_a_finding_never_compares_a_variant_with_itself():
    for entry in (finding(id="x", statement="s", benchmark="allgather", variant="native/openmpi", expect="same"),
                  finding(id="x", statement="s", benchmark="allgather", variant=BIND, baseline=BIND, expect="same")):
        with pytest.raises(NearmetalError) as e:
            parse(STUDY + entry, source="s.toml")
        assert "would be compared with itself" in str(e.value)


def test_needs_are_met_by_what_the_contexts_record():
    from nearmetal.analysis.findings import NEEDS

    alone = {"environment": [{"nodes": 1, "fabrics": [], "runtime": {"name": "apptainer", "setuid": False}}]}
    cluster = {"environment": [{"nodes": 4, "fabrics": ["mlx5_0"], "runtime": {"name": "apptainer", "setuid": True}}]}
    assert all(NEEDS[n](alone) for n in ("multi-node", "interconnect", "setuid"))
    assert not any(NEEDS[n](cluster) for n in ("multi-node", "interconnect", "setuid"))


def test_a_filter_that_matches_nothing_says_so():
    cfg = parse(STUDY + finding(id="a", statement="s", benchmark="allgather", variant=BIND, metric="latncy",
                                expect="same"))
    (f,) = evaluate(analysis_of({}), cfg)
    assert f["verdict"] == "not measurable here"
    assert "has allgather results, but none with metric 'latncy'" in f["why"] and "its metrics: latency" in f["why"]
