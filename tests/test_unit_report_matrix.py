"""The first screen's verdict matrix (nearmetal.report.matrix): its cells are the analysis's
answers as they are, its summary counts them, and the terminal prints it within 100 columns
however many and however long the benchmarks and variants are."""

import re
from io import StringIO

import pytest
from rich.console import Console

from nearmetal.analysis.answers import answers
from nearmetal.report import matrix as M
from nearmetal.report import render_terminal
from test_answers import BIND, HYBRID, bandwidth, build, latency

pytestmark = pytest.mark.unit

NATIVE_MPICH = {"mode": "native", "runtime": None, "mpi": "mpich", "image": None}


def analysed(benchmarks, variants, **kw):
    data = build(benchmarks, variants, **kw)
    data["answers"] = answers(data, n_boot=300)
    return data


def test_cells_are_the_answers_as_the_analysis_gives_them():
    data = analysed([latency(n=3), bandwidth(n=3)], [(BIND, 1.0), (HYBRID, {"bw": 1.2, "latency": 1 / 1.2})])
    m = M.build(data)
    entries = data["answers"]["by_benchmark"]
    assert m["cols"] == ["bandwidth", "latency"]
    assert [r["name"] for r in m["rows"]] == [v["name"] for v in data["answers"]["by_variant"]]
    assert len(entries) == 4
    for e in entries:
        row = next(r for r in m["rows"] if r["variant"] == e["variant"])
        c = row["cells"][m["cols"].index(e["label"])]
        assert (c["ratio"], c["lo"], c["hi"]) == (e["cost_ratio"], e["ci_low"], e["ci_high"])
        assert c["verdict"] == e["verdict"] and c["disturbed"] == 0
        assert c["ratio_txt"] == f"{e['cost_ratio']:.3f}" and c["interval_txt"] == f"[{e['ci_low']:.3f}–{e['ci_high']:.3f}]"
    hybrid = next(r for r in m["rows"] if "Hybrid" in r["name"])["cells"]
    assert [c["verdict"] for c in hybrid] == ["slower", "faster"]
    assert [c["mark"] for c in hybrid] == ["▲", "▼"] and m["level"] == "95%" and m["margin"] == "±3%"


def test_the_summary_counts_the_variants_and_names_the_largest_difference():
    data = analysed([latency(n=3), bandwidth(n=3)], [(BIND, 1.0), (HYBRID, {"bw": 1.25})])
    summary = M.build(data)["summary"]
    assert 2 <= len(summary) <= 4
    assert summary[0] == ("2 variants × 2 benchmarks compared with their baseline at a margin of ±3%: "
                          "1 equivalent on every benchmark; 1 slower on at least one.")
    assert re.fullmatch(r"The largest difference: Hybrid mode on Charliecloud \(Open MPI\) is slower on bandwidth, "
                        r"cost ratio 1\.2\d\d \[1\.2\d\d–1\.2\d\d\]\.", summary[1])


def test_an_undecided_cell_reads_undecided_and_is_counted():
    data = analysed([latency(n=2)], [(BIND, 1.0)], reps=4, noise=0.2)
    m = M.build(data)
    (cell,) = m["rows"][0]["cells"]
    assert data["answers"]["by_benchmark"][0]["verdict"] == "inconclusive"
    assert (cell["word"], cell["mark"]) == ("undecided", "?")
    assert m["summary"][0].endswith(": 1 undecided on at least one and neither slower nor faster on any.")
    assert m["summary"][1:] == ["1 of 1 cell is undecided (?): the detail below says why for each."]


def test_a_disturbed_cell_is_marked_and_the_busy_machine_is_said_first():
    data = build([latency(n=3), bandwidth(n=3)], [(BIND, 1.0)])
    for p in data["points"]:
        if p["benchmark"] == "bw" and p["variant"].startswith("bind"):
            p["disturbed"] = 2  # two of its values from runs on a busy machine
    data["answers"] = answers(data, n_boot=300)
    data["contention"] = {"text": "6 of 60 runs were taken on a busy machine (...): their points are marked ⚠."}
    m = M.build(data)
    bw, lat = m["rows"][0]["cells"]
    assert (bw["disturbed"], lat["disturbed"]) == (6, 0)
    assert M.cell_text(bw).endswith(" ⚠") and "⚠" not in M.cell_text(lat)
    assert "6 of its values from runs on a busy machine" in bw["title"]
    assert m["summary"][-1] == "⚠ 6 of 60 runs were taken on a busy machine (...): their points are marked ⚠."
    from nearmetal.report.tables import render_markdown

    row = next(line for line in render_markdown(data).splitlines() if line.startswith("| Bind mode"))
    assert re.fullmatch(r"\| Bind mode on Charliecloud \(Open MPI\) \| ≈ \S+ \[\S+\] equivalent ⚠ \| "
                        r"≈ \S+ \[\S+\] equivalent \|", row), row
    data["points"] = [dict(p, disturbed=0) for p in data["points"]]
    data["answers"] = answers(data, n_boot=300)
    assert not any("busy" in s for s in M.build(data)["summary"])  # said only where a cell is marked


