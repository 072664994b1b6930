"""The reports' parallel-I/O section (HTML, and its tables in Markdown: markdown()), for studies
with `iobench` benchmarks: a rendering of the analysis dict's "io" entry (the I/O analysis `nearmetal io best` prints from; the
report computes nothing of its own). Figures (drawn by io_plots, each only where the
analysis found variation):

- time per phase (open, write, close, read: the maximum over ranks) vs io_layout, one
  panel per library (seed 004, Figs. 3-7);
- write bandwidth over aggregators x stripes, one heatmap per library (Figs. 8-9);
- write time over chunk layouts CX x CY with the default-chunk and PnetCDF references
  (Fig. 15);
- per-rank write time of the fastest configuration and of serial (load balance);

and one table per variant x placement: every configuration with its median write and total
time and their 95% CIs, bandwidths, speed-up over its serial reference and the hints the
MPI library did not honour. Rows of the figures are variant x placement (at most MAX_ROWS).
docs/reports.md ("Parallel I/O") explains how to read them.
"""


from . import formatting as F
from . import points as PT

MAX_ROWS = 4  # variant x placement rows per figure; the tables have them all


# ---------------------------------------------------------------------- words

def _row_title(group, style, multi_pl):
    vid = group["variant"]
    t = style.label(vid) if style is not None else vid
    return f"{t} · {F.fmt_placement(group['ranks'], group['threads'])}" if multi_pl else t


def _fmt_ci(m):
    if m is None:
        return "—"
    s = F.fmt_num(m["median"])
    if m.get("ci"):
        s += f" [{F.fmt_num(m['ci'][0])}–{F.fmt_num(m['ci'][1])}]"
    return s


def _fmt_speedup(sp):
    if sp is None:
        return "—"
    s = f"{sp['value']:.2f}×"
    if sp.get("ci"):
        s += f" [{sp['ci'][0]:.2f}–{sp['ci'][1]:.2f}]"
    return s


def _fmt_hints(hints):
    """'striping_factor' for a hint no run honoured; 'cb_nodes (2/5 runs)' for some runs."""
    out = []
    for key, h in sorted(hints.items()):
        bad, runs = h["not_honoured"], h["runs"]
        if bad:
            out.append(key if bad == runs else f"{key} ({bad}/{runs} runs)")
    return ", ".join(out) or "—"


def _fmt_fixed(fixed):
    """'read serial, buffer 16MiB' from the parameters a panel holds fixed."""
    return ", ".join(f"{name} {F.fmt_size(v).replace(' ', '') if name == 'buffer' else v}"
                     for name, v in (fixed or {}).items())


def table_rows(group, configurations):
    """The table of one variant x placement: every configuration, fastest write first."""
    rows = group["rows"]
    several_grids = len({r["grid"] for r in rows}) > 1  # benchmarks of a regular study may differ in size
    best = group["best"]["write_s"]
    out = []
    for r in rows:
        write = r["times"]["write_s"]
        conf = configurations.get(r["benchmark"]) or {}
        out.append({
            "label": r["label"] + (f" grid={r['grid']}" if several_grids and r["grid"] else ""),
            "bench": r["benchmark"] if r["benchmark"] != r["label"] else "",
            "best": r["benchmark"] == best, "serial": conf.get("pattern") == "serial",
            "n": write["n"] if write else 0,
            "write": _fmt_ci(write), "total": _fmt_ci(r["times"]["total_s"]),
            "write_bw": F.fmt_num(r["write_bw"]) if r["write_bw"] is not None else "—",
            "read_bw": F.fmt_num(r["read_bw"]) if r["read_bw"] is not None else "—",
            "files": f"{r['files']:g}" if r["files"] is not None else "—",
            "speedup_write": _fmt_speedup(r["speedup"]["write_s"]),
            "speedup_total": _fmt_speedup(r["speedup"]["total_s"]),
            "hints": _fmt_hints(r["hints"]),
            "vs_baseline": _fmt_versus((r.get("vs_baseline") or {}).get("write_s")),
        })
    return out


def _fmt_versus(v):
    """The write time's ratio to the same configuration under the baseline variant."""
    if not v or not F.is_num(v.get("ratio")):
        return "—"
    lo, hi = v.get("ci") or (None, None)
    return f"{F.fmt_ratio({'ratio': v['ratio'], 'ci_low': lo, 'ci_high': hi})} {v.get('verdict') or ''}".rstrip()


# ---------------------------------------------------------------------- figure inputs

def _phase_panels(panels):
    return {lib: {"xs": [(pattern if layout is None else f"{pattern}\n{layout}", pattern, d)
                         for pattern, layout, d in p["xs"]], "fixed": _fmt_fixed(p["fixed"])}
            for lib, p in panels.items()}


