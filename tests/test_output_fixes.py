"""Output a person can live with (issue 12, item 6): no library warning reaches the user
when a label holds a tab, imported placements read "2×1" (and `ranks` is the placement, not
a point parameter), `import --db sub/x.db` writes the report beside the database, and a
range of one value is printed once. In-process (unit tier), but for one `nearmetal import`
whose figures are drawn in worker processes, as a user's are."""

import logging
import os
import warnings

import pytest

from nearmetal.report import plot_base as B
from nearmetal.report import summaries as S
from nearmetal.report import write_report
from nearmetal.analysis.analyze import analyze
from nearmetal.study.store.importer import import_csv

from conftest import nearmetal

unit = pytest.mark.unit


def _import(tmp_path, text, study="s", baseline="base"):
    csv = tmp_path / "in.csv"
    csv.write_text(text)
    store, _, n = import_csv(csv, tmp_path / "x.db", study, baseline)
    try:
        return analyze(store, study), n
    finally:
        store.close()


def _runs(variants, points=({},), n=5):
    """Per-run CSV rows: every variant at every point, n blocks, a small deterministic spread."""
    cols = sorted({k for p in points for k in p})
    lines = [",".join(["variant", "metric", "block", "value"] + cols)]
    for vi, (v, scale) in enumerate(variants):
        for p in points:
            for b in range(n):
                value = scale * (1.0 + 0.01 * ((b * 7 + vi) % 5))
                lines.append(",".join([v, "t", str(b), f"{value:.4f}"] + [str(p.get(c, "")) for c in cols]))
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ figures: no library warnings


@unit
def test_clean_label_drops_control_characters_and_keeps_dollars_literal():
    assert B.clean_label("fast\tone") == "fast one"
    assert B.clean_label("a\x07b\x00c\r\n") == "abc \n"
    assert B.clean_label("a$b$c") == "a\\$b\\$c"  # matplotlib draws '\$' as '$', no mathtext
    assert B.clean_label(3.5) == 3.5


LABELS = [("base", 1.0), ('"fast\tone"', 1.2), ('"a$b$c"', 0.9)]
SIZES = [{"size": 8}, {"size": 1024}]


@unit
def test_a_tab_in_a_label_draws_no_warning(tmp_path, capfd, monkeypatch):
    """A variant named with a tab (quoted in the CSV): the HTML report renders its figures
    with no warning recorded, nothing on stderr, and the tab drawn as a space."""
    monkeypatch.setenv("NEARMETAL_REPORT_JOBS", "1")  # figures drawn here, where warnings are seen
    analysis, _ = _import(tmp_path, _runs(LABELS, points=SIZES))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        path = write_report(analysis, tmp_path / "out", "html")
    assert [str(w.message) for w in seen] == []
    err = capfd.readouterr().err
    assert "Glyph" not in err and "Warning" not in err, err
    html = path.read_text()
    assert "<svg" in html
    assert "fast one" in html
    assert "a$b$c" in html