def test_all_equivalent_still_says_two_sentences_the_second_the_ratio_farthest_from_1():
    data = analysed([latency(n=3), bandwidth(n=3)], [(BIND, {"bw": 1.012})], noise=0.002)
    m = M.build(data)
    assert [c["verdict"] for c in m["rows"][0]["cells"]] == ["equivalent", "equivalent"]
    assert len(m["summary"]) == 2 and m["summary"][0].endswith(": 1 equivalent on every benchmark.")
    assert re.fullmatch(r"No cell is decided slower or faster; the equivalent ratio farthest from 1: Bind mode on "
                        r"Charliecloud "
                        r"\(Open MPI\) on bandwidth, 1\.01\d \[1\.0\d\d–1\.0\d\d\]\.", m["summary"][1])


def test_no_answers_no_matrix():
    assert M.build({"points": []}) is None
    assert M.build({"answers": {"by_benchmark": [], "by_variant": []}}) is None


def many():
    """Fourteen benchmarks with long names, three variants with long names."""
    names = [f"an-exceedingly-long-benchmark-name-{i:02d}" if i % 3 else f"b{i}" for i in range(14)]
    variants = [(BIND, 1.0), (HYBRID, {names[1]: 1.3}),
                ({"name": "a variant whose name is far longer than any column could hold", "mode": "hybrid",
                  "runtime": "podman", "mpi": "openmpi", "image": "default"}, 0.8)]
    return analysed([latency(n=2, name=n) for n in names], variants, reps=6), names


@pytest.mark.parametrize("width", [100, 80, 60])
def test_the_terminal_matrix_fits_the_width_in_column_groups(width):
    data, names = many()
    m = M.build(data)
    lines = ["".join(seg for seg, _ in line) for line in M.terminal_lines(m, width)]
    assert lines and max(map(len, lines)) <= width
    assert all(line == line.rstrip() for line in lines)
    groups = M.split_columns(m, width)
    assert [j for g in groups for j in g] == list(range(len(names))) and len(groups) > 1
    assert sum(1 for line in lines if line and set(line) == {"─"}) == len(groups)
    text = "\n".join(lines)
    for r in m["rows"]:  # every cell printed whole, on its row
        for c in r["cells"]:
            assert M.cell_text(c) in text
    heads = " ".join(" ".join(lines).split())
    for n in names:  # every benchmark's name, wrapped after a hyphen where it is too long, but whole
        pieces = M.wrap_label(n, M.MAX_COL)
        assert all(p in heads for p in pieces) and "".join(pieces) == n
        assert len(n) <= M.MAX_COL or pieces[0].endswith("-")


def test_the_terminal_first_screen_stays_within_100_columns():
    data, _ = many()
    console = Console(file=StringIO(), width=160, color_system=None)
    render_terminal(data, console)
    text = console.file.getvalue()
    first = text[:text.index(data["answers"]["headline"][0][:30])]  # summary, matrix, legend
    assert max(len(line) for line in first.split("\n")) <= 100
    assert first.startswith("Answer (study t)\n3 variants × 14 benchmarks compared")
    assert "▲ 1.3" in first and "▼ 0.8" in first


def test_a_long_label_wraps_within_its_width():
    assert M.wrap_label("Hybrid mode on Charliecloud (Open MPI)", 20) == ["Hybrid mode on", "Charliecloud (Open", "MPI)"]
    assert M.wrap_label("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]
    assert M.wrap_label("an-exceedingly-long-benchmark-name-01", 22) == ["an-exceedingly-long-", "benchmark-name-01"]
    assert M.wrap_label("io_shared_mpiio.collective", 12) == ["io_shared_", "mpiio.", "collective"]
    assert M.wrap_label("", 10) == [""]


def test_ratios_keep_the_digits_that_tell_a_margin_apart():
    assert [M.fmt_ratio(x) for x in (1.0041, 0.9687, 6.4, 12.34, 250.0, 0.0123, None)] == [
        "1.004", "0.969", "6.40", "12.3", "250", "0.0123", "—"]


def test_a_sentence_writes_each_number_of_a_wide_interval_with_its_own_digits():
    """A walk-through's Slurm study printed 'cost ratio 0 [0–1066]' beside the table's 0.259: one
    number of decimals for the ratio and both ends, chosen by the largest, rounded 0.259 away."""
    from nearmetal.analysis.answer_text import _ratio_words
    from nearmetal.report.formatting import fmt_ratio

    e = {"cost_ratio": 0.259, "ci_low": 6.28e-05, "ci_high": 1066.0, "n_points": 1, "level_words": "90% interval"}
    assert _ratio_words(e) == "cost ratio 0.259 [6.28e-05–1066], 90% interval, 1 point"
    assert fmt_ratio({"ratio": 0.259, "ci_low": 6.28e-05, "ci_high": 1066.0}) == "0.259 [6.28e-05–1066]"
    assert M.fmt_ratio(0.259) == "0.259"  # the matrix's cell: the same digits
