"""Answers at the level a user asks (nearmetal.analysis.answers): one verdict per variant x
benchmark and per variant, the geometric mean of the per-point cost ratios with a paired
bootstrap over blocks, and the top-line sentences every report prints first."""

import json
from markupsafe import escape as html_escape
import re
from io import StringIO

import numpy as np
import pytest
from rich.console import Console

from nearmetal.analysis import stats
from nearmetal.analysis.answers import answers, resolution

BIND = {"mode": "bind", "runtime": "charliecloud", "mpi": "openmpi", "image": "default"}
HYBRID = {"mode": "hybrid", "runtime": "charliecloud", "mpi": "openmpi", "image": "default"}
NATIVE = {"mode": "native", "runtime": None, "mpi": "openmpi", "image": None}


def _vid(d):
    return d.get("name") or (f"native/{d['mpi']}" if d["mode"] == "native" else
                             f"{d['mode']}/{d['runtime']}/{d['mpi']}/{d['image']}")


def build(benchmarks, variants=((BIND, 1.0),), *, reps=10, noise=0.01, block_noise=0.0, seed=0, margin=0.03,
          base=NATIVE, shuffle_blocks=False):
    """A small analysis dict. benchmarks: [(name, kernel, metric, unit, [(point, true value), ...])];
    variants: [(dims, factor)] with factor the true cost ratio (a time x factor, a rate / factor)
    or a dict {benchmark name: factor}. Lognormal noise per run, plus a per-block factor shared
    by every run of the block (all points, all variants) when block_noise > 0."""
    rng = np.random.default_rng(seed)
    block = np.exp(rng.normal(0, block_noise, reps))
    bid = _vid(base)
    vlist = [({**base}, 1.0)] + list(variants)
    points = []
    for name, kernel, metric, unit, pts in benchmarks:
        hib = stats.direction_for_unit(unit)
        for point, true in pts:
            vals = {}
            for dims, factor in vlist:
                f = factor.get(name, 1.0) if isinstance(factor, dict) else factor
                mean = true / f if hib else true * f
                v = mean * block * np.exp(rng.normal(0, noise, reps))
                if shuffle_blocks and _vid(dims) != bid:
                    v = rng.permutation(v)
                vals[_vid(dims)] = [float(x) for x in v]
            for dims, _ in vlist:
                vid = _vid(dims)
                e = {"benchmark": name, "kernel": kernel, "metric": metric, "unit": unit, "higher_is_better": hib,
                     "point": dict(point), "ranks": 2, "threads": 1, "variant": vid, "variant_dims": dims,
                     "values": vals[vid], "blocks": list(range(reps)), "stats": stats.summarize(vals[vid]),
                     "baseline": None, "comparison": None}
                if vid != bid:
                    e["baseline"] = bid
                    e["comparison"] = stats.compare(vals[bid], vals[vid], higher_is_better=hib, margin=margin,
                                                    pairs=list(zip(vals[bid], vals[vid])), n_boot=200)
                points.append(e)
    variants_out = [{"id": _vid(d), **d, "baseline": bid} for d, _ in vlist]
    return {"study": {"name": "t", "margin": margin, "baseline": {"mode": "native"}},
            "variants": sorted(variants_out, key=lambda v: v["id"]), "points": points,
            "runs": {"total": 0, "by_status": {}, "failures": []}, "environment": []}


def latency(n=8, value=2.0, name="latency"):
    return (name, "latency", "latency", "us", [({"size": 1 << i}, value * (1 + i / 4)) for i in range(n)])


def bandwidth(n=8, name="bw"):
    return (name, "bw", "bandwidth", "MB/s", [({"size": 1 << (10 + i)}, 1000.0 * (1 + i)) for i in range(n)])


def only(a, key="by_variant"):
    assert len(a[key]) == 1, a[key]
    return a[key][0]