def test_import_with_a_tab_in_a_label_prints_no_warning(tmp_path):
    """The same through `nearmetal import`, figures drawn in worker processes."""
    (tmp_path / "in.csv").write_text(_runs(LABELS, points=SIZES))
    out = nearmetal("import", str(tmp_path / "in.csv"), "--study", "s", "--baseline", "base",
                    "--db", str(tmp_path / "x.db"), timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Glyph" not in out.stderr and "Warning" not in out.stderr and "warn" not in out.stderr, out.stderr
    assert "fast one" in (tmp_path / "report.html").read_text()


@unit
def test_figures_keep_warning_filters_and_matplotlib_logging_as_they_were():
    log = logging.getLogger("matplotlib")
    level = log.level
    filters = list(warnings.filters)
    with B.rc():
        warnings.warn("inside")  # swallowed
        assert log.level == logging.ERROR
    assert warnings.filters == filters and log.level == level


# ------------------------------------------------------------------ imported placements


@unit
def test_imported_ranks_are_the_placement_and_threads_default_to_one(tmp_path):
    text = _runs([("base", 1.0), ("hybrid", 1.1)], points=[{"ranks": 2, "size": 8}, {"ranks": 4, "size": 8}])
    analysis, _ = _import(tmp_path, text)
    pts = analysis["points"]
    assert {(p["ranks"], p["threads"]) for p in pts} == {(2, 1), (4, 1)}
    assert all(p["point"] == {"size": 8} for p in pts)  # ranks is no point parameter
    from nearmetal.report import formatting as F

    assert {F.fmt_placement(p["ranks"], p["threads"]) for p in pts} == {"2×1", "4×1"}


@unit
def test_imported_threads_column_is_the_placement_too(tmp_path):
    text = _runs([("base", 1.0), ("hybrid", 1.1)], points=[{"ranks": 2, "threads": 4}])
    analysis, _ = _import(tmp_path, text)
    assert {(p["ranks"], p["threads"], tuple(p["point"])) for p in analysis["points"]} == {(2, 4, ())}


@unit
def test_import_without_a_placement_shows_none(tmp_path):
    text = _runs([("base", 1.0), ("hybrid", 1.1)], points=[{"cores": 216}, {"cores": 432}])
    analysis, _ = _import(tmp_path, text)
    assert {(p["ranks"], p["threads"]) for p in analysis["points"]} == {(0, 0)}
    assert {p["point"]["cores"] for p in analysis["points"]} == {216, 432}


# ------------------------------------------------------------------ import --db: report beside it


@unit
def test_import_db_in_a_subdirectory_writes_the_report_beside_it(tmp_path, monkeypatch):
    monkeypatch.setenv("NEARMETAL_REPORT_JOBS", "1")  # no worker processes in the unit tier
    from nearmetal.cli import main

    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "in.csv").write_text(_runs([("base", 1.0), ("hybrid", 1.1)]))
    monkeypatch.chdir(cwd)
    assert main(["import", "in.csv", "--study", "s", "--baseline", "base", "--db", "sub/x.db"]) == 0
    assert (cwd / "sub" / "report.html").is_file()
    assert sorted(os.listdir(cwd)) == ["in.csv", "sub"]
    assert main(["import", "in.csv", "--study", "t", "--baseline", "base", "--db", "sub/x.db", "--out", "rep"]) == 0
    assert (cwd / "rep" / "report.html").is_file()


@unit
def test_import_docs_mention_out():
    from pathlib import Path

    doc = (Path(__file__).resolve().parent.parent / "docs" / "import.md").read_text()
    assert "--out" in doc


# ------------------------------------------------------------------ a range of one value


def _inconclusive_analysis(overheads):
    points = [{"benchmark": "b", "metric": "t", "unit": "s", "point": {"size": 8 << i}, "ranks": 2, "threads": 1,
               "variant": "v",
               "baseline": "base",
               "comparison": {"verdict": "inconclusive", "overhead_pct": oh, "margin": 0.03}}
              for i, oh in enumerate(overheads)]
    return {"study": {"margin": 0.03}, "points": points, "variants": [{"id": "base"}, {"id": "v", "baseline": "base"}]}


def _text(overheads):
    (v,) = [s for s in S.variant_summaries(_inconclusive_analysis(overheads)) if s["variant"] == "v"]
    return v["text"]


@unit
def test_a_range_of_one_value_is_printed_once():
    text = _text([18.7])
    assert text.endswith("; overhead +18.7%."), text


@unit
def test_a_range_of_values_that_print_alike_is_printed_once():
    text = _text([18.71, 18.69])
    assert text.endswith("; overhead +18.7%."), text


@unit
def test_a_range_of_different_values_keeps_its_ends_and_median():
    text = _text([1.0, 5.0, 18.7])
    assert "overhead +1.0% to +18.7% (median +5.0%)" in text, text


@unit
def test_imported_threads_without_ranks_is_one_rank(tmp_path):
    text = _runs([("base", 1.0), ("hybrid", 1.1)], points=[{"threads": 4, "size": 8}])
    analysis, _ = _import(tmp_path, text)
    assert {(p["ranks"], p["threads"]) for p in analysis["points"]} == {(1, 4)}


