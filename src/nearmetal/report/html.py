"""The HTML report: one self-contained file (inline CSS, inline SVG figures, no scripts,
no fonts, nothing fetched) rendered from templates/report.html with jinja2.

Sections (each omitted when the study has nothing for it): the answer (a summary of two
to four sentences and the verdict matrix, matrix.py, then one sentence per variant), verdict
summary, size sweeps,
overhead per point, scaling, all-pairs matrices, dispersion, compute vs communication,
full table, failures, environment, study file. docs/reports.md explains how to read them.
"""

import json
import multiprocessing as mp
import os
import threading
from collections import OrderedDict

from ..safe_write import write_text
from . import figure_plan
from ..analysis.answer_text import level_words
from . import formatting as F
from . import method_words as MW
from . import io_section as IO
from . import kernel_semantics as K
from . import matrix as M
from . import plot_base as B
from . import points as PT
from . import summaries as S
from .templating import template

MAX_FAILURE_ROWS = 200
FIGURE_FAILED = "This figure could not be drawn"


def _template():
    return template("report.html")


def _flatten(d, prefix=""):
    out = OrderedDict()
    for k, v in (d or {}).items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        elif isinstance(v, (list, tuple)):
            out[f"{prefix}{k}"] = ", ".join(map(str, v))
        else:
            out[f"{prefix}{k}"] = "" if v is None else str(v)
    return out


WITNESS_COLS = ("rank", "program", "library", "inode", "version")


def _witness_rows(envs, flat_env):
    """The witness lines of each context (`witness = true`: [{rank, program, library, inode,
    version}]) as table rows, each led by the context's mode, runtime and image."""
    rows = []
    for e, flat in zip(envs, flat_env):
        lines = (e or {}).get("witness")
        where = " · ".join(flat.get(k) for k in ("mode", "runtime", "image") if flat.get(k))
        for w in lines if isinstance(lines, list) else ():
            if isinstance(w, dict):
                rows.append([where] + ["" if w.get(k) is None else str(w.get(k)) for k in WITNESS_COLS])
    return rows


def _env_row(e):
    """One environment (context) as display columns: the documented fields condensed
    (cpu, mpi, runtime, image in one cell each), anything else flattened with dots; the
    witness has a table of its own (_witness_rows)."""
    e = dict(e or {})
    e.pop("witness", None)
    out = OrderedDict()
    for k in ("host", "kernel", "machine"):
        if k in e:
            out[k] = "" if e[k] is None else str(e.pop(k))
    cpu = e.pop("cpu", None)
    if isinstance(cpu, dict):
        bits = [str(cpu.get("model") or "")]
        if cpu.get("cores") is not None:
            bits.append(f"{cpu['cores']} cores")
        if cpu.get("simd"):
            bits.append(str(cpu["simd"]))
        rest = {k: v for k, v in cpu.items() if k not in ("model", "cores", "simd")}
        def show(v):
            return " ".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)

        out["cpu"] = ", ".join(b for b in bits if b) + ("; " + "; ".join(f"{k}: {show(v)}" for k, v in rest.items())
                                                       if rest else "")
    elif cpu is not None:
        out["cpu"] = str(cpu)
    if "nearmetal_version" in e:
        out["nearmetal"] = str(e.pop("nearmetal_version") or "")
    mpi = e.pop("mpi", None)
    if isinstance(mpi, dict):
        out["mpi"] = "; ".join(
            f"{fam} {(d or {}).get('version') or ''} ({(d or {}).get('library') or '?'})".replace(" (?)", "")
            if isinstance(d, dict) else f"{fam} {d}" for fam, d in mpi.items())
    elif mpi is not None:
        out["mpi"] = str(mpi)
    if "mode" in e:
        out["mode"] = str(e.pop("mode") or "")
    rt = e.pop("runtime", None)
    out["runtime"] = (f"{rt.get('name') or ''} {rt.get('version') or ''}".strip() if isinstance(rt, dict)
                      else ("" if rt is None else str(rt)))
    img = e.pop("image", None)
    if isinstance(img, dict):
        dig = str(img.get("digest") or "")
        short = dig.split(":", 1)[-1][:12] if dig else ""
        bits = [str(img.get("name") or ""), str(img.get("distro") or ""), short]
        out["image"] = " · ".join(b for b in bits if b)
    else:
        out["image"] = "" if img is None else str(img)
    if "binding" in e:  # one cell: what the ranks got, and why it is not what was asked
        from ..launchers._binding import describe

        out["binding"] = describe(e.pop("binding"))
    out.update(_flatten(e))
    return out