@pytest.mark.unit
def test_a_clear_10_percent_slowdown_is_slower_with_its_ci_around_1_10():
    a = answers(build([latency()], [(BIND, 1.10)]))
    v, cell = only(a), only(a, "by_benchmark")
    for e in (v, cell):
        assert e["verdict"] == "slower" and e["n_points"] == 8 and e["n_blocks"] == 10
        assert abs(e["cost_ratio"] - 1.10) < 0.01 and e["ci_low"] < 1.10 < e["ci_high"]
        assert e["ci_low"] > 1.08 and e["ci_high"] < 1.12
        assert abs(e["overhead_pct"] - (e["cost_ratio"] - 1) * 100) < 1e-9
    assert a["alpha"] == 0.05 and a["ci_level"] == 0.95 and a["n_boot"] == 2000
    assert re.fullmatch(r"Bind mode on Charliecloud \(Open MPI\): latency \+10\.\d% \[\+\d+\.\d to \+1\d\.\d%\] "
                        r"\(geometric-mean cost ratio 1\.\d{3} \[1\.\d{3}–1\.\d{3}\], 95% interval, over 8 points\)\.",
                        a["headline"][0]), a["headline"]


@pytest.mark.unit
def test_identical_variants_are_equivalent_with_the_resolution_reached():
    a = answers(build([latency(), bandwidth()], [(BIND, 1.0)], noise=0.01))
    v = only(a)
    assert v["verdict"] == "equivalent" and v["n_points"] == 16
    assert v["resolution_pct"] <= 3.0
    assert v["resolution_pct"] >= max(abs(v["ci_low"] - 1), abs(v["ci_high"] - 1)) * 100
    assert all(c["verdict"] == "equivalent" and c["resolution_pct"] <= 3.0 for c in a["by_benchmark"])
    assert re.fullmatch(r"Bind mode on Charliecloud \(Open MPI\): no measurable cost — equivalent within ±\d\.\d% "
                        r"\(geometric-mean cost ratio [01]\.\d{3} \[\d\.\d{3}–\d\.\d{3}\], 95% interval, over 16 points\)\.",
                        a["headline"][0]), a["headline"]


@pytest.mark.unit
def test_a_small_difference_inside_the_margin_is_stated_not_called_no_cost():
    """Equivalent within a 10% margin, but the interval excludes 1: the answer gives the
    difference (+4%), not 'no measurable cost'; a benchmark without one still says it."""
    a = answers(build([latency(), bandwidth()], [(BIND, {"latency": 1.04, "bw": 1.0})], noise=0.005,
                      margin=0.10))
    cells = {c["benchmark"]: c for c in a["by_benchmark"]}
    assert cells["latency"]["verdict"] == "equivalent" and cells["latency"]["ci_low"] > 1
    assert re.fullmatch(r"latency \+4\.\d% \[\+\d\.\d to \+\d\.\d%\], within the ±10% margin",
                        cells["latency"]["text"]), cells["latency"]["text"]
    assert cells["bw"]["text"].startswith("bandwidth: no measurable cost, within ±")
    head = a["headline"][0]
    assert "no measurable cost — equivalent" not in head, head
    assert "latency +4." in head and "no measurable cost on bandwidth" in head, head


@pytest.mark.unit
def test_a_single_point_answer_is_its_own_t_interval():
    """A benchmark of one point (CG's gflops, one message size) takes compare()'s interval of
    that point at the answer's level, not a bootstrap over its blocks: one slow baseline run
    drawn several times skews a percentile bootstrap (measured on the quickstart: a point
    equivalent within 10% read 'not resolved better than ±9%' as an answer)."""
    from nearmetal.analysis.trimmed import trimmed_mean_ci

    a = answers(build([latency(n=1)], [(BIND, 1.0)], reps=12, noise=0.05, seed=4))
    cell = only(a, "by_benchmark")
    p = next(p for p in build([latency(n=1)], [(BIND, 1.0)], reps=12, noise=0.05, seed=4)["points"]
             if p["variant"] != "native/openmpi")
    base = next(q for q in build([latency(n=1)], [(BIND, 1.0)], reps=12, noise=0.05, seed=4)["points"]
                if q["variant"] == "native/openmpi")
    est, lo, hi = trimmed_mean_ci(np.log(p["values"]) - np.log(base["values"]), a["alpha"])
    assert cell["n_points"] == 1
    assert cell["cost_ratio"] == pytest.approx(np.exp(est)) and cell["ci_low"] == pytest.approx(np.exp(lo))
    assert cell["ci_high"] == pytest.approx(np.exp(hi))
    assert only(a)["ci_low"] == pytest.approx(np.exp(lo))  # the variant overall: the same one point


