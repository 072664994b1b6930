"""One answer per figure of merit (analysis/quantities.py): reciprocals declared or detected
as one quantity, wall_time only when asked or alone, a benchmark's primary metric first; the
plan decided with the study file and stored with the study; the wording of an undecided
answer against the margin."""

import json

import numpy as np
import pytest
from pydantic import ValidationError

from nearmetal.analysis import stats
from nearmetal.analysis.answer_record import answer_records
from nearmetal.analysis.answer_text import could_be_words, level_words
from nearmetal.analysis.answers import answers
from nearmetal.analysis.quantities import MIN_SPREAD, choose, plan_of
from nearmetal.apps.fom import Fom
from nearmetal.errors import NearmetalError
from nearmetal.study.store import codec
from nearmetal.study.plan import study_file as config_mod
from nearmetal.study.records import AnalysisSpec

pytestmark = pytest.mark.unit

STEPS = 2000.0


def program_points(loop_factor=1.0, io_factor=1.0, reps=8, seed=0, loop_noise=0.02, steps=STEPS):
    """A program benchmark 'md' of two variants: loop_time (s), steps_per_s = steps / loop_time
    (the same run's), io_time (s) and wall_time (s), values by block."""
    rng = np.random.default_rng(seed)
    points = []
    for vid, lf, iof in (("native/openmpi", 1.0, 1.0), ("bind/charliecloud/openmpi/default", loop_factor, io_factor)):
        loop = 1.9 * lf * np.exp(rng.normal(0, loop_noise, reps))
        series = {"loop_time": (loop, "s"), "steps_per_s": (steps / loop, "steps/s"),
                  "io_time": (0.05 * iof * np.exp(rng.normal(0, 0.02, reps)), "s"),
                  "wall_time": (loop + 0.4 + rng.normal(0, 0.01, reps), "s")}
        for metric, (vals, unit) in series.items():
            points.append({"benchmark": "md", "kernel": "command", "metric": metric, "unit": unit,
                           "higher_is_better": stats.direction_for_unit(unit), "point": {}, "ranks": 2, "threads": 1,
                           "variant": vid, "values": [float(v) for v in vals], "blocks": list(range(reps))})
    base = {p["metric"]: p for p in points if p["variant"] == "native/openmpi"}
    for p in points:
        if p["variant"] != "native/openmpi":
            b = base[p["metric"]]
            p["baseline"] = "native/openmpi"
            p["comparison"] = stats.compare(b["values"], p["values"], higher_is_better=p["higher_is_better"],
                                            pairs=list(zip(b["values"], p["values"])), n_boot=200)
        else:
            p["baseline"], p["comparison"] = None, None
    return points


def analysis_of(points, plan=None):
    return {"study": {"name": "t", "margin": 0.03}, "points": points, "metric_plan": plan or {},
            "variants": [{"id": "native/openmpi", "mode": "native", "mpi": "openmpi", "baseline": "native/openmpi"},
                         {"id": "bind/charliecloud/openmpi/default", "mode": "bind", "runtime": "charliecloud",
                          "mpi": "openmpi", "image": "default", "baseline": "native/openmpi"}]}


ORDER = ["steps_per_s", "loop_time", "io_time", "wall_time"]


def test_a_rate_and_its_time_are_detected_as_one_quantity_answered_as_the_time():
    got = choose(program_points(), {"md": {"order": ORDER}})
    assert got[("md", "steps_per_s")]["answered"] is False and got[("md", "steps_per_s")]["quantity"] == "loop_time"
    assert got[("md", "loop_time")] == {"answered": True, "quantity": "loop_time", "primary": True,
                                        "also": ["steps_per_s"], "why": None}
    assert got[("md", "io_time")]["answered"] and not got[("md", "io_time")]["primary"]
    assert not got[("md", "wall_time")]["answered"] and "metrics = [...]" in got[("md", "wall_time")]["why"]


