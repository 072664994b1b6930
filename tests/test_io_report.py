"""The HTML report's parallel-I/O section: synthetic iobench records in a real SQLite store
(tests/synthetic_io.py) analysed by analysis.analyze (and its I/O analysis, io.analysis) and
rendered; expected values are computed here straight from the store's records, not by the
report code."""

import json
import math
import re
import sqlite3
import statistics

import pytest

from nearmetal.io import analysis as IO
from nearmetal.report import formatting as F
from nearmetal.report.html import render_html
from nearmetal.analysis.analyze import analyze
from nearmetal.study.store.store import Store

from conftest import nearmetal
from synthetic import synthetic_analysis
from synthetic_io import synthetic_io_store

HEATMAP = "Parallel I/O: write bandwidth vs aggregators × stripes"
PHASES = "Parallel I/O: time per phase vs io_layout"
CHUNKS = "Parallel I/O: write time vs chunk layout"
BALANCE = "Parallel I/O: per-rank write time (load balance)"

SWEEP = (["serial/posix read=serial", "file-per-rank/posix read=serial",
          "io-domains/posix io=1x1 read=serial", "io-domains/posix io=2x1 read=serial",
          "shared/mpiio io=1x1 read=serial", "shared/mpiio io=2x1 read=serial",
          "shared/pnetcdf io=2x1 read=serial", "shared/hdf5 io=2x1 chunk=default read=serial",
          "shared/netcdf4 io=2x1 chunk=default read=serial"]
         + [f"shared/mpiio io=2x1 aggr={a} stripes={s} read=serial" for a in (1, 2, 4) for s in (1, 2, 4)]
         + [f"shared/hdf5 io=2x1 chunk={x}x{y} read=serial" for x in (1, 2, 4) for y in (1, 2)])
IGNORED = "shared/mpiio io=2x1 aggr=1 stripes=4 read=serial"


def render(db, tmp_path, name="report.html"):
    store = Store(db)
    try:
        a = analyze(store)
    finally:
        store.close()
    render_html(a, tmp_path / name)
    return a, (tmp_path / name).read_text(encoding="utf-8")


def medians(db, metric, rank, variant=None):
    """{benchmark: median} of one metric at one rank point, straight from the records."""
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT r.benchmark, c.value FROM records c JOIN runs r ON r.id = c.run_id "
                           "WHERE c.metric = ? AND c.point_json = ? AND (? IS NULL OR r.variant = ?)",
                           (metric, json.dumps({"rank": rank}), variant, variant)).fetchall()
    finally:
        con.close()
    by = {}
    for bench, v in rows:
        by.setdefault(bench, []).append(v)
    return {b: statistics.median(v) for b, v in by.items()}


def paired_speedup(db, metric, rank, reference, label):
    """1 / the paired ratio of stats.compare, computed independently: the 20% trimmed mean
    (scipy.stats.trim_mean) of the per-block log ratios label/reference."""
    from scipy.stats import trim_mean

    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT r.benchmark, r.block, c.value FROM records c JOIN runs r ON r.id = c.run_id "
                           "WHERE c.metric = ? AND c.point_json = ? AND r.warmup = 0 AND r.status = 'ok'",
                           (metric, json.dumps({"rank": rank}))).fetchall()
    finally:
        con.close()
    by = {}
    for bench, block, v in rows:
        by.setdefault(bench, {})[block] = v
    ref, row = by[reference], by[label]
    logs = [math.log(row[b] / ref[b]) for b in sorted(set(ref) & set(row))]
    return 1 / math.exp(trim_mean(logs, 0.2))


def figure(html, title):
    """The <figure> whose heading is title ('' when absent)."""
    m = re.search(r"<figure id=\"[^\"]+\">\s*<h3>" + re.escape(title) + r"</h3>(.*?)</figure>",
                  html, re.S)
    return m.group(1) if m else ""


def svg_texts(fig_html):
    return [t.strip() for t in re.findall(r"<text[^>]*>([^<]*)</text>", fig_html)]