def _grid(analysis, groups, vorder):
    """Verdict overview: one row per benchmark·metric, one column per compared variant."""
    cols = []
    for p in analysis.get("points") or []:
        if PT.comparison(p) and p.get("variant") not in cols:
            cols.append(p.get("variant"))
    cols.sort(key=lambda v: vorder.get(v, 1e9))
    rows = []
    for (bench, metric), entries in groups.items():
        cells = {v: {v2: 0 for v2 in PT.VERDICTS} | {"worst": None, "best": None} for v in cols}
        counts = {v: [] for v in cols}  # a count's or check value's rows: same or differs, no verdict
        for p in entries:
            c = PT.comparison(p)
            if not c or p.get("variant") not in cells:
                continue
            said = PT.count_verdict(p)
            if said:
                counts[p["variant"]].append(said)
                continue
            cell = cells[p["variant"]]
            verdict = PT.verdict_of(p)
            cell[verdict] += 1
            oh = c.get("overhead_pct")
            if F.is_num(oh):
                if verdict == "slower" and (cell["worst"] is None or oh > cell["worst"]):
                    cell["worst"] = oh
                if verdict == "faster" and (cell["best"] is None or oh < cell["best"]):
                    cell["best"] = oh
        out_cells = []
        for v in cols:
            cell = cells[v]
            n = sum(cell[x] for x in PT.VERDICTS)
            if counts[v] and not n:
                differs = counts[v].count("differs")
                text = f"differs in {differs} of {len(counts[v])}" if differs else "same"
                out_cells.append({"cls": "na", "text": text, "title": "a count or check value: compared, not a cost"})
                continue
            if not n:
                out_cells.append({"cls": "na", "text": "—", "title": "not compared"})
                continue
            bits = [f"{cell['equivalent']}/{n} ≈"]
            if cell["slower"]:
                bits.append(f"{cell['slower']} slower ({F.fmt_pct(cell['worst'], digits=0)})")
            if cell["faster"]:
                bits.append(f"{cell['faster']} faster ({F.fmt_pct(cell['best'], digits=0)})")
            if cell["inconclusive"]:
                bits.append(f"{cell['inconclusive']} ?")
            cls = ("slower" if cell["slower"] else "faster" if cell["faster"] else
                   "equivalent" if cell["equivalent"] == n else "inconclusive")
            title = ", ".join(f"{x} {cell[x]}" for x in PT.VERDICTS if cell[x])
            out_cells.append({"cls": cls, "text": " · ".join(bits), "title": title})
        rows.append({"bench": bench, "metric": metric, "anchor": _anchor(bench, metric), "cells": out_cells})
    return cols, rows


def _anchor(bench, metric):
    return "t-" + "".join(ch if ch.isalnum() else "-" for ch in f"{bench}-{metric}")


def _full_tables(groups, analysis):
    noise_index = PT.noise_by_row(analysis.get("points") or [])
    vorder = PT.variant_order(analysis)
    bases = PT.baseline_ids(analysis)
    tables = []
    for (bench, metric), entries in groups.items():
        order = {k: i for i, k in enumerate(PT.ordered_row_keys(entries))}
        rows = []
        prev = None
        for p in sorted(entries, key=lambda p: (order[PT.row_key(p)], vorder.get(p.get("variant"), 1e9))):
            s = p.get("stats") or {}
            c = PT.comparison(p)
            k = PT.row_key(p)
            verdict = PT.row_verdict(p, bases) or ""
            pv = c.get("p_value") if c else None
            outl = s.get("outliers")
            rows.append({
                "first": k != prev,
                "point": F.point_label(p.get("point")),
                "pl": F.fmt_placement(p.get("ranks"), p.get("threads")),
                "variant": p.get("variant"),
                "disturbed": p.get("disturbed") or 0,
                "n": s.get("n", len(p.get("values") or [])),
                "median": F.fmt_num(PT.median_of(p)),
                "spread": f"{F.fmt_num(s.get('p5'))}–{F.fmt_num(s.get('p95'))}" if F.is_num(s.get("p5")) else "—",
                "ratio": F.fmt_ratio(c),
                "overhead": F.fmt_pct(c.get("overhead_pct")) if c else "—",
                "verdict": verdict,
                "p": f"{pv:.2g}" if F.is_num(pv) else "—",
                "noise": PT.row_noise(p, noise_index),
                "outliers": len(outl) if isinstance(outl, (list, tuple)) else ("—" if outl is None else outl),
            })
            prev = k
        first = entries[0]
        tables.append({"bench": bench, "metric": metric, "anchor": _anchor(bench, metric),
                       "unit": first.get("unit") or "", "kernel": K.kernel_shown(first.get("kernel")),
                       "better": PT.direction_words(first),
                       "rows": rows, "npoints": len(order)})
    return tables