def test_metrics_whose_product_varies_or_that_never_vary_are_not_reciprocals():
    pts = program_points()
    for p in pts:  # a rate that is not the loop's: its product with loop_time varies
        if p["metric"] == "steps_per_s":
            p["values"] = [v * (1 + 0.01 * (i % 3)) for i, v in enumerate(p["values"])]
    assert choose(pts)[("md", "steps_per_s")]["answered"]
    flat = program_points(loop_noise=MIN_SPREAD / 20)  # constant values: any product is constant
    for p in flat:
        if p["metric"] in ("loop_time", "steps_per_s"):
            p["values"] = [p["values"][0]] * len(p["values"])
    got = choose(flat)
    assert got[("md", "steps_per_s")]["answered"] and got[("md", "loop_time")]["answered"]


def test_a_declared_inverse_and_a_primary_rate_answer_the_rate():
    pts = program_points(loop_noise=0.0)  # nothing to detect: the declaration decides
    plan = {"md": {"order": ORDER, "primary": "steps_per_s", "inverse": {"steps_per_s": "loop_time"}}}
    got = choose(pts, plan)
    assert got[("md", "steps_per_s")] == {"answered": True, "quantity": "steps_per_s", "primary": True,
                                          "also": ["loop_time"], "why": None}
    assert not got[("md", "loop_time")]["answered"]
    assert got[("md", "loop_time")]["why"] == "the reciprocal of steps_per_s, answered as steps_per_s"


def test_wall_time_is_answered_when_asked_or_alone():
    pts = program_points()
    assert choose(pts, {"md": {"order": ORDER, "asked": ["wall_time", "io_time"]}})[("md", "wall_time")]["answered"]
    alone = [p for p in pts if p["metric"] == "wall_time"]
    assert choose(alone)[("md", "wall_time")] == {"answered": True, "quantity": "wall_time", "primary": True,
                                                  "also": [], "why": None}


def test_a_kernels_primary_metric_without_a_plan():
    pts = [dict(p, benchmark="stream", kernel="stream", metric=m) for m in ("add", "copy", "triad")
           for p in program_points()[:1]]
    assert [m for (b, m), c in choose(pts).items() if c["primary"]] == ["triad"]


def test_never_a_mean_over_different_metrics():
    """A loop 10% slower, the write time 30% slower: two answers, each its own ratio; the
    variant's answer is its primary quantity's, not a mean over metrics."""
    a = answers(analysis_of(program_points(loop_factor=1.10, io_factor=1.30), {"md": {"order": ORDER}}))
    cells = {e["metric"]: e for e in a["by_benchmark"]}
    assert sorted(cells) == ["io_time", "loop_time"]
    assert cells["loop_time"]["cost_ratio"] == pytest.approx(1.10, abs=0.03) and cells["loop_time"]["primary"]
    assert cells["io_time"]["cost_ratio"] == pytest.approx(1.30, abs=0.05)
    (v,) = a["by_variant"]
    assert v["n_points"] == 1 and v["cost_ratio"] == pytest.approx(cells["loop_time"]["cost_ratio"])
    assert v["more"] == [cells["io_time"]["text"]] and cells["io_time"]["text"].startswith("md io_time +")
    assert {(n["metric"]) for n in a["not_answered"]} == {"steps_per_s", "wall_time"}
    # the record a first screen reads: the same numbers
    recs = {r.metric: r for r in answer_records({"answers": a})}
    assert recs["loop_time"].ratio == cells["loop_time"]["cost_ratio"] and recs["loop_time"].also == ("steps_per_s",)
    assert recs["io_time"].level_words == "95% interval" and not recs["io_time"].primary
    assert recs["loop_time"].estimator.startswith("paired ratio: exp of the 20% trimmed mean")


def test_an_undecided_answer_states_its_interval_against_the_margin():
    e = {"cost_ratio": 0.988, "ci_low": 0.961, "ci_high": 1.015, "overhead_pct": -1.2, "overhead_ci": [-3.9, 1.5]}
    assert could_be_words(e, 0.03) == "−3.9% to +1.5%: could be 1.5% slower or 3.9% faster; the margin is ±3%"
    e = {"cost_ratio": 1.4, "ci_low": 0.9, "ci_high": 2.6, "overhead_pct": 40.0, "overhead_ci": [-10.0, 160.0]}
    assert could_be_words(e, 0.05) == "×0.9 to ×2.6: could be 2.6 times as slow or 10% faster; the margin is ±5%"