@pytest.mark.unit
def test_a_noisy_baseline_is_undecided_and_says_how_noisy():
    a = answers(build([latency(n=3)], [(BIND, 1.0)], noise=0.25, reps=6, seed=3))
    noisy = next(c for c in a["by_benchmark"] if c["benchmark"] == "latency")
    assert noisy["verdict"] == "inconclusive" and noisy["resolution_pct"] > 3
    assert 15 < noisy["noise_pct"] < 40  # the baseline's coefficient of variation, ~25%
    text = a["headline"][0]
    # the interval against the margin, the noise as the baseline's CV (the median over the points)
    assert re.fullmatch(r"Bind mode on Charliecloud \(Open MPI\): latency undecided, −\d+(\.\d)?% to \+\d+(\.\d)?%: "
                        r"could be \d+(\.\d)?% slower or \d+(\.\d)?% faster; the margin is ±3% \(6 repetitions\); "
                        r"the baseline's run-to-run noise there is ±\d+% \(median over 3 points\) "
                        r"\(geometric-mean cost ratio \d\.\d{3} \[\d\.\d{3}–\d\.\d{3}\], 95% interval, over 3 points\)\.",
                        text), text
    lo, hi = noisy["overhead_ci"]
    assert f"could be {hi:.0f}% slower or {-lo:.0f}% faster" in text or f"{hi:.1f}% slower" in text, text


@pytest.mark.unit
def test_a_quiet_benchmark_beside_a_noisy_one():
    quiet = build([latency(n=3), bandwidth()], [(BIND, 1.0)], noise=0.01, seed=4)
    noisy = build([latency(n=3)], [(BIND, 1.0)], noise=0.4, reps=5, seed=4)
    for p in quiet["points"]:  # the latency points from the noisy analysis, the bandwidth ones from the quiet one
        if p["benchmark"] == "latency":
            src = next(q for q in noisy["points"] if q["point"] == p["point"] and q["variant"] == p["variant"])
            p.update(values=src["values"], blocks=src["blocks"], stats=src["stats"], comparison=src["comparison"])
    a = answers(quiet)
    text = a["headline"][0]
    assert "no measurable cost on bandwidth; latency undecided, −" in text, text
    assert "; the margin is ±3% (5 repetitions); the baseline's run-to-run noise there is ±" in text, text
    assert "; overall undecided, " in text, text


@pytest.mark.unit
@pytest.mark.parametrize("factor, verdict", [(1.10, "slower"), (1 / 1.10, "faster")])
def test_higher_is_better_metrics_are_inverted(factor, verdict):
    """A bandwidth 1/1.10 of the baseline's costs 10%: cost ratio 1.10, slower."""
    a = answers(build([bandwidth()], [(BIND, factor)]))
    v = only(a)
    assert v["verdict"] == verdict and abs(v["cost_ratio"] - factor) < 0.01
    assert (v["overhead_pct"] > 0) == (verdict == "slower")
    if verdict == "faster":
        assert "(faster)" in a["headline"][0] and "bandwidth −9." in a["headline"][0], a["headline"]


@pytest.mark.unit
def test_blocks_are_paired_across_points():
    """Block-to-block drift shared by every run of a block cancels in the paired bootstrap;
    with the variant's blocks shuffled (pairs broken) the same data are far less precise."""
    kw = dict(noise=0.002, block_noise=0.05, seed=7)
    paired = only(answers(build([latency()], [(BIND, 1.0)], **kw)))
    broken = only(answers(build([latency()], [(BIND, 1.0)], shuffle_blocks=True, **kw)))
    assert paired["verdict"] == "equivalent" and paired["resolution_pct"] < 1.0
    assert (broken["ci_high"] - broken["ci_low"]) > 4 * (paired["ci_high"] - paired["ci_low"])