def io_rows(html):
    """Table rows of the I/O section: [(is_best, label, cells)]."""
    sec = html.split('<section id="io">', 1)[1].split("</section>", 1)[0]
    out = []
    for tr in re.findall(r"<tr( class=\"io-best\")?><td>(.*?)</tr>", sec, re.S):
        best, body = tr
        label = re.sub(r"<[^>]+>", "", body.split("</td>", 1)[0]).split(" (")[0].strip()
        cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", "<td>" + body, re.S)]
        out.append((bool(best), label, cells))
    return out


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    d = tmp_path_factory.mktemp("io")
    db = synthetic_io_store(d / "s.db", SWEEP, reps=7, seed=3, not_honoured={IGNORED: ["striping_factor"]})
    a, html = render(db, d)
    return db, a, html


def test_section_is_in_the_page_with_every_figure(sweep):
    _, _, html = sweep
    assert '<section id="io">' in html and '<a href="#io">Parallel I/O</a>' in html
    for title in (PHASES, HEATMAP, CHUNKS, BALANCE):
        assert "<svg" in figure(html, title), title
    assert "could not be drawn" not in html
    ids = re.findall(r'\bid="([^"]+)"', html)
    assert len(ids) == len(set(ids))  # several inline SVGs, no shared ids


def test_table_best_configuration_and_speedups(sweep):
    db, _, html = sweep
    write = medians(db, "write_s", "max")
    rows = io_rows(html)
    assert {label for _, label, _ in rows} == set(SWEEP)
    fastest = min(write, key=write.get)
    best = [label for is_best, label, _ in rows if is_best]
    assert best == [fastest]
    assert [label for _, label, _ in rows] == sorted(write, key=write.get)  # fastest write first
    cells = {label: c for _, label, c in rows}
    # write s [CI] starts with the median; the speed-up over serial is compare()'s paired
    # ratio (the trimmed mean of the block ratios), inverted
    assert cells[fastest][2].startswith(F.fmt_num(write[fastest]) + " [")
    assert cells["serial/posix read=serial"][7] == "1.00×"
    expect = paired_speedup(db, "write_s", "max", "serial/posix read=serial", fastest)
    sp = re.match(r"(\d+\.\d\d)× \[(\d+\.\d\d)–(\d+\.\d\d)\]", cells[fastest][7])
    assert sp and sp.group(1) == f"{expect:.2f}" and float(sp.group(2)) <= expect <= float(sp.group(3))
    bw = medians(db, "write_bw", "total")
    assert cells[fastest][4] == F.fmt_num(bw[fastest])
    # hints: the one the synthetic library ignored, nothing elsewhere
    assert cells[IGNORED][9] == "striping_factor"
    assert all(c[9] == "—" for label, c in cells.items() if label != IGNORED)
    files = {label: c[6] for label, c in cells.items()}
    assert files["file-per-rank/posix read=serial"] == "2" and files["io-domains/posix io=1x1 read=serial"] == "1"


def cell_texts(texts, ylabel, title):
    """The texts printed in a heatmap's cells: after the y-axis label, before the panel title."""
    start = texts.index(ylabel) + 1
    return texts[start:texts.index(title, start)]


def test_heatmap_cells_are_the_medians(sweep):
    db, _, html = sweep
    bw = medians(db, "write_bw", "total")
    texts = svg_texts(figure(html, HEATMAP))
    # row by row from the bottom (stripes: default, 1, 2, 4), left to right (aggregators: default, 1, 2, 4);
    # the unhinted configuration of the same io_layout is the default/default cell, the io=1x1 one is not drawn
    expect = [bw["shared/mpiio io=2x1 read=serial"]] + [
        bw[f"shared/mpiio io=2x1 aggr={a} stripes={s} read=serial"] for s in (1, 2, 4) for a in (1, 2, 4)]
    assert cell_texts(texts, "stripes (striping_factor)", "mpiio") == [F.fmt_num(v) for v in expect]
    assert texts[:5] == ["default", "1", "2", "4", "aggregators per node (cb_config_list)"]


