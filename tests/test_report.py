"""Reports (nearmetal.report) from synthetic analysis dicts: every format renders, the HTML
is self-contained, the CSV round-trips, the terminal shows verdicts and ratios, missing
kernels and imported (summary-only) points break nothing."""

import copy
import csv
import json
import re
import time

import pytest
from rich.console import Console

from nearmetal.report import FORMATS, plots_scaling, render_terminal, write_report
from nearmetal.report import formatting as F
from nearmetal.report import kernel_semantics as K
from nearmetal.report import points as PT
from nearmetal.report import row_selection as RS
from nearmetal.report import summaries as S
from nearmetal.report.html import render_html
from nearmetal.report.tables import csv_rows, render_json, render_markdown, write_csv
from synthetic import synthetic_analysis

RATIO_CI = re.compile(r"\d+\.\d{1,3} \[\d+\.\d{1,3}–\d+\.\d{1,3}\]")  # fmt_ratios: alike, 1 to 3 decimals


@pytest.fixture(scope="module")
def analysis():
    return synthetic_analysis(seed=1, n_variants=5)


@pytest.fixture(scope="module")
def html_text(analysis, tmp_path_factory):
    path = tmp_path_factory.mktemp("html") / "report.html"
    render_html(analysis, path)
    return path.read_text(encoding="utf-8")


def terminal_text(analysis, width=120):
    console = Console(record=True, width=width, force_terminal=False, color_system=None)
    render_terminal(analysis, console)
    return console.export_text()


# ---------------------------------------------------------------------- the synthetic builder (tests/synthetic.py)

def test_synthetic_analysis_is_realistic(analysis):
    ids = [v["id"] for v in analysis["variants"]]
    assert 3 <= len(ids) <= 6
    assert "native/openmpi" in ids and "bind/charliecloud/mpich/default" in ids
    kernels = {p["kernel"] for p in analysis["points"]}
    assert {"latency", "bw", "pairs", "stream", "cg", "phases", "startup", "metadata"} <= kernels
    sizes = {p["point"]["size"] for p in analysis["points"] if p["kernel"] == "latency"}
    assert min(sizes) == 1 and max(sizes) == 4 << 20
    verdicts = {p["comparison"]["verdict"] for p in analysis["points"] if p["comparison"]}
    assert {"equivalent", "slower"} <= verdicts
    assert analysis["runs"]["failures"] and analysis["runs"]["by_status"]["failed"] >= 1
    # the real statistics' layout (stats.summarize / stats.compare)
    p = next(p for p in analysis["points"] if p["comparison"])
    assert {"n", "min", "max", "median", "p5", "p95", "cv", "outliers"} <= set(p["stats"])
    assert {"ratio", "ci_low", "ci_high", "overhead_pct", "verdict", "baseline_noise"} <= set(p["comparison"])
    json.dumps(analysis, allow_nan=False)


# ---------------------------------------------------------------------- write_report

def test_write_report_every_format(analysis, tmp_path):
    names = {"html": "report.html", "md": "report.md", "csv": "points.csv", "json": "analysis.json"}
    assert FORMATS == ("html", "md", "csv", "json")
    small = synthetic_analysis(seed=2, n_variants=3, kernels=("latency", "stream", "phases"))
    for fmt in FORMATS:
        path = write_report(small, tmp_path / "out", fmt)
        assert path == tmp_path / "out" / names[fmt]
        assert path.stat().st_size > 500
    with pytest.raises(ValueError, match="unknown report format"):
        write_report(small, tmp_path, "pdf")


# ---------------------------------------------------------------------- HTML