_JOBS = None


def _draw_one(i):
    """One figure job -> (id, title, svg, caption) or None. A figure that fails (data no
    plot function expected) becomes a visible note instead of costing the whole report."""
    _section, plot, args = _JOBS[i]
    try:
        f = plot(*args)
    except Exception as e:  # noqa: BLE001 - reported in the page
        fid, what = args[0], args[1] if len(args) > 2 and isinstance(args[1], str) else plot.__name__
        return (fid, f"{what}: figure not drawn", "", f"{FIGURE_FAILED}: {type(e).__name__}: {e}")
    return None if f is None else (f.id, f.title, f.svg, f.caption)


# relative cost of a figure kind: the expensive ones start first, so workers end together
# the figure pool never takes longer than this; past it, the figures are drawn serially
POOL_TIMEOUT_S = 300
_COST = {"pairs_heatmaps": 0, "size_sweep": 1, "dispersion": 2, "scaling": 3, "overhead_bars": 4, "phases_bars": 5}


def _default_signals():
    """Pool workers inherit the CLI's SIGTERM-as-interrupt handler; the pool stops its
    workers with SIGTERM, which must simply end them."""
    import signal

    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


class _Drawing:
    """Figures being drawn: .get() -> [Fig or None] in job order."""

    def __init__(self, jobs, workers):
        global _JOBS
        self.jobs, self.pool, self.async_result, self.raw = jobs, None, None, None
        order = sorted(range(len(jobs)), key=lambda i: (_COST.get(getattr(jobs[i][1], "__name__", ""), 9), i))
        self.order = order
        if workers > 1 and "fork" in mp.get_all_start_methods() and threading.active_count() == 1:
            _JOBS = jobs  # inherited by the forked workers
            try:
                self.pool = mp.get_context("fork").Pool(workers, initializer=_default_signals)
                self.async_result = self.pool.map_async(_draw_one, order, chunksize=1)
            except (OSError, mp.ProcessError):
                self._close()
            finally:
                _JOBS = None

    def close(self):
        self._close()

    def _close(self):
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()
            self.pool = self.async_result = None

    def get(self):
        global _JOBS
        if self.raw is None:
            raw = None
            if self.async_result is not None:
                try:  # bounded: a worker forked again by the pool's handler thread can deadlock
                    raw = self.async_result.get(timeout=POOL_TIMEOUT_S)
                except (OSError, mp.ProcessError, mp.TimeoutError):
                    raw = None  # drawn serially below
                finally:
                    self._close()
            if raw is None:
                _JOBS = self.jobs
                try:
                    raw = [_draw_one(i) for i in self.order]
                finally:
                    _JOBS = None
            by_job = dict(zip(self.order, raw))
            self.raw = [by_job[i] for i in range(len(self.jobs))]
        return [None if r is None else B.Fig(*r) for r in self.raw]


def draw(jobs, workers=None):
    """Start drawing figure jobs [(section, plot function, args)]; returns an object
    whose .get() gives [Fig or None] in job order. With several CPUs the figures are drawn
    in forked worker processes while the caller goes on (they inherit the imported
    matplotlib and the data; only SVG text travels back); serially, at .get(), where fork
    is unavailable, the process has threads, NEARMETAL_REPORT_JOBS=1, or no pool starts."""
    if not jobs:
        return _Drawing([], 1)
    B.mpl()  # import once, before any fork
    if workers is None:
        env = os.environ.get("NEARMETAL_REPORT_JOBS", "")
        if env.isdigit() and int(env) > 0:
            workers = int(env)
        else:
            cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
            workers = min(cpus, 8)
    return _Drawing(jobs, min(workers, len(jobs)))