@pytest.mark.unit
def test_reproducible_and_the_level_of_the_points_intervals():
    """The answers' interval has the level of the points' own (analysis' sequential.ci_level:
    1 - 2 alpha per look), 95% where the analysis does not say."""
    data = build([latency()], [(BIND, 1.01)], noise=0.02)
    one, two = answers(data), answers(data)
    assert json.dumps(one, sort_keys=True) == json.dumps(two, sort_keys=True)
    assert one["ci_level"] == 0.95
    strict = answers(dict(data, sequential={"alpha_per_look": 0.005, "ci_level": 0.99}))
    v, w = only(one), only(strict)
    assert strict["alpha"] == 0.005 and strict["ci_level"] == 0.99
    assert w["ci_low"] < v["ci_low"] and w["ci_high"] > v["ci_high"]
    assert "], 99% interval, over" in strict["headline"][0] and "], 95% interval, over" in one["headline"][0]
    looked = answers(dict(data, sequential={"alpha_per_look": 0.05 / 4, "ci_level": 1 - 0.1 / 4, "looks": [4, 6, 9, 14]}))
    assert only(looked)["level_words"] == "97.5% interval (sequential, 4 looks planned)"
    assert "], 97.5% interval (sequential, 4 looks planned), over 8 points" in looked["headline"][0], looked["headline"]


@pytest.mark.unit
def test_start_up_cost_per_launch_and_benchmarks_in_words():
    """Hybrid on Podman-like costs: +150 ms on a 0.4 s start-up, nothing elsewhere."""
    bench = [("startup", "startup", "to_after_init", "s", [({"rank": "max", "source": "launch_env"}, 0.4)]),
             latency(), bandwidth(), ("stream", "stream", "triad", "GB/s", [({"rank": "total"}, 40.0)] +
                                      [({"rank": r}, 10.0) for r in range(4)]),
             ("cg", "cg", "gflops", "GFLOP/s", [({}, 5.0)])]
    a = answers(build(bench, [(HYBRID, {"startup": 1.375})], noise=0.005))
    text = a["headline"][0]
    assert re.match(r"Hybrid mode on Charliecloud \(Open MPI\): start-up \+1[45]\d ms per launch \(\+3[78]\.\d% "
                    r"\[\+3\d\.\d to \+3\d\.\d%\]\); ", text), text
    assert "no measurable cost on latency, bandwidth, STREAM and CG" not in text  # alphabetical: bw, cg, latency, ...
    assert re.search(r"; no measurable cost on bandwidth, CG, latency and STREAM; overall ", text), text
    stream = next(c for c in a["by_benchmark"] if c["benchmark"] == "stream")
    assert stream["n_points"] == 1  # per-rank values count once, by their aggregate (rank total)
    startup = next(c for c in a["by_benchmark"] if c["benchmark"] == "startup")
    assert abs(startup["per_launch"]["delta_s"] - 0.15) < 0.005 and startup["per_launch"]["metric"] == "to_after_init"


@pytest.mark.unit
def test_start_up_to_main_and_to_after_init_are_both_said_when_they_differ():
    """Reaching main 30% slower but MPI_Init 30% faster (as MPICH in a container was here):
    the phrase gives both differences per launch, and says the percentage is over the metrics."""
    pt = {"rank": "max", "source": "launch_env"}
    data = build([("startup", "startup", "wall_to_main", "s", [(pt, 0.010)]),
                  ("startup", "startup", "to_after_init", "s", [(pt, 0.050)])], [(HYBRID, 1.0)], noise=0.005)
    base = {p["metric"]: p["values"] for p in data["points"] if p["variant"] == "native/openmpi"}
    for p in data["points"]:
        if p["variant"] != "native/openmpi":
            p["values"] = [v * (1.3 if p["metric"] == "wall_to_main" else 0.7) for v in p["values"]]
            p["comparison"] = stats.compare(base[p["metric"]], p["values"], pairs=list(zip(base[p["metric"]],
                                                                                            p["values"])), n_boot=200)
    a = answers(data)
    # two metrics, two answers (never one mean over both); to after MPI_Init is the primary one
    cells = {c["metric"]: c for c in a["by_benchmark"]}
    assert sorted(cells) == ["to_after_init", "wall_to_main"]
    assert cells["to_after_init"]["primary"] and not cells["wall_to_main"]["primary"]
    cell = cells["to_after_init"]
    assert cell["per_launch"]["metric"] == "to_after_init"
    assert abs(cell["per_launch"]["delta_s"] + 0.015) < 0.001 and abs(cell["per_launch"]["to_main_s"] - 0.003) < 0.0003
    assert re.match(r"start-up to after MPI_Init \+3\.\d\d ms to main, −1[45]\.\d ms to after MPI_Init per launch "
                    r"\(−(29|30)\.\d% \[.+\]\) \(faster\)$", cell["text"]), cell["text"]
    assert cells["wall_to_main"]["overhead_pct"] == pytest.approx(30, abs=1)
    # the answer on to main says its own cost per launch, not the leading metric's
    main = cells["wall_to_main"]["per_launch"]
    assert main["metric"] == "wall_to_main" and main["to_main_s"] is None and abs(main["delta_s"] - 0.003) < 0.0003
    assert re.match(r"start-up to main \+(2\.9\d|3\.0\d) ms per launch \(\+(29|30)\.\d% ", cells["wall_to_main"]["text"]), \
        cells["wall_to_main"]["text"]
    assert only(a)["n_points"] == 1 and only(a)["more"] == [cells["wall_to_main"]["text"]]