@unit
def test_imported_blocks_count_per_placement(tmp_path):
    """Without a block column, rows are numbered per cell: the placement is part of it."""
    lines = ["variant,metric,ranks,value"]
    for v, scale, order in (("base", 1.0, (2, 4)), ("hybrid", 1.5, (4, 2))):  # hybrid's rows in another order
        for ranks in order:
            lines += [f"{v},t,{ranks},{scale * (1 + 0.01 * b):.3f}" for b in range(4)]
    analysis, n = _import(tmp_path, "\n".join(lines) + "\n")
    assert n == 16
    hybrid = [p for p in analysis["points"] if p["variant"] == "hybrid"]
    assert len(hybrid) == 2 and all(p["comparison"]["n_pairs"] == 4 for p in hybrid), hybrid


@unit
def test_the_summary_counts_the_answered_metrics_and_says_the_others_apart():
    """A program's wall time is no answer (start-up included): the answers said "none slower",
    the Summary "slower at 1 (worst: +23% at halo wall_time)" (a new user's report). Its counts
    are the answered metrics'; the others follow, named as not answered, with the reason."""
    analysis = _inconclusive_analysis([1.0])
    analysis["points"].append({"benchmark": "b", "metric": "wall_time", "point": {}, "ranks": 2, "threads": 1,
                               "variant": "v", "baseline": "base",
                               "comparison": {"verdict": "slower", "overhead_pct": 23.0, "margin": 0.03}})
    analysis["answers"] = {"not_answered": [{"benchmark": "b", "metric": "wall_time", "why": "start-up included"}]}
    (v,) = [s for s in S.variant_summaries(analysis) if s["variant"] == "v"]
    assert v["counts"]["slower"] == 0 and v["compared"] == 1, v
    assert "slower at" not in v["text"] and v["text"].endswith(
        "Not answered: b wall_time slower +23% (start-up included)."), v["text"]
    # a reciprocal folded into the metric it mirrors is answered (as that one), not said apart;
    # another metric left out for a reason of its own is said with that reason
    analysis["points"].append({**analysis["points"][-1], "metric": "rate", "comparison": {
        "verdict": "faster", "overhead_pct": -12.0, "margin": 0.03}})
    analysis["points"].append({**analysis["points"][-1], "metric": "extra", "comparison": {
        "verdict": "equivalent", "overhead_pct": 1.0, "margin": 0.03}})
    analysis["answers"]["not_answered"] += [
        {"benchmark": "b", "metric": "rate", "why": "the reciprocal of t, answered as t", "answered_as": "t"},
        {"benchmark": "b", "metric": "extra", "why": "another reason"}]
    (v,) = [s for s in S.variant_summaries(analysis) if s["variant"] == "v"]
    assert v["text"].endswith("Not answered: b wall_time slower +23% (start-up included); b extra equivalent "
                              "+1.0% (another reason)."), v["text"]
    assert "rate" not in v["text"].split("Not answered")[1]


@unit
def test_counts_and_check_values_are_no_costs_in_the_tables_or_the_summary():
    """A coupled model's checksum (unitless) and an I/O kernel's bytes and files were tables
    'lower is better' and counted 'inconclusive' in the Summary (a new user's MPMD study): they
    are not costs, as the answers already knew (analysis.answers.is_cost)."""
    from nearmetal.report import points as PT

    analysis = _inconclusive_analysis([1.0])
    for metric, unit, kernel in (("checksum", "", "coupled"), ("bytes", "bytes", "iobench"), ("files", "count", "iobench")):
        analysis["points"].append({"benchmark": "b", "metric": metric, "unit": unit, "kernel": kernel, "point": {},
                                   "ranks": 2, "threads": 1, "variant": "v", "baseline": "base",
                                   "comparison": {"verdict": "inconclusive", "overhead_pct": 0.0, "margin": 0.03}})
    (v,) = [s for s in S.variant_summaries(analysis) if s["variant"] == "v"]
    assert v["compared"] == 1 and v["counts"]["inconclusive"] == 1, v
    assert [PT.direction_words(p) for p in analysis["points"]] == ["lower is better"] + \
        ["a count or check value, not a cost"] * 3
    assert PT.direction_words({"unit": "GB/s", "higher_is_better": True}) == "higher is better"