def test_chunk_grid_and_references(sweep):
    db, _, html = sweep
    write = medians(db, "write_s", "max")
    fig = figure(html, CHUNKS)
    texts = svg_texts(fig)
    expect = [write[f"shared/hdf5 io=2x1 chunk={x}x{y} read=serial"] for y in (1, 2) for x in (1, 2, 4)]
    assert cell_texts(texts, "CY (y split into CY chunks)", "hdf5") == [F.fmt_num(v) for v in expect]
    joined = " ".join(texts)
    assert f"pnetcdf contiguous: {F.fmt_num(write['shared/pnetcdf io=2x1 read=serial'])} s" in joined
    assert f"hdf5 contiguous (default): {F.fmt_num(write['shared/hdf5 io=2x1 chunk=default read=serial'])} s" in joined


def test_phase_and_balance_figures(sweep):
    db, _, html = sweep
    phases = svg_texts(figure(html, PHASES))
    assert {"posix", "mpiio", "open", "write", "close", "read"} <= set(phases)
    assert "pnetcdf" not in phases  # one io_layout only: nothing to draw against
    bal = svg_texts(figure(html, BALANCE))
    write = medians(db, "write_s", "max")
    assert f"fastest: {min(write, key=write.get)}" in bal and "serial: serial/posix read=serial" in bal


def test_figures_absent_without_variation(tmp_path):
    """One rank, one configuration per library: a table and no figure."""
    db = synthetic_io_store(tmp_path / "s.db", ["serial/posix read=serial", "shared/mpiio io=1x1 read=serial",
                                                "shared/hdf5 io=1x1 chunk=2x2 read=serial"], ranks=1, reps=4)
    _, html = render(db, tmp_path)
    sec = html.split('<section id="io">', 1)[1].split("</section>", 1)[0]
    assert "<figure" not in sec and len(io_rows(html)) == 3
    # two ranks: the load balance appears, the others still do not
    db2 = synthetic_io_store(tmp_path / "s2.db", ["serial/posix read=serial", "shared/mpiio io=1x1 read=serial"],
                             ranks=2, reps=4)
    _, html2 = render(db2, tmp_path, "r2.html")
    assert figure(html2, BALANCE) and not figure(html2, PHASES) and not figure(html2, HEATMAP)
    # no iobench at all: no section, no link
    render_html(synthetic_analysis(seed=1, n_variants=3, kernels=("latency",)), tmp_path / "plain.html")
    plain = (tmp_path / "plain.html").read_text()
    assert '<section id="io">' not in plain and "#io" not in plain


def test_ordinary_names_use_the_study_arguments(tmp_path):
    """A regular study (the quickstart): names that are not labels, the configuration in
    the benchmark's args; two MPI families give two tables."""
    benches = [("io-serial", ["-x", "512", "-p", "serial", "-L", "posix"]),
               ("io-fpr", ["-x", "512", "-p", "file-per-rank"]),
               ("io-domains", ["-x", "512", "-p", "io-domains", "-i", "2x1"]),
               ("io-shared", ["-x", "512", "-p", "shared", "-L", "mpiio", "-i", "1x1"])]
    variants = [{"mode": "native", "runtime": None, "mpi": m, "image": None} for m in ("openmpi", "mpich")]
    db = synthetic_io_store(tmp_path / "s.db", benches, variants=variants, reps=5)
    a, html = render(db, tmp_path)
    assert {n: c["label"] for n, c in a["io"]["configurations"].items()} == {
        "io-serial": "serial/posix read=serial", "io-fpr": "file-per-rank/posix read=serial",
        "io-domains": "io-domains/posix io=2x1 read=serial", "io-shared": "shared/mpiio io=1x1 read=serial"}
    sec = html.split('<section id="io">', 1)[1].split("</section>", 1)[0]
    assert re.findall(r'<div class="io-table" id="[^"]+">\s*<h3>([^<]+)</h3>', sec) == ["native/mpich",
                                                                                        "native/openmpi"]
    assert "(io-serial)" in sec and len(io_rows(html)) == 8
    assert figure(html, PHASES) and "posix" in svg_texts(figure(html, PHASES))