@pytest.mark.unit
def test_named_variants_keep_their_names_and_say_their_baseline():
    first = {"name": "first", **HYBRID}
    data = build([latency()], [({"name": "second", **HYBRID}, 1.0), ({"name": "tcp", **HYBRID}, 1.3)], base=first)
    a = answers(data)
    assert [v["variant"] for v in a["by_variant"]] == ["second", "tcp"]
    assert a["headline"][0].startswith("second vs first: no measurable cost — equivalent within ±")
    assert re.fullmatch(r"tcp vs first: latency \+(29|30)\.\d% \[\+\d\d\.\d to \+\d\d\.\d%\] \(geometric-mean cost "
                        r"ratio 1\.(29|30)\d \[1\.\d{3}–1\.\d{3}\], 95% interval, over 8 points\)\.", a["headline"][1]), \
        a["headline"]


@pytest.mark.unit
def test_imported_summary_rows_are_left_out_and_said():
    data = build([latency(n=3)], [(BIND, 1.0)])
    for p in data["points"]:
        p["stats"] = dict(p["stats"], from_summary=True)
        if p["comparison"]:
            p["comparison"]["from_summary"] = True
    a = answers(data)
    assert a["by_variant"] == [] and a["by_benchmark"] == []
    assert a["headline"] == ["Bind mode on Charliecloud (Open MPI): none of its 3 compared points could be aggregated "
                             "(3 with imported summary rows without repetitions); see the per-point verdicts."]


@pytest.mark.unit
def test_imported_variants_keep_their_names():
    """Imported results put the variant's name in `mode` (no MPI): the name as given, not 'Bind mode'."""
    dims = {"runtime": None, "mpi": None, "image": None}
    data = build([latency(n=2)], [({"name": "bind", "mode": "bind", **dims}, 1.0)],
                 base={"name": "bare-metal", "mode": "bare-metal", **dims})
    for p in data["points"]:  # single runs, variants as the importer stores them (no name)
        p.update(values=p["values"][:1], blocks=p["blocks"][:1], variant_dims=dict(p["variant_dims"]))
        p["variant_dims"].pop("name")
    for v in data["variants"]:
        v.pop("name")
    a = answers(data)
    assert a["headline"] == ["bind vs bare-metal: none of its 2 compared points could be aggregated (2 with fewer "
                             "than 2 repetitions shared with the baseline); see the per-point verdicts."]


@pytest.mark.unit
def test_resolution_rounds_up():
    assert resolution(0.995, 1.0113, "equivalent") == 1.2
    assert resolution(0.92, 1.08, "inconclusive") == 8.0
    assert resolution(0.80, 1.034, "inconclusive") == 12.0
    assert resolution(None, None, "inconclusive") is None