def build_context(analysis):
    """Everything the template shows, figures included (SVG strings)."""
    study = analysis.get("study") or {}
    points = analysis.get("points") or []
    groups = PT.group_points(points)
    style = B.Style(analysis)
    vorder = style.order
    counter = iter(range(1, 1_000_000))

    def fid():
        return f"f{next(counter)}"

    jobs, io = figure_plan.plan(analysis, style, fid)
    drawing = draw(jobs)  # in worker processes where possible, while the tables are built here
    try:
        summaries = S.variant_summaries(analysis)
        grid_cols, grid_rows = _grid(analysis, groups, vorder)
        fail_head, _ = S.failures_summary(analysis)
        failures = (analysis.get("runs") or {}).get("failures") or []
        flat_env = [_env_row(e) for e in analysis.get("environment") or []]
        env_cols = []
        for e in flat_env:
            for k in e:
                if k not in env_cols:
                    env_cols.append(k)
        tables = _full_tables(groups, analysis)
        figs = {k: [] for k in ("sweeps", "overhead", "scaling", "pairs", "phases", "dispersion", "io")}
        for (section, _, _), f in zip(jobs, drawing.get()):
            if f is not None:
                figs[section].append(f)
    finally:
        drawing.close()
    margin = study.get("margin")
    return {
        "study": study,
        "title": f"nearmetal report: {study.get('name', 'study')}",
        "margin_txt": f"±{margin * 100:g}%" if F.is_num(margin) else "?",
        "baseline_txt": json.dumps(study.get("baseline")) if study.get("baseline") is not None else "",
        "variants": sorted(analysis.get("variants") or [], key=lambda v: vorder.get(v.get("id"), 1e9)),
        "labels": style.labels,
        "dropped": style.dropped,
        "colors": style.color,
        "answer": S.answer(analysis),
        "matrix": M.build(analysis),
        "findings": S.findings(analysis),
        "summaries": summaries,
        "verdicts": PT.VERDICTS,
        "grid_cols": grid_cols,
        "grid_rows": grid_rows,
        "sweeps": figs["sweeps"],
        "overhead": figs["overhead"],
        "scaling": figs["scaling"],
        "pairs": figs["pairs"],
        "dispersion": figs["dispersion"][0] if figs["dispersion"] else None,
        "phases": figs["phases"],
        "io_html": IO.render(io, figs["io"]),
        "why_html": why_html(analysis.get("why")),
        "tables": tables,
        # a point as the docs define it: benchmark x metric x parameter x placement, whichever variants measured it
        "npoints": len({(p.get("benchmark"), p.get("metric"), PT.row_key(p)) for p in points}),
        "ratio_note": MW.ratio_note(analysis), "ratio_column": MW.ratio_column(analysis), "noise_note": MW.NOISE,
        "level_words": level_words(analysis),
        "runs": analysis.get("runs") or {},
        "contention_text": (analysis.get("contention") or {}).get("text") or "",
        "machine_check_text": (analysis.get("machine_check") or {}).get("text") or "",
        "fail_head": fail_head,
        "failures": failures[:MAX_FAILURE_ROWS],
        "failures_more": max(0, len(failures) - MAX_FAILURE_ROWS),
        "env_cols": env_cols,
        "env_rows": [[e.get(k, "") for k in env_cols] for e in flat_env],
        "witness_cols": ("run by",) + WITNESS_COLS,
        "witness_rows": _witness_rows(analysis.get("environment") or [], flat_env),
    }


def why_html(why):
    from .why import render_html as render_why

    return render_why(why)


def render_html(analysis, path):
    """Write the HTML report of an analysis dict (docs/analysis.md) to path; returns path."""
    ctx = build_context(analysis)
    here = os.path.dirname(os.path.abspath(path))  # each run's trace report, linked relative to this file
    ctx["traces"] = [dict(t, href=os.path.relpath(t["report"] or t["dir"], here))
                     for t in analysis.get("traces") or [] if isinstance(t, dict) and t.get("dir")]
    text = _template().render(**ctx)
    write_text(path, text, "report")  # never through a link planted in the output directory
    return path