def test_configuration_from_arguments():
    args = ["-p", "shared", "-L", "pnetcdf", "-i", "2x1", "-H", "cb_config_list=*:2", "-H", "cb_nodes=2",
            "-H", "striping_factor=4", "-H", "cb_buffer_size=16777216", "-r", "parallel"]
    assert IO.conf_from_args(args).label == "shared/pnetcdf io=2x1 aggr=2 stripes=4 cb=16MiB read=parallel"
    assert IO.conf_from_args(args, {"OMPI_MCA_io": "romio321"}).mpiio == "romio"
    assert IO.conf_from_args([]).label == "shared/mpiio io=1x1 read=serial"  # the kernel's defaults
    assert IO.conf_from_args(["-p", "io-domains"]).label == "io-domains/posix io=1x1 read=serial"
    assert IO.conf_from_args(["-p", "shared", "-L", "posix"]) is None
    assert IO.conf_from_args(["-p"]) is None
    assert IO.conf_from_label("shared/hdf5 io=1x1 chunk=2x2 read=serial").chunk == "2x2"
    assert IO.conf_from_label("io-serial") is None


def test_median_ci_is_the_io_best_interval():
    """The median CI of the I/O analysis (the one the report and `nearmetal io best` print) is
    the documented one: stats.median_ci with 2000 resamples, seed 0; it brackets the median."""
    import numpy as np

    from nearmetal.analysis import stats

    def best_ci(vals):  # docs/io-tuning.md: 2000 resamples, seed 0
        return stats.median_ci(vals, n_boot=2000, seed=0)

    rng = np.random.default_rng(4)
    for n in (2, 3, 7, 10, 31):
        vals = list(rng.lognormal(0, 0.2, n))
        lo, hi = IO.median_ci(vals)
        assert (lo, hi) == best_ci(vals)
        assert lo <= statistics.median(vals) <= hi and min(vals) <= lo and hi <= max(vals)
    assert IO.median_ci([1.0]) is None and IO.median_ci([]) is None


REAL_STUDY = """\
[study]
name = "io-report"
repetitions = 3
warmup = 0
timeout = 120
seed = 5

[matrix]
mode = ["native"]
mpi = ["openmpi"]
ranks = [2]

[[benchmark]]
kernel = "iobench"
name = "serial/posix read=serial"
args = ["-x", "96", "-y", "64", "-z", "4", "-t", "2", "-p", "serial", "-L", "posix"]
workdir = "{workdir}"

[[benchmark]]
kernel = "iobench"
name = "io-fpr"
args = ["-x", "96", "-y", "64", "-z", "4", "-t", "2", "-p", "file-per-rank", "-L", "posix"]
workdir = "{workdir}"

[[benchmark]]
kernel = "iobench"
name = "io-shared"
args = ["-x", "96", "-y", "64", "-z", "4", "-t", "2", "-p", "shared", "-L", "mpiio", "-i", "2x1"]
workdir = "{workdir}"
"""