@pytest.mark.unit
def test_every_format_states_the_answer_first(tmp_path, monkeypatch):
    from nearmetal.report import render_terminal
    from nearmetal.report.html import render_html
    from nearmetal.report.tables import render_markdown

    monkeypatch.setenv("NEARMETAL_REPORT_JOBS", "1")  # figures drawn in this process
    data = build([latency(), bandwidth()], [(BIND, 1.0), (HYBRID, {"bw": 1.2})])
    data["answers"] = answers(data)
    sentences = data["answers"]["headline"]
    assert [s.split(":")[0] for s in sentences] == ["Bind mode on Charliecloud (Open MPI)",
                                                    "Hybrid mode on Charliecloud (Open MPI)"]
    console = Console(file=StringIO(), width=100, color_system=None)
    render_terminal(data, console)
    text = console.file.getvalue()
    assert text.startswith("Answer (study t)\n2 variants × 2 benchmarks compared with their baseline")
    first = text[:text.index("Study t")]  # the summary, the matrix, the sentences: before any table
    summary, matrix, rest = first.split("\n\n", 2)
    assert "Hybrid mode on Charliecloud (Open MPI) is slower on bandwidth, cost ratio" in " ".join(summary.split())
    assert re.search(r"▲ 1\.(19|20)\d \[1\.\d{3}–1\.\d{3}\]", matrix) and "≈ 1.0" in matrix
    for s in sentences:
        assert " ".join(s.split()) in " ".join(rest.split())
    md = render_markdown(data)
    assert md.split("\n\n")[1] == "## Answer" and md.index("## Answer") < md.index("## Summary")
    assert f"- {sentences[1]}" in md and "| variant | bandwidth | latency |" in md
    assert re.search(r"\| Hybrid mode on Charliecloud \(Open MPI\) \| ▲ 1\.(19|20)\d \[1\.\d{3}–1\.\d{3}\] slower \| "
                     r"≈ [01]\.\d{3} \[0\.\d{3}–1\.\d{3}\] equivalent \|", md)
    render_html(data, tmp_path / "report.html")
    html = (tmp_path / "report.html").read_text()
    first = html.split("</header>", 1)[1].split("</section>", 1)[0]
    assert first.lstrip().startswith('<section id="answer"') and html.index('id="answer"') < html.index("<nav>")
    for s in sentences:
        assert s.replace("—", "—") in first.replace("&gt;", ">").replace("&lt;", "<")
    assert first.index('id="first-summary"') < first.index('id="verdict-matrix"') < first.index(html_escape(sentences[0]))
    assert re.search(r'<td class="m g-slower"[^>]*><span class="mk">▲</span> <b>1\.(19|20)\d</b><br>'
                     r'<span class="ci">\[1\.\d{3}–1\.\d{3}\]</span></td>', first) and 'class="m g-equivalent"' in first

AA = """
[study]
name = "aa4"
repetitions = 4
warmup = 1
timeout = 120
seed = 3
[baseline]
variant = "first"
[[variant]]
name = "first"
mode = "hybrid"
mpi = "mpich"
[[variant]]
name = "second"
mode = "hybrid"
mpi = "mpich"
[[variant]]
name = "tcp"
mode = "hybrid"
mpi = "mpich"
env = { UCX_TLS = "tcp,self" }
[[benchmark]]
kernel = "latency"
args = ["-m", "8:64", "-i", "200"]
"""


def test_a_real_aa_study_answers_first_per_variant(tmp_path, default_image):
    """A tiny real study (two identical named hybrid variants and one with UCX over TCP):
    the terminal's first lines and the HTML's first section state an answer per variant."""
    from conftest import assert_runs_ok, nearmetal

    f, db = tmp_path / "aa.toml", tmp_path / "aa.db"
    f.write_text(AA)
    out = nearmetal("study", f, "--db", db, "--no-progress", "--out", tmp_path, timeout=400)
    assert out.returncode == 0, out.stderr
    assert_runs_ok(db)
    lines = [line for line in out.stdout.splitlines() if line.strip()]
    assert lines[0] == "Answer (study aa4)", out.stdout  # the first thing printed
    answer = " ".join(" ".join(lines[1:lines.index(next(x for x in lines if x.startswith("Study aa4")))]).split())
    for name in ("second vs first: ", "tcp vs first: "):
        assert name in answer, answer
    assert re.search(r"second vs first: (no measurable cost|latency)",
                     answer), answer
    assert answer.index("second vs first: ") < answer.index("tcp vs first: ")  # the sentences, in variant order
    report = nearmetal("report", "--db", db, "--format", "json", "--out", tmp_path, timeout=120)
    assert report.returncode == 0, report.stderr
    data = json.loads((tmp_path / "analysis.json").read_text())
    heads = data["answers"]["headline"]
    assert [h.split(":")[0] for h in heads] == ["second vs first", "tcp vs first"]
    assert all(v["n_points"] == 4 and v["n_blocks"] == 4 for v in data["answers"]["by_variant"])
    html = (tmp_path / "report.html").read_text()
    first = html.split("</header>", 1)[1].split("</section>", 1)[0]
    assert first.lstrip().startswith('<section id="answer"')
    for h in heads:
        assert str(html_escape(h)) in first
        assert " ".join(h.split()) in answer  # the terminal says the same (wrapped at its width)