def _grid_panels(panels):
    return {lib: {**p, "fixed": _fmt_fixed(p["fixed"])} for lib, p in panels.items()}


def _balance_panels(panels):
    return [(f"{p['which']}: {p['label']}", [tuple(x) for x in p["ranks"]]) for p in panels]


class Section:
    """What the I/O section shows: figure jobs for html.draw, notes and the tables."""

    def __init__(self):
        self.jobs = []      # (section "io", plots function, args)
        self.notes = []
        self.tables = []    # {"title", "rows"}
        self.versus = False  # a column "write vs baseline": some variant compared with the baseline's

    def __bool__(self):
        return bool(self.tables)


def plan(analysis, style, fid):
    """The I/O section of an analysis: Section (empty when the analysis has no measured
    I/O configuration). fid() gives figure ids; without it, no figure is planned."""
    from . import io_plots

    sec = Section()
    io = analysis.get("io") or {}
    groups = io.get("groups") or []
    if not groups:
        return sec
    if io.get("unknown"):
        sec.notes.append("Configuration unknown (not a label, no arguments in the study file), left out: "
                         + ", ".join(io["unknown"]) + ".")
    order = PT.variant_order(analysis)
    groups = sorted(groups, key=lambda g: (order.get(g["variant"], 1e9), g["ranks"] or 0, g["threads"] or 0))
    multi_pl = len({(g["ranks"], g["threads"]) for g in groups}) > 1
    shown = groups[:MAX_ROWS]
    confs = io.get("configurations") or {}
    sec.tables = [{"title": _row_title(g, style, multi_pl), "rows": table_rows(g, confs)} for g in groups]
    sec.versus = any(r["vs_baseline"] != "—" for t in sec.tables for r in t["rows"])
    if fid is None:
        return sec
    if len(groups) > len(shown):
        sec.notes.append(f"Figures show {len(shown)} of {len(groups)} variant × placement rows (the first in display "
                         "order); the tables have them all.")
    titles = [_row_title(g, style, multi_pl) for g in shown]
    for draw, key, prepare in ((io_plots.phase_times, "phases", _phase_panels),
                               (io_plots.bw_heatmaps, "bandwidth", _grid_panels),
                               (io_plots.chunk_grid, "chunks", _grid_panels),
                               (io_plots.load_balance, "balance", _balance_panels)):
        rows = [(t, prepare(g["figures"][key])) for t, g in zip(titles, shown) if g["figures"][key]]
        if rows:
            sec.jobs.append(("io", draw, (fid(), rows)))
    return sec


def render(sec, figures):
    """The section's HTML (a string for the page template), or '' when it is empty."""
    if not sec:
        return ""
    from .templating import render as render_template

    return render_template("io_section.html", figures=figures, tables=sec.tables, notes=sec.notes, versus=sec.versus)


COLUMNS = (("configuration", "label"), ("n", "n"), ("write s [95% CI]", "write"), ("total s [95% CI]", "total"),
           ("write MB/s", "write_bw"), ("read MB/s", "read_bw"), ("files", "files"),
           ("speed-up (write)", "speedup_write"), ("speed-up (total)", "speedup_total"),
           ("hints not honoured", "hints"))


def markdown(analysis, escape):
    """The section as Markdown lines (the HTML's tables and notes, without figures); [] when
    the study has no measured I/O configuration."""
    sec = plan(analysis, None, fid=None)  # the tables and notes only
    if not sec:
        return []
    columns = COLUMNS + ((("write vs baseline", "vs_baseline"),) if sec.versus else ())
    out = ["## Parallel I/O", "",
           "Times: the slowest rank's, median s [95% CI]; bandwidth: bytes / open + write + close (MB = 10^6 "
           "bytes); speed-up: times faster than the serial configuration [95% CI]; **bold**: the fastest write"
           + ("; write vs baseline: the same configuration's ratio to the baseline variant's" if sec.versus else "")
           + ". `nearmetal io best` writes the fastest configuration's hints file and FMS namelist.", ""]
    out += [escape(n) for n in sec.notes] + ([""] if sec.notes else [])
    for t in sec.tables:
        out += [f"### {escape(t['title'])}", "", "| " + " | ".join(c for c, _ in columns) + " |",
                "|" + "".join("---|" if k in ("label", "hints") else "--:|" for _, k in columns)]
        for r in t["rows"]:
            label = escape(r["label"]) + (f" ({escape(r['bench'])})" if r["bench"] else "")
            cells = [f"**{label}**" if r["best"] else label] + [escape(r[k]) for _, k in columns[1:]]
            out.append("| " + " | ".join(str(c) for c in cells) + " |")
        out.append("")
    return out