def test_real_study_report_has_the_io_section(tmp_path):
    """Real nm-iobench runs (2 Open MPI ranks) through `nearmetal study`: a label-named and
    two ordinary-named benchmarks; the report's I/O section names all three configurations
    and marks the one the stored medians say is fastest."""
    work = tmp_path / "work"
    work.mkdir()
    path = tmp_path / "io.toml"
    path.write_text(REAL_STUDY.format(workdir=work))
    db = tmp_path / "s.db"
    out = nearmetal("study", str(path), "--db", str(db), "--no-progress", "--out", str(tmp_path / "out"), timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr
    assert list(work.iterdir()) == []  # the kernel removed its files
    html = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert '<section id="io">' in html
    rows = io_rows(html)
    write = medians(db, "write_s", "max")
    labels = {"serial/posix read=serial": "serial/posix read=serial", "io-fpr": "file-per-rank/posix read=serial",
              "io-shared": "shared/mpiio io=2x1 read=serial"}
    assert sorted(label for _, label, _ in rows) == sorted(labels.values())
    assert [label for best, label, _ in rows if best] == [labels[min(write, key=write.get)]]
    assert all(c[1] == "3" for _, _, c in rows)  # three runs each
    phases = svg_texts(figure(html, PHASES))
    assert {"posix", "serial", "file-per-rank", "write"} <= set(phases)
    assert figure(html, BALANCE)


IO_SWEEP = """\
[study]
name = "agree"
repetitions = 2
warmup = 0
timeout = 120
seed = 3

[io]
grid = [64, 64, 4]
steps = 2
layout = "2x1"
dir = "{dir}"
mpi = ["openmpi"]

[io.space]
pattern = ["serial", "file-per-rank", "shared"]
library = ["posix", "mpiio"]
stripes = [4]

[io.preselect]
enabled = false
"""


def test_io_best_and_the_report_agree_on_a_real_sweep(tmp_path):
    """A tiny real `nearmetal io sweep` (5 configurations x 2 runs, 2 Open MPI ranks on tmpfs):
    `io best --json` and the report (HTML and analysis.json) name the same fastest
    configuration, the same speed-up over serial with the same CI, and the same hints not
    honoured (striping_factor: tmpfs has no stripes), for every configuration."""
    import os
    import shutil

    target = f"/dev/shm/nearmetal-test-io-{os.getpid()}-agree"
    (tmp_path / "io.toml").write_text(IO_SWEEP.format(dir=target))
    db = tmp_path / "res" / "study.db"
    try:
        out = nearmetal("io", "sweep", tmp_path / "io.toml", "--db", db, "--no-progress", timeout=300)
    finally:
        shutil.rmtree(target, ignore_errors=True)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr
    best = {m: json.loads(nearmetal("io", "best", "--db", db, "--metric", m, "--json", check=True).stdout)
            for m in ("write", "total")}
    for fmt in ("html", "json"):
        nearmetal("report", "--db", db, "--study", "agree", "--format", fmt, "--out", tmp_path / "rep", check=True)
    html = (tmp_path / "rep" / "report.html").read_text(encoding="utf-8")
    (group,) = json.loads((tmp_path / "rep" / "analysis.json").read_text())["io"]["groups"]
    report_rows = {r["label"]: r for r in group["rows"]}
    html_rows = {label: (is_best, cells) for is_best, label, cells in io_rows(html)}
    assert set(report_rows) == set(html_rows) == {r["configuration"] for r in best["write"]["rows"]}
    # the fastest write: bold in the page, named by the analysis
    assert [label for label, (is_best, _) in html_rows.items() if is_best] == [best["write"]["best"]]
    assert group["best"] == {"write_s": best["write"]["best"], "total_s": best["total"]["best"]}

    def fmt_speedup(value, ci):
        return f"{value:.2f}×" + (f" [{ci[0]:.2f}–{ci[1]:.2f}]" if ci else "")

    hinted = 0
    for metric, column in (("write", 7), ("total", 8)):
        for row in best[metric]["rows"]:
            label = row["configuration"]
            mine = report_rows[label]["speedup"][f"{metric}_s"]
            assert (mine["value"], mine["ci"]) == (row["speedup"], row["speedup_ci"]), (metric, label)
            assert html_rows[label][1][column] == fmt_speedup(row["speedup"], row["speedup_ci"]), (metric, label)
            not_honoured = sorted(k for k, status in row["hints_status"].items() if status != "honoured")
            assert html_rows[label][1][9] == (", ".join(not_honoured) or "—"), label
            hinted += bool(row["hints_status"])
        top = best[metric]
        assert top["speedup"] == report_rows[top["best"]]["speedup"][f"{metric}_s"]["value"]
        assert any(r["speedup_ci"] for r in top["rows"])  # CIs compared, not only their absence
    assert hinted  # the shared configuration's striping_factor was recorded


def test_quickstart_io_section():
    """The built-in quickstart's I/O benchmarks: valid, on tmpfs, configurations the report
    recognizes, native and bind for both MPI families, a few hundred MiB per block."""
    from nearmetal.study.plan.study_file import builtin_quickstart

    cfg, text = builtin_quickstart()
    io = [b for b in cfg.benchmark if b.kernel == "iobench"]
    confs = {b.label: IO.conf_from_args(b.args, b.env) for b in io}
    assert confs["io-serial"].label == "serial/posix read=serial"
    assert {c.label for c in confs.values()} >= {"file-per-rank/posix read=serial", "shared/mpiio io=2x1 read=serial"}
    assert all(b.workdir == "/dev/shm" for b in io)
    assert {m for b in io for m in b.mode} == {"native", "bind"} and cfg.matrix.mpi == ["openmpi", "mpich"]
    grids = {IO.grid_of(b.args) for b in io}
    assert len(grids) == 1  # one size: the speed-ups over serial compare like with like
    nx, ny, nz = (int(x) for x in grids.pop().split("/")[0].split("x"))
    per_run = nx * ny * nz * (8 + 4) * 2
    per_block = per_run * sum(len(b.mode) * len(cfg.matrix.mpi) for b in io)
    assert 100 << 20 <= per_block <= 1 << 30, per_block
    assert set(IO.configurations(text, [b.label for b in io])) == {b.label for b in io}


def test_speedup_pairs_by_block_when_the_analysis_has_blocks():
    """With each value's block known (analysis entries' `blocks`), the speed-up's CI is the
    paired one of stats.compare, as `io best` computes it; without, the unpaired one."""
    from nearmetal.analysis import stats

    serial_vals, fast_vals = [1.00, 1.30, 0.90, 1.10, 1.20, 0.95], [0.52, 0.66, 0.44, 0.55, 0.61, 0.47]
    blocks = [0, 1, 2, 3, 4, 5]
    order = [3, 0, 5, 1, 4, 2]  # the other configuration's values arrive in another order

    def cell(name, vals, blk):
        entry = {"values": vals, "stats": {"median": statistics.median(vals)}, "blocks": blk}
        conf = IO.conf_from_label(name)
        return IO.Cell(name, conf, {"write_s": IO.Measure.of(entry)}, {}, {})

    serial = cell("serial/posix read=serial", serial_vals, blocks)
    fast = cell("file-per-rank/posix read=serial", [fast_vals[i] for i in order], order)
    sp = IO.speedup(serial, fast, "write_s")
    paired = stats.compare(serial_vals, fast_vals, pairs=list(zip(serial_vals, fast_vals)), n_boot=IO.N_BOOT)
    assert sp["value"] == pytest.approx(1 / paired["ratio"])
    assert sp["ci"] == pytest.approx([1 / paired["ci_high"], 1 / paired["ci_low"]])
    unpaired = stats.compare(serial_vals, [fast_vals[i] for i in order], n_boot=IO.N_BOOT)
    fast.max["write_s"].blocks = None
    assert IO.speedup(serial, fast, "write_s")["ci"] == pytest.approx([1 / unpaired["ci_high"], 1 / unpaired["ci_low"]])
    assert paired["ci_high"] - paired["ci_low"] < unpaired["ci_high"] - unpaired["ci_low"]


def test_terminal_report_has_one_compact_io_table(sweep):
    """The terminal shows one I/O table (not one per configuration x metric), fastest write
    first, with the medians the records give; without a second variant, no empty columns."""
    import io as _io

    from rich.console import Console

    from nearmetal.report.terminal import IO_MAX_ROWS, render_terminal

    db = sweep[0]
    store = Store(db)
    try:
        a = analyze(store)
    finally:
        store.close()
    buf = _io.StringIO()
    render_terminal(a, Console(file=buf, width=160, color_system=None))
    text = buf.getvalue()
    assert text.count("Parallel I/O (iobench)") == 1, text
    assert "write_s" not in text and "total_s" not in text, "no per-metric iobench tables"
    want = medians(db, "write_s", "max")
    fastest_first = sorted(want, key=want.get)[:IO_MAX_ROWS]
    lines = [l for l in text.splitlines() if any(l.strip().startswith(b + " ") for b in want)]
    shown = [next(b for b in sorted(want, key=len, reverse=True) if l.strip().startswith(b + " ")) for l in lines]
    assert shown == fastest_first, (shown, fastest_first)
    first = lines[0].split()
    assert F.fmt_num(want[fastest_first[0]]) in first, lines[0]
    assert "verdict" not in text and "vs baseline" not in text
    if len(want) > IO_MAX_ROWS:
        assert f"{IO_MAX_ROWS} of {len(want)} configurations" in text


def test_io_best_says_ompio_read_no_hint_and_the_hints_file_is_for_romio(tmp_path):
    """A walk-through's fastest configuration ran under Open MPI's default OMPIO: io best said
    its hints were 'not honoured on this file system' and offered them for ROMIO as if they
    had been measured. OMPIO reads no ROMIO hint: that is the reason, and the file is ROMIO's."""
    from nearmetal.io import best as best_mod

    fastest = "shared/mpiio io=2x1 aggr=2 stripes=2 read=serial"
    db = synthetic_io_store(tmp_path / "s.db", ["serial/posix read=serial", fastest], reps=5, seed=1,
                            not_honoured={fastest: ["striping_factor", "cb_nodes"]})
    store = Store(db)
    try:
        result = best_mod.analyze(store, best_mod.find_study(store))
    finally:
        store.close()
    assert result["best"] == fastest and result["ompio"] is True
    assert set(result["hints_status"].values()) == {best_mod.OMPIO_STATUS}, result["hints_status"]


@pytest.mark.unit
def test_io_best_answers_each_variant_and_its_ratio_to_native(tmp_path, capsys):
    """A sweep measured natively and in a container: where the container's fastest
    configuration differs from native's, `io best` gives each variant its own fastest with the
    ratio to the same configuration natively (the study's comparison of that point), and
    --variant writes the files for the container's answer."""
    from nearmetal.errors import NearmetalError
    from nearmetal.io import best as B
    from nearmetal.study.plan.plan import variant_id

    native = {"mode": "native", "runtime": None, "mpi": "openmpi", "image": None}
    bind = {"mode": "bind", "runtime": "charliecloud", "mpi": "openmpi", "image": "nm-test"}
    shared, fpr = "shared/mpiio io=1x1 read=serial", "file-per-rank/posix read=serial"
    # file-per-rank is natively fastest (0.30 s write against 0.375) but three times slower in the container
    db = synthetic_io_store(tmp_path / "s.db", ["serial/posix read=serial", fpr, shared],
                            variants=[native, bind], reps=6, seed=2, in_container={fpr: 3.0})
    a = analyze(Store(db, readonly=True), "io-synthetic")
    point = {(p["benchmark"], p["variant"]): p for p in a["points"]
             if p["metric"] == "write_s" and p["point"].get("rank") == "max"}
    result = B.run(db, metric="write", as_json=True)
    capsys.readouterr()
    container = variant_id(bind)
    mine = {r["variant"]: r for r in result["per_variant"]}
    assert set(mine) == {variant_id(native), container}
    assert mine[variant_id(native)]["configuration"] == result["best"] == fpr
    assert mine[container]["configuration"] == shared
    assert mine[variant_id(native)]["vs_baseline"] is None
    said = point[(shared, container)]["comparison"]
    assert mine[container]["vs_baseline"]["ratio"] == said["ratio"]
    assert mine[container]["vs_baseline"]["variant"] == variant_id(native)
    assert mine[container]["vs_baseline"]["ci"] == [said["ci_low"], said["ci_high"]]
    # the container's file-per-rank: about x3 its native time, called slower
    slow = next(r for r in result["rows"] if r["variant"] == container and r["configuration"] == fpr)
    assert slow["vs_baseline"]["ratio"] == pytest.approx(3.0, rel=0.1) and slow["vs_baseline"]["verdict"] == "slower"

    chosen = B.run(db, metric="write", variant=container)
    text = capsys.readouterr().out
    assert chosen["best"] == shared and chosen["variant"] == container
    assert f"fastest among {container}'s configurations" in text
    assert f"the files below are for {container}'s" in text
    assert "(study io-synthetic, " + container + ", metric write)" in (tmp_path / "best.hints").read_text()
    with pytest.raises(NearmetalError, match=r"--variant 'bind' is not a variant of study 'io-synthetic' \(its variants: "):
        B.run(db, metric="write", variant="bind")
    # one variant at two placements: no "each variant" list (--variant cannot choose a placement)
    row = lambda conf: {"configuration": conf, "median_s": 1.0}  # noqa: E731
    group = lambda ranks: {"variant": "native/openmpi", "ranks": ranks, "threads": 1}  # noqa: E731
    assert B._per_variant([(row("a"), None, group(2)), (row("b"), None, group(4))]) == []
    two = B._per_variant([(row("a"), None, group(2)), (row("b"), None, group(4)),
                          (row("c"), None, {"variant": "bind/x", "ranks": 2, "threads": 1})])
    assert [(r["variant"], r["ranks"], r["configuration"]) for r in two] == [
        ("native/openmpi", 2, "a"), ("native/openmpi", 4, "b"), ("bind/x", 2, "c")]


def test_counts_are_same_or_differs_never_a_verdict(tmp_path):
    """bytes and files are counts, not costs: the Markdown and HTML tables and the HTML grid
    say whether the container's equal the baseline's ("same"), never "inconclusive" at 1.000
    (a walk-through found both tables calling every bytes row inconclusive)."""
    from nearmetal.report import points as PT
    from nearmetal.report.tables import render_markdown

    native = {"mode": "native", "runtime": None, "mpi": "openmpi", "image": None}
    bind = {"mode": "bind", "runtime": "charliecloud", "mpi": "openmpi", "image": "nm-test"}
    hinted = "shared/mpiio io=2x1 aggr=1 stripes=4 read=serial"
    db = synthetic_io_store(tmp_path / "s.db", ["serial/posix read=serial", hinted], variants=[native, bind], reps=4,
                            not_honoured={hinted: ["striping_factor"]})
    a, html = render(db, tmp_path)
    md = render_markdown(a)
    # a hint neither variant honoured: 0 in every run of both, where a ratio says nothing
    rows = [l for l in md.split(f"### {hinted} · hint.striping_factor", 1)[1].split("###", 1)[0].splitlines()
            if l.startswith("| rank total")]
    assert "| same |" in rows[1] and "differs" not in rows[1], rows
    for metric in ("bytes", "files"):
        rows = [l for l in md.split(f"### serial/posix read=serial · {metric}", 1)[1].split("###", 1)[0].splitlines()
                if l.startswith("| rank total")]
        assert len(rows) == 2 and "| baseline |" in rows[0] and "| same |" in rows[1], rows
        section = html.split(f"serial/posix read=serial · {metric}", 2)[-1].split("</table>", 1)[0]
        assert '<span class="v v-same">same</span>' in section and "inconclusive" not in section
    grid = html.split("<h3>Per benchmark and metric</h3>", 1)[1].split("</table>", 1)[0]
    for metric in ("bytes", "files"):
        cell = re.search(r"· " + metric + r"</a></td>\s*<td ([^>]*)>([^<]*)</td>", grid)
        assert cell and cell.group(2) == "same" and "not a cost" in cell.group(1), metric
    # a count that changed in the container says so; a cost keeps its verdict
    count = {"unit": "count", "kernel": "iobench", "same_as_baseline": False,
             "comparison": {"ratio": 2.0, "ci_low": 2.0, "ci_high": 2.0, "verdict": "slower"}}
    assert PT.row_verdict(count, set()) == "differs"
    assert PT.row_verdict(count | {"unit": "s"}, set()) == "slower"


def test_markdown_report_has_the_parallel_io_tables(sweep, tmp_path):
    """The Markdown report carries the HTML's Parallel I/O tables, cell for cell (a walk-through
    found no fastest configuration, speed-up or hint in report.md); a study without an I/O
    benchmark has no such section."""
    from nearmetal.report.tables import render_markdown

    _, a, html = sweep
    md = render_markdown(a)
    assert md.count("## Parallel I/O") == 1
    section = md.split("## Parallel I/O", 1)[1].split("\n## ", 1)[0]
    md_rows = {}
    for line in section.splitlines():
        if line.startswith("| ") and not line.startswith("| configuration"):
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            md_rows[cells[0].strip("*")] = (cells[0].startswith("**"), cells[1:])
    html_rows = {label: (best, cells) for best, label, cells in io_rows(html)}
    assert set(md_rows) == set(html_rows) == set(SWEEP)
    for label, (best, cells) in html_rows.items():
        assert md_rows[label][0] == best, label
        assert md_rows[label][1] == cells[1:10], label  # n ... hints not honoured
    assert sum(best for best, _ in md_rows.values()) == 1
    plain = render_markdown(synthetic_analysis())
    assert "## Parallel I/O" not in plain