def test_html_is_self_contained(html_text):
    assert html_text.startswith("<!DOCTYPE html>")
    assert html_text.count("<svg") >= 10
    # the study file (in a <pre>) may quote URLs; nothing else may point outside the file
    outside_pre = re.sub(r"<pre\b.*?</pre>", "", html_text, flags=re.S)
    assert not re.search(r"""\b(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", outside_pre, re.I)
    assert not re.search(r"url\(\s*['\"]?(?:https?:)?//", outside_pre, re.I)
    assert "<script" not in html_text.lower() and "<link" not in html_text.lower()
    assert "@import" not in html_text and "@font-face" not in html_text
    assert "https://mvapich" in html_text  # the synthetic study file's comment, inside its <pre>
    # several inline SVGs must not share element ids (clip paths would cross-reference)
    ids = re.findall(r'\bid="([^"]+)"', html_text)
    assert len(ids) == len(set(ids))
    for ref in set(re.findall(r'(?:url\(#|href="#)([^")]+)', html_text)):
        assert ref in ids, ref


def test_html_same_in_worker_processes(tmp_path, monkeypatch):
    """Figures drawn in forked workers (NEARMETAL_REPORT_JOBS=2) give the same page as
    drawn in this process: deterministic SVG, same order."""
    a = synthetic_analysis(seed=7, n_variants=3, kernels=("latency", "cg", "pairs"))
    pages = []
    for jobs in ("1", "2"):
        monkeypatch.setenv("NEARMETAL_REPORT_JOBS", jobs)
        render_html(a, tmp_path / f"r{jobs}.html")
        pages.append((tmp_path / f"r{jobs}.html").read_text())
    assert pages[0] == pages[1]


def test_html_figure_failure_is_contained(tmp_path, monkeypatch):
    def broken(*args):
        raise RuntimeError("boom")

    monkeypatch.setattr(plots_scaling, "scaling", broken)
    monkeypatch.setenv("NEARMETAL_REPORT_JOBS", "1")
    render_html(synthetic_analysis(seed=6, n_variants=3, kernels=("cg", "latency")), tmp_path / "r.html")
    text = (tmp_path / "r.html").read_text()
    assert "could not be drawn: RuntimeError: boom" in text and text.count("<svg") >= 2


def test_html_sections(html_text, analysis):
    assert "could not be drawn" not in html_text
    for section in ("summary", "sweeps", "overhead", "scaling", "pairs", "dispersion", "phases", "table",
                    "failures", "environment", "study"):
        assert f'<section id="{section}">' in html_text, section
    for s in S.variant_summaries(analysis):
        assert s["text"].split(":")[0] in html_text
    # the full table: one <details> per benchmark·metric, one row per point x variant
    groups = PT.group_points(analysis["points"])
    assert html_text.count("<details id=") == len(groups)
    assert html_text.count('<td class="num">') >= len(analysis["points"]) * 8
    # the environment and the study file
    assert "AMD EPYC 7763" in html_text and "libmpich.so.12" in html_text
    assert "[matrix]" in html_text
    assert "can&#39;t bind /nm/host-mpi" in html_text  # first failure's stderr tail, escaped


def test_html_renders_with_kernels_missing(tmp_path):
    only = synthetic_analysis(seed=3, n_variants=3, kernels=("cg",))
    render_html(only, tmp_path / "cg.html")
    text = (tmp_path / "cg.html").read_text()
    assert '<section id="scaling">' in text and '<section id="overhead">' in text
    for absent in ("sweeps", "pairs", "phases"):
        assert f'<section id="{absent}">' not in text
    # no kernels at all, nothing but a study: every format still renders
    empty = {"study": {"name": "empty", "margin": 0.03}, "variants": [], "points": [],
             "runs": {"total": 0, "by_status": {}, "failures": []}, "environment": []}
    for fmt in FORMATS:
        assert write_report(empty, tmp_path / "empty", fmt).exists()
    text = (tmp_path / "empty" / "report.html").read_text()
    assert "<svg" not in text and "No failed runs" in text
    terminal_text(empty)
    assert write_report({}, tmp_path / "bare", "html").exists()
    terminal_text({})


def test_imported_summary_points_render(analysis, tmp_path):
    """Imported results: stats from n/mean/std only (no p5/p95, one value), comparisons
    without CI, a NaN ratio where the baseline mean was 0."""
    a = copy.deepcopy(synthetic_analysis(seed=4, n_variants=3, kernels=("latency", "cg")))
    for p in a["points"]:
        s = p["stats"]
        p["stats"] = {"n": s["n"], "min": None, "median": s["mean"], "mean": s["mean"], "std": s["std"],
                      "sem": s["sem"], "p5": None, "p95": None, "mad": None, "cv": s["cv"], "outliers": [],
                      "from_summary": True}
        p["values"] = [s["mean"]]
        if p["comparison"]:
            c = p["comparison"]
            c.update(ci_low=None, ci_high=None, test="welch", verdict="inconclusive", from_summary=True)
    first = next(p for p in a["points"] if p["comparison"])
    first["comparison"]["ratio"] = float("nan")
    first["comparison"]["overhead_pct"] = None
    for fmt in FORMATS:
        write_report(a, tmp_path, fmt)
    parsed = json.loads((tmp_path / "analysis.json").read_text())
    assert any(p["comparison"] and p["comparison"]["ratio"] is None for p in parsed["points"])
    out = terminal_text(a)
    assert "inconclusive" in out


def test_report_of_a_real_analysis(tmp_path):
    """analyze() of an imported study (seed 000's Table 3: single runs, scale as a 'cores'
    parameter, variants that are not mode/runtime/mpi/image): every format renders."""
    from pathlib import Path

    from nearmetal.analysis.analyze import analyze
    from nearmetal.study.store.importer import import_csv

    csv_path = Path(__file__).resolve().parents[1] / "examples" / "aquaplanet_table3.csv"
    store, _, _ = import_csv(csv_path, tmp_path / "study.db", "aquaplanet", "bare-metal", margin=0.03)
    a = analyze(store, "aquaplanet")
    for fmt in FORMATS:
        write_report(a, tmp_path, fmt)
    html = (tmp_path / "report.html").read_text()
    assert '<section id="scaling">' in html  # drawn over the 'cores' parameter
    assert '<section id="dispersion">' not in html  # single runs: nothing to box
    out = " ".join(terminal_text(a).split())
    assert re.search(r"hybrid: 7 points compared with bare-metal; inconclusive at 7; overhead "
                     r"\+\d+\.\d% to \+\d+\.\d% \(median", out)
    assert out.index("cores 216") < out.index("cores 1152")  # natural order of the parameter


# ---------------------------------------------------------------------- CSV, markdown, JSON

def test_csv_round_trips(analysis, tmp_path):
    path = write_csv(analysis, tmp_path / "points.csv")
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
        fields = reader.fieldnames
    assert len(rows) == len(analysis["points"])
    fixed, _ = csv_rows(analysis)
    assert fields == fixed
    for col in ("benchmark", "metric", "unit", "ranks", "threads", "variant", "baseline", "point.size", "point.src",
                "point.dst", "point.rank", "stats.median", "stats.p5", "stats.p95", "stats.cv", "comparison.ratio",
                "comparison.ci_low", "comparison.ci_high", "comparison.overhead_pct", "comparison.verdict",
                "comparison.p_value", "comparison.baseline_noise.median_ci_halfwidth_rel", "values"):
        assert col in fields, col
    for row in rows:
        assert None not in row and all(v is not None for v in row.values())  # every row has every field
    for p, row in zip(analysis["points"], rows):
        assert row["variant"] == p["variant"] and row["benchmark"] == p["benchmark"]
        assert float(row["stats.median"]) == p["stats"]["median"]  # full precision
        assert [float(x) for x in row["values"].split()] == p["values"]
        if p["comparison"]:
            assert float(row["comparison.ratio"]) == p["comparison"]["ratio"]
            assert row["comparison.verdict"] == p["comparison"]["verdict"]
        else:
            assert row["comparison.ratio"] == "" and row["baseline"] == ""
        if "size" in p["point"]:
            assert int(row["point.size"]) == p["point"]["size"]


def test_markdown_has_a_table_per_benchmark(analysis):
    md = render_markdown(analysis)
    benches = list(dict.fromkeys(p["benchmark"] for p in analysis["points"]))
    sections = re.split(r"^## ", md, flags=re.M)
    titled = {s.split("\n", 1)[0]: s for s in sections[1:]}
    for b in benches:
        assert b in titled, b
        assert "\n| point | ranks×threads | variant |" in titled[b]
        # the column says what it is and at which level: the metric's own variant/baseline ratio
        assert re.search(r"\| median \| p5–p95 \| var/base \[\d+(\.\d+)?%\] \|", titled[b]), titled[b][:400]
        assert "\n|---|" in titled[b]
    assert md.count("| point | ranks×threads |") == len(PT.group_points(analysis["points"]))
    # one line per point x variant in the tables
    assert sum(1 for line in md.splitlines() if line.startswith("| ") and not line.startswith("| point")) == \
        len(analysis["points"])
    assert RATIO_CI.search(md)
    assert "## Summary" in md and "failed or timed out" in md


def test_json_is_the_analysis(analysis):
    assert json.loads(render_json(analysis)) == analysis
    a = copy.deepcopy(analysis)
    a["points"][0]["stats"]["cv"] = float("nan")
    a["points"][0]["stats"]["max"] = float("inf")
    text = render_json(a)
    assert "NaN" not in text and "Infinity" not in text
    back = json.loads(text)
    assert back["points"][0]["stats"]["cv"] is None and back["points"][0]["stats"]["max"] is None


# ---------------------------------------------------------------------- terminal

def test_terminal_shows_verdicts_and_ratios(analysis):
    out = terminal_text(analysis)
    for word in ("equivalent", "slower", "baseline"):
        assert word in out
    assert RATIO_CI.search(out)
    assert re.search(r"var/base \[\d+(\.\d+)?%\]", out)  # the column's name and level
    assert "±" in out and "%" in out
    # per-size kernels collapse to representative sizes, and say where the rest is
    assert "showing 8 of 23 rows" in out and "HTML report" in out
    latency = out.split("latency (us)", 1)[1].split("\n\n\n", 1)[0]
    for size in ("1 B", "8 B", "1 KiB", "64 KiB", "1 MiB", "4 MiB"):
        assert re.search(rf"^\s*{size}\s", latency, re.M), size
    # the summary in words, per variant (wrapped at the console's width)
    flat = " ".join(out.split())
    # variants named as the answers name them (answer_text.variant_names)
    assert re.search(r"Bind mode on Charliecloud \(MPICH\): equivalent to Native \(MPICH\) within ±3% at \d+ of \d+ "
                     r"compared points", flat), flat
    assert re.search(r"slower at \d+ \(worst: \+\d+% at [^)]*KiB", flat)
    assert "failed or timed out" in out and "BAD TERMINATION" in out
    assert max(len(line) for line in out.splitlines()) <= 120


def test_terminal_narrow_console_drops_columns_not_words(analysis):
    out = terminal_text(analysis, width=80)
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "inconclusive" in out and "equivalent" in out and "…" not in out
    assert RATIO_CI.search(out)


def test_terminal_with_one_kernel():
    out = terminal_text(synthetic_analysis(seed=5, n_variants=3, kernels=("barrier",), n_failures=0))
    assert "barrier" in out and "No failed runs" in out and "showing" not in out


# ---------------------------------------------------------------------- helpers

def test_representative_sizes():
    sizes = [1 << i for i in range(23)]
    rep = RS.representative_sizes(sizes)
    assert len(rep) == 8
    assert {1, 8, 1024, 65536, 1 << 20, 4 << 20} <= set(rep)
    assert RS.representative_sizes([4, 8]) == [4, 8]
    assert F.fmt_size(65536) == "64 KiB" and F.fmt_size(8) == "8 B" and F.fmt_size(3 << 19) == "1.5 MiB"


def test_overhead_ci_follows_the_ratio():
    """The analysis maps the ratio's interval to the overhead's (a time and a rate alike); the
    report shows that interval as it is."""
    from nearmetal.analysis.stats import with_overhead

    lower = with_overhead({"ratio": 1.10, "ci_low": 1.05, "ci_high": 1.15}, higher_is_better=False)
    assert lower["overhead_pct"] == pytest.approx(10.0)
    assert PT.overhead_ci(lower) == pytest.approx((5.0, 15.0))
    higher = with_overhead({"ratio": 0.8, "ci_low": 0.75, "ci_high": 0.85}, higher_is_better=True)
    assert higher["overhead_pct"] == pytest.approx(25.0)
    lo, hi = PT.overhead_ci(higher)
    assert lo == pytest.approx((1 / 0.85 - 1) * 100) and hi == pytest.approx((1 / 0.75 - 1) * 100)
    assert PT.overhead_ci(with_overhead({"ratio": 1.0, "ci_low": None, "ci_high": None}, False)) is None
    assert F.fmt_ratio({"ratio": 1.034, "ci_low": 0.99, "ci_high": 1.071}) == "1.034 [0.990–1.071]"


def test_phase_components_mapping():
    assert K.phase_class("compute_s") == "compute" and K.phase_class("halo_s") == "comm"
    assert K.phase_class("allreduce_s") == "comm" and K.phase_class("total_s") == "total"
    parts, total = K.stack_parts({"compute_s": 4.0, "comm_s": 1.5, "halo_s": 0.8, "allreduce_s": 0.5,
                                  "total_s": 5.6})
    assert total == 5.6
    names = [n for _, n, _ in parts]
    assert names == ["compute_s", "allreduce_s", "halo_s", "comm (other)"]
    assert sum(v for _, _, v in parts) == pytest.approx(5.5)


def test_short_variant_labels(analysis):
    labels, dropped = PT.short_variant_labels(analysis)
    assert labels["bind/charliecloud/mpich/default"] == "bind/mpich"
    assert "runtime charliecloud" in dropped and len(set(labels.values())) == len(labels)


# ---------------------------------------------------------------------- size (not a timing assertion)

def test_large_report_renders(tmp_path, capsys):
    """~2,000 points x 6 variants (a ~100,000-run study): render every format and print the
    times; the numbers go into the report, no assertion on them."""
    t0 = time.perf_counter()
    big = synthetic_analysis(n_variants=6, scale="large", reps=160)
    t1 = time.perf_counter()
    times = {}
    for fmt in FORMATS:
        t = time.perf_counter()
        write_report(big, tmp_path, fmt)
        times[fmt] = time.perf_counter() - t
    t = time.perf_counter()
    text = terminal_text(big)
    times["terminal"] = time.perf_counter() - t
    npoints = len({(p["benchmark"], p["metric"], json.dumps(p["point"], sort_keys=True), p["ranks"], p["threads"])
                   for p in big["points"]})
    with capsys.disabled():
        print(f"\nlarge synthetic analysis: {npoints} points x {len(big['variants'])} variants = "
              f"{len(big['points'])} entries, {big['runs']['total']} runs (built in {t1 - t0:.1f} s); "
              + ", ".join(f"{k} {v:.2f} s" for k, v in times.items()))
    assert npoints >= 1900 and len(big["variants"]) == 6 and big["runs"]["total"] >= 90_000
    assert "showing" in text
    html = (tmp_path / "report.html").read_text()
    assert html.count("<svg") <= 40  # figures per benchmark/metric, not per point
    # every format written in full: one CSV row and one JSON point per entry
    with open(tmp_path / "points.csv", newline="") as f:
        assert sum(1 for _ in csv.DictReader(f)) == len(big["points"])
    assert len(json.loads((tmp_path / "analysis.json").read_text())["points"]) == len(big["points"])
    assert "| " in (tmp_path / "report.md").read_text()


def test_terminal_narrow_console_never_breaks_a_variant_label():
    """A study of one point ('—') with long variant labels (two runtimes: none is dropped) and
    wide medians: at 80 columns the empty point column goes first, and a label is never folded
    ('hybrid/charliecloud/openmp' + 'i' on the next line made a GROMACS study's summary test flaky)."""
    a = synthetic_analysis(seed=5, n_variants=5, kernels=("barrier",), placements=[(2, 1)], n_failures=0)
    renamed = {}
    for v in a["variants"]:
        if v["id"].startswith("bind/charliecloud/openmpi"):
            renamed[v["id"]] = v["id"].replace("charliecloud", "apptainer")
    for v in a["variants"]:
        v["id"] = renamed.get(v["id"], v["id"])
        v["baseline"] = renamed.get(v["baseline"], v["baseline"])
    for p in a["points"]:
        p["variant"] = renamed.get(p["variant"], p["variant"])
        p["unit"] = "ns/day"
        p["values"] = [x * 1e9 for x in p["values"]]
        p["stats"] = {k: x * 1e9 if k in ("median", "min", "max", "p5", "p95", "mean") else x
                      for k, x in p["stats"].items()}
    labels, _ = PT.short_variant_labels(a)
    assert "hybrid/charliecloud/openmpi" in labels.values()
    out = terminal_text(a, width=80)
    assert max(len(line) for line in out.splitlines()) <= 80
    for label in labels.values():
        assert any(f" {label} " in line for line in out.splitlines()), (label, out)


@pytest.mark.parametrize("width", [80, 60])
def test_terminal_table_of_baseline_rows_only_drops_columns_not_cells(width):
    """Every compared variant failed: only baseline rows are left, their ratio cells '—' under
    a 'var/base [95%]' header wider than any cell; the columns are measured with the header as
    shown, so columns go (n, noise, overhead) and no cell is cut ('native/openmp', '5.00 1/')."""
    a = synthetic_analysis(seed=5, n_variants=3, kernels=("barrier",), placements=[(2, 1)], n_failures=0)
    bases = PT.baseline_ids(a)
    a["points"] = [dict(p, comparison=None) for p in a["points"] if p["variant"] in bases]
    out = terminal_text(a, width=width)
    assert max(len(line) for line in out.splitlines()) <= width
    labels, _ = PT.short_variant_labels(a)
    shown = [labels[b] for b in bases]
    for p in a["points"]:
        median = f"{F.fmt_num(PT.median_of(p))} {p['unit']}".strip()
        assert any(f" {median} " in line or line.endswith(f" {median}") for line in out.splitlines()), (median, out)
    assert all(any(f" {label} " in line for line in out.splitlines()) for label in shown), out


def test_csv_writes_an_interval_as_two_columns_whether_or_not_a_point_has_one():
    """One column set for every study: comparison.overhead_ci.low/.high, empty where a point has
    no interval (an imported summary of n = 1), never a plain overhead_ci column."""
    from nearmetal.analysis.stats import with_overhead

    a = synthetic_analysis(seed=5, n_variants=3, kernels=("barrier",), placements=[(2, 1)], n_failures=0)
    compared = [p for p in a["points"] if p.get("comparison")]
    assert len(compared) >= 2
    compared[0]["comparison"] = with_overhead({"ratio": 1.2, "ci_low": None, "ci_high": None, "verdict": "inconclusive"},
                                              False)
    fields, rows = csv_rows(a)
    assert "comparison.overhead_ci.low" in fields and "comparison.overhead_ci.high" in fields
    assert "comparison.overhead_ci" not in fields
    by_id = {id(p): r for p, r in zip(a["points"], rows)}
    assert by_id[id(compared[0])]["comparison.overhead_ci.low"] is None
    assert isinstance(by_id[id(compared[1])]["comparison.overhead_ci.low"], float)