@pytest.mark.parametrize("lo, hi, said", [
    (1.69, 2.44, "×1.69 to ×2.44: slower throughout this interval, but its test over these repetitions does not "
                 "confirm it yet (more repetitions would decide); the margin is ±3%"),
    (1.015, 1.21, "+1.5% to +21%: slower throughout this interval, but not shown to be by more than the margin; "
                  "the margin is ±3%"),
    (0.70, 0.90, "−30% to −10%: faster throughout this interval, but its test over these repetitions does not confirm "
                 "it yet (more repetitions would decide); the margin is ±3%"),
])
def test_an_undecided_interval_on_one_side_says_which_and_why_not_decided(lo, hi, said):
    """Not 'could be 2.44 times as slow' for an interval whose low end is already ×1.69."""
    r = (lo * hi) ** 0.5
    e = {"cost_ratio": r, "ci_low": lo, "ci_high": hi, "overhead_pct": (r - 1) * 100,
         "overhead_ci": [(lo - 1) * 100, (hi - 1) * 100]}
    assert could_be_words(e, 0.03) == said


@pytest.mark.parametrize("seq, words", [
    ({"ci_level": 1 - 0.1 / 9, "looks": [4, 6, 9, 14, 21, 32, 48, 72, 100]}, "98.9% interval (sequential, 9 looks planned)"),
    ({"ci_level": 0.9, "looks": [10]}, "90% interval (one look)"),
    ({}, "95% interval"),
])
def test_the_interval_level_is_named_with_what_set_it(seq, words):
    assert level_words({"sequential": seq}) == words


HEAD = ('[study]\nname = "app"\n[baseline]\nmode = "native"\n[matrix]\nmode = ["native"]\nmpi = ["openmpi"]\n'
        '[[benchmark]]\nname = "md"\ncommand = ["md"]\n')
FOMS = ('[[benchmark.fom]]\nname = "rate"\nregex = "r ([0-9.]+)"\nunit = "steps/s"\ninverse_of = "{of}"\n'
        '[[benchmark.fom]]\nname = "loop"\nregex = "l ([0-9.]+)"\nunit = "s"\n')


def test_the_plan_is_decided_from_the_study_file_and_stored_with_it():
    cfg = config_mod.parse(HEAD + 'primary = "rate"\nmetrics = ["rate", "loop", "wall_time"]\n' + FOMS.format(of="loop"))
    plan = plan_of(cfg)
    assert plan == {"md": {"primary": "rate", "asked": ["rate", "loop", "wall_time"], "inverse": {"rate": "loop"},
                           "order": ["rate", "loop", "wall_time"]}}
    spec = AnalysisSpec(baselines={}, looks=[3], alpha_per_look=0.05, metrics=plan)
    assert AnalysisSpec(**json.loads(json.dumps(codec._spec_dict(spec)))).metrics == plan


@pytest.mark.parametrize("extra, of, expect", [
    ("", "nope", "figure of merit 'rate' has inverse_of = 'nope', which is none of its figures of merit (rate, loop)"),
    ('primary = "speed"\n', "loop", "primary = 'speed' is none of its metrics (rate, loop, wall_time)"),
])
def test_a_plan_naming_no_figure_of_merit_is_refused_in_one_line_when_the_file_is_read(extra, of, expect):
    """Refused with the file (so --dry-run refuses it too, and nothing is stored), its key path named."""
    with pytest.raises(NearmetalError) as e:
        config_mod.parse(HEAD + extra + FOMS.format(of=of))
    assert str(e.value).endswith(f"benchmark[0]: {expect}"), str(e.value)


def test_a_primary_outside_the_metrics_asked_and_a_fom_its_own_inverse_are_refused():
    with pytest.raises(NearmetalError, match=r"primary = 'loop' is not one of metrics = \['rate'\]"):
        config_mod.parse(HEAD + 'primary = "loop"\nmetrics = ["rate"]\n' + FOMS.format(of="loop"))
    with pytest.raises(ValidationError, match="inverse_of names the figure of merit itself"):
        Fom(name="rate", regex="r ([0-9.]+)", unit="steps/s", inverse_of="rate")