@pytest.mark.unit
def test_the_cost_per_launch_points_the_way_its_percentage_does_when_launches_fall_into_modes():
    """Launches in two modes: most of the variant's sit in the fast one, so its median is the
    lower, yet launch by launch it is slower (about +6%). The seconds per launch come from the
    same paired ratio as the percentage beside them (the baseline's typical 18 ms x 0.06),
    never a difference of medians that says faster (-0.2 ms)."""
    from nearmetal.analysis.per_launch import per_launch

    base, var = [10.0] * 4 + [30.0] * 3, [9.8] * 4 + [36.0] * 3
    ratio = stats.compare(base, var, pairs=list(zip(base, var)), n_boot=200)["ratio"]
    assert ratio > 1 and np.median(var) < np.median(base)
    term = {"kernel": "startup", "metric": "to_after_init", "unit": "ms", "point": {"rank": "max"},
            "base": np.array(base), "var": np.array(var), "comparison": {"ratio": ratio}}
    got = per_launch([term], "to_after_init")
    typical = np.mean(sorted(base)[1:-1]) / 1e3  # the baseline's 20% trimmed mean, in seconds
    assert got["delta_s"] > 0 and got["delta_s"] == pytest.approx(typical * (ratio - 1))
    assert per_launch([term], "wall_to_main") is None  # no term of that metric



@pytest.mark.unit
def test_the_cost_per_launch_spans_the_modes_that_the_answer_rescales():
    """Launches in two modes (10 and 30 ms, about 43% slow) and a variant about 6% slower: the
    answer compares each launch against its own mode (rescaled to the fast one), but the seconds
    per launch are the baseline's typical launch over both modes x (ratio - 1), ~1.1 ms, not the
    fast mode's ~0.6 ms (found in review)."""
    from nearmetal.analysis import mode_compare
    from nearmetal.analysis.per_launch import _trimmed

    pt = {"rank": "max", "source": "launch_env"}
    data = build([("startup", "startup", "to_after_init", "ms", [(pt, 10.0)])], [(HYBRID, 1.0)], reps=30)
    rng = np.random.default_rng(1)
    base = np.where(rng.random(30) < 0.43, 30.0, 10.0) * rng.normal(1, 0.01, 30)
    var = np.where(rng.random(30) < 0.43, 30.0, 10.0) * 1.06 * rng.normal(1, 0.01, 30)
    for p in data["points"]:
        if p["baseline"] is None:
            p["values"] = base.tolist()
        else:
            p["values"] = var.tolist()
            p["comparison"] = mode_compare.decide_look(base.tolist(), var.tolist(), list(zip(base, var)), alpha=0.05,
                                                       margin=0.03, higher_is_better=False)
            ratio = p["comparison"]["ratio"]
    assert data["points"][1]["comparison"].get("modes") and 1.03 < ratio < 1.09
    cell = next(c for c in answers(data)["by_benchmark"] if c["metric"] == "to_after_init")
    assert cell["per_launch"]["delta_s"] == pytest.approx(_trimmed(base) * (ratio - 1) / 1e3)
    assert cell["per_launch"]["delta_s"] > 0.0009  # the fast mode alone would say ~0.6 ms


@pytest.mark.unit
def test_a_point_whose_interval_is_past_a_doubles_range_answers_inconclusive_not_an_overflow():
    """Paired runs alternating 1e-100 and 1e100 (inside the stored range): compare() gives no
    interval, and the answer recomputed it unguarded and raised OverflowError (report, explain)."""
    a = build([("t", "command", "time", "s", [({}, 1.0)])], reps=4)
    b, v = [1e-100, 1e100, 1e-100, 1e100], [1e100, 1e-100, 1e100, 1e-100]
    for e in a["points"]:
        e["values"] = b if e["comparison"] is None else v
        e["stats"] = stats.summarize(e["values"])
        if e["comparison"] is not None:
            e["comparison"] = stats.compare(b, v, pairs=list(zip(b, v)), n_boot=200)
            assert e["comparison"]["ci_low"] is None
    row = only(answers(a))
    assert row["ci_low"] is None and row["overhead_ci"] is None and row["verdict"] == "inconclusive"