@pytest.mark.parametrize("lo, hi, n, said", [
    (0.997, 1.001, 3, "−0.3% to +0.1%: inside the margin, but 3 repetitions are too few to call it equivalent "
                      "(it takes at least 4); the margin is ±3%"),
    (1.0, 1.0, 3, "+0.0% to +0.0%: inside the margin, but 3 repetitions are too few to call it equivalent "
                  "(it takes at least 4); the margin is ±3%"),  # identical values: no empty 'could be'
    (0.997, 1.001, 8, "−0.3% to +0.1%: inside the margin, but not decided equivalent at these repetitions; "
                      "the margin is ±3%"),
])
def test_an_undecided_interval_inside_the_margin_says_why(lo, hi, n, said):
    e = {"cost_ratio": (lo + hi) / 2, "ci_low": lo, "ci_high": hi, "n_blocks": n,
         "overhead_ci": [(lo - 1) * 100, (hi - 1) * 100]}
    assert could_be_words(e, 0.03) == said


@pytest.mark.parametrize("hi_pct, said", [(12.53, "+13%: could be 13% slower"), (9.99999, "+10%: could be 10% slower"),
                                          (0.3, "+0.3%: could be 0.3% slower")])
def test_an_intervals_end_and_its_could_be_agree(hi_pct, said):
    e = {"cost_ratio": 1.0, "ci_low": 0.73, "ci_high": 1 + hi_pct / 100, "overhead_pct": 0.0,
         "overhead_ci": [-27.0, hi_pct]}
    assert could_be_words(e, 0.1).startswith(f"−27% to {said} or 27% faster"), could_be_words(e, 0.1)


def test_a_preset_file_and_a_built_in_preset_declare_their_reciprocals(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lmp.toml").write_text('title = "LAMMPS"\n[[fom]]\nname = "steps_per_s"\n'
                                       "regex = '([0-9.]+) timesteps/s'\nunit = \"steps/s\"\ninverse_of = \"loop\"\n"
                                       "[[fom]]\nname = \"loop\"\nregex = 'Loop time of ([0-9.]+)'\nunit = \"s\"\n")
    head = ('[study]\nname = "app"\n[baseline]\nmode = "native"\n[matrix]\nmode = ["native"]\nmpi = ["openmpi"]\n'
            '[[benchmark]]\ncommand = ["app"]\npreset = "{}"\n')
    plan = plan_of(config_mod.parse(head.format("lmp")))
    assert plan["app"]["inverse"] == {"steps_per_s": "loop"} and plan["app"]["order"] == ["steps_per_s", "loop",
                                                                                            "wall_time"]
    assert plan_of(config_mod.parse(head.format("gromacs")))["app"]["inverse"] == {"mdrun_wall": "ns_per_day"}
    (tmp_path / "bad.toml").write_text('[[fom]]\nname = "x"\nregex = "x ([0-9]+)"\ninverse_of = "x"\n')
    with pytest.raises(NearmetalError, match=r"preset file .*bad\.toml: .*inverse_of names the figure of merit "
                                             r"itself"):
        config_mod.parse(head.format("bad"))


def test_a_variant_whose_primary_metric_was_not_compared_answers_its_next_one():
    """The primary metric's runs failed for the variant: its overall answer is the next
    answered metric's (one quantity per benchmark still), never a mean over the others."""
    pts = [p for p in program_points(loop_factor=1.10, io_factor=1.30)
           if not (p["metric"] in ("loop_time", "steps_per_s") and p["variant"] != "native/openmpi")]
    a = answers(analysis_of(pts, {"md": {"order": ORDER}}))
    (cell,) = a["by_benchmark"]
    assert cell["metric"] == "io_time" and cell["primary"]
    (v,) = a["by_variant"]
    assert v["cost_ratio"] == pytest.approx(cell["cost_ratio"]) and v["more"] == []
