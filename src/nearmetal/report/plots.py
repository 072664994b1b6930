"""The HTML report's figures: matplotlib (Agg, SVG output) drawn into inline SVG strings.

Every function takes the entries (analysis points) of one benchmark or metric and returns
a Fig (title, svg, caption) or None when there is nothing to draw, so a missing kernel or
a half-finished study simply omits the figure. The number of figures is bounded by the
number of benchmarks and metrics, never by the number of points: long axes are thinned to
representative points (common.select_rows).
"""

import io
import json
import math
import re
from collections import defaultdict

from . import common as C

RC = {
    "svg.fonttype": "none",  # text stays text: smaller, faster, selectable; no embedded glyphs
    "svg.hashsalt": "nearmetal",  # deterministic ids
    "svg.image_inline": True,
    "font.family": "sans-serif",
    "font.size": 8,
    "axes.titlesize": 9,
    "axes.labelsize": 8,
    "legend.fontsize": 7,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.5,
    "lines.linewidth": 1.3,
    "lines.markersize": 3.5,
    "legend.frameon": False,
    "path.simplify": True,
    "xtick.minor.visible": False,
    "ytick.minor.visible": False,
    "axes.formatter.use_mathtext": False,
    "axes.formatter.useoffset": False,
    "axes.formatter.limits": (-4, 6),
}
# tab10 without grey, red last (red reads as "slower" elsewhere in the report)
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#d62728")
BASELINE_COLORS = ("#000000", "#555555", "#888888")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")
MAX_BARS_KEYS = 24  # x positions in an overhead bar chart
MAX_PANELS = 3  # placements per size-sweep figure
MAX_BOXES = 8  # headline points in the dispersion figure

_mpl = None


class Fig:
    __slots__ = ("id", "title", "svg", "caption")

    def __init__(self, fid, title, svg, caption=""):
        self.id, self.title, self.svg, self.caption = fid, title, svg, caption


def _matplotlib():
    """Import matplotlib on first use, on the Agg backend (no display needed)."""
    global _mpl
    if _mpl is None:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib.collections import PolyCollection
        from matplotlib.figure import Figure
        from matplotlib.lines import Line2D

        _mpl = {"matplotlib": matplotlib, "Figure": Figure, "PolyCollection": PolyCollection, "Line2D": Line2D}
    return _mpl


_ID = re.compile(r'\bid="([^"]+)"')
_REF = re.compile(r'(url\(#|href="#)([^")]+)')


def _svg(fig, fid):
    """The figure as an inline <svg> element: no XML prolog, no metadata block, every id
    prefixed with the figure's id (several SVGs in one page must not share ids)."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    s = buf.getvalue()
    start = s.find("<svg")
    s = s[start:] if start >= 0 else s
    s = re.sub(r"<metadata>.*?</metadata>\s*", "", s, count=1, flags=re.S)
    s = _ID.sub(lambda m: f'id="{fid}-{m.group(1)}"', s)
    s = _REF.sub(lambda m: f"{m.group(1)}{fid}-{m.group(2)}", s)
    return s.replace("<svg ", f'<svg class="plot" role="img" aria-label="{fid}" ', 1)


def _new_figure(w, h):
    m = _matplotlib()
    return m["Figure"](figsize=(w, h), dpi=72)


def _layout(fig, *, left=0.75, right=0.2, top=0.35, bottom=0.45, wspace=0.25, hspace=0.5, legend=None,
            where="bottom"):
    """Fixed margins in inches (one draw per figure: constrained or tight layout would draw
    it two or three times more) and the figure legend outside the axes, below or right."""
    W, H = fig.get_size_inches()
    if legend and legend[0]:
        handles, labels = legend
        longest = max(len(str(x)) for x in labels)
        if where == "bottom":
            ncols = max(1, min(len(labels), int((W - 0.4) // (longest * 0.062 + 0.5))))
            rows = math.ceil(len(labels) / ncols)
            fig.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, 0.0), ncols=ncols,
                       handlelength=1.6, columnspacing=1.2)
            bottom += rows * 0.17 + 0.08
        else:
            fig.legend(handles, labels, loc="center right", bbox_to_anchor=(1.0, 0.5), handlelength=1.8)
            right += longest * 0.062 + 0.6
    fig.subplots_adjust(left=left / W, right=1 - right / W, bottom=bottom / H, top=1 - top / H, wspace=wspace,
                        hspace=hspace)
    return (left / W, 1 - right / W, bottom / H, 1 - top / H)


def _value_axis(ax, values, axis="y"):
    """Log scale where values span more than 20x, linear otherwise; tick labels as plain
    numbers (no mathtext: parsing it is the slowest part of a log axis)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter, NullLocator

    vals = [v for v in values if C.is_num(v) and v > 0]
    a = ax.yaxis if axis == "y" else ax.xaxis
    if vals and max(vals) / min(vals) > 20:
        (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
        if max(vals) / min(vals) < 1000:
            a.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        a.set_minor_formatter(NullFormatter())
        a.set_minor_locator(NullLocator())
        a.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.6g}"))


class Style:
    """Colors and markers per variant, the same in every figure: baselines black/grey,
    compared variants from a 10-color palette; short labels (common.short_variant_labels)."""

    def __init__(self, analysis):
        order = C.variant_order(analysis)
        self.order = order
        bases = C.baseline_ids(analysis)
        self.labels, self.dropped = C.short_variant_labels(analysis)
        self.color, self.marker = {}, {}
        bi = ci = 0
        for vid in sorted(order, key=order.get):
            if vid in bases:
                self.color[vid] = BASELINE_COLORS[bi % len(BASELINE_COLORS)]
                bi += 1
            else:
                self.color[vid] = PALETTE[ci % len(PALETTE)]
                ci += 1
            self.marker[vid] = MARKERS[(bi + ci - 1) % len(MARKERS)]
        self.bases = bases
        self.margin = (analysis.get("study") or {}).get("margin")

    def sort(self, vids):
        return sorted(vids, key=lambda v: self.order.get(v, 1e9))

    def label(self, vid):
        return self.labels.get(vid, vid)


def _rc():
    return _matplotlib()["matplotlib"].rc_context(RC)


def _size_ticks(ax, sizes):
    sizes = sorted(set(sizes))
    if not sizes:
        return
    if len(sizes) <= 8:  # few sizes: label exactly those measured
        ax.set_xticks(sizes)
        ax.set_xticklabels([C.fmt_size(t).replace(" ", "\u2009") for t in sizes])
        ax.minorticks_off()
        return
    lo, hi = math.log2(max(sizes[0], 1)), math.log2(max(sizes[-1], 1))
    step = max(1, int(math.ceil((hi - lo) / 8)))
    if step % 2 and step > 1:
        step += 1
    ticks = [2 ** e for e in range(int(lo), int(hi) + 1) if (e - int(lo)) % step == 0]
    ax.set_xticks(ticks)
    ax.set_xticklabels([C.fmt_size(t).replace(" ", "\u2009") for t in ticks])
    ax.minorticks_off()


def _margin_band(ax, style, kind):
    m = style.margin
    if not C.is_num(m):
        return
    if kind == "ratio":
        ax.axhspan(1 - m, 1 + m, color="#2ca02c", alpha=0.08, lw=0)
        ax.axhline(1, color="#444", lw=0.6)
    else:
        ax.axhspan(-m * 100, m * 100, color="#2ca02c", alpha=0.08, lw=0)
        ax.axhline(0, color="#444", lw=0.6)


def _entries_by(entries, keyf):
    out = defaultdict(list)
    for p in entries:
        out[keyf(p)].append(p)
    return out


def _pick_placements(pls, n=MAX_PANELS):
    if len(pls) <= n:
        return pls
    idx = sorted({round(i * (len(pls) - 1) / (n - 1)) for i in range(n)})
    return [pls[i] for i in idx]


# ---------------------------------------------------------------------- size sweeps

def size_sweep(fid, bench, metric, entries, style):
    """Median vs message size (log-log), one line per variant with its p5–p95 band; below,
    the ratio to the baseline with its 95% CI band and the equivalence margin. One panel per
    placement (at most 4: smallest, largest and evenly between)."""
    sized = [p for p in entries if C.is_num((p.get("point") or {}).get("size"))]
    if not C.is_size_swept(sized):
        return None
    pls = C.placements(sized)
    shown = _pick_placements(pls)
    # other point parameters than size: keep the most common combination
    def rest(p):
        return json.dumps({k: v for k, v in p["point"].items() if k != "size"}, sort_keys=True)
    combos = _entries_by(sized, rest)
    main = max(combos, key=lambda k: len(combos[k]))
    sized = combos[main]
    unit = entries[0].get("unit") or ""
    has_cmp = any(C.comparison(p) for p in sized)
    with _rc():
        fig = _new_figure(max(7.5, min(3.6 * len(shown), 11) + 0.8), 4.9 if has_cmp else 3.1)
        axes = fig.subplots(2 if has_cmp else 1, len(shown), squeeze=False,
                            gridspec_kw={"height_ratios": [3, 2]} if has_cmp else None, sharex="col")
        allvals = []
        handles = {}
        for col, pl in enumerate(shown):
            ax = axes[0][col]
            sub = [p for p in sized if (p.get("ranks"), p.get("threads")) == pl]
            byv = _entries_by(sub, lambda p: p.get("variant"))
            allsizes = []
            for vid in style.sort(byv):
                rows = sorted(byv[vid], key=lambda p: p["point"]["size"])
                xs = [p["point"]["size"] for p in rows if C.median_of(p) is not None]
                ys = [C.median_of(p) for p in rows if C.median_of(p) is not None]
                if not xs:
                    continue
                allsizes += xs
                allvals += ys
                lo = [(p.get("stats") or {}).get("p5") for p in rows if C.median_of(p) is not None]
                hi = [(p.get("stats") or {}).get("p95") for p in rows if C.median_of(p) is not None]
                (h,) = ax.plot(xs, ys, color=style.color[vid], marker=style.marker[vid], markersize=2.5,
                               label=style.label(vid), lw=1.0 if vid in style.bases else 1.3)
                handles[vid] = h
                if all(C.is_num(v) for v in lo + hi):
                    ax.fill_between(xs, lo, hi, color=style.color[vid], alpha=0.12, lw=0)
            ax.set_xscale("log", base=2)
            _value_axis(ax, allvals)
            _size_ticks(ax, allsizes)
            ax.set_title(C.placement_words(*pl) or C.what(bench, metric))
            if col == 0:
                ax.set_ylabel(f"{metric} ({unit})" if unit else metric)
            if has_cmp:
                ax2 = axes[1][col]
                _margin_band(ax2, style, "pct")
                cvids = [v for v in style.sort(byv) if any(C.comparison(p) for p in byv[v])]
                sizes = sorted(set(allsizes))
                gaps = [math.log2(b) - math.log2(a) for a, b in zip(sizes, sizes[1:]) if a > 0 and b > 0]
                group = 0.8 * min(min(gaps) if gaps else 1.0, 2.0)  # bar group width in log2 units
                bw = group / max(1, len(cvids))
                for i, vid in enumerate(cvids):
                    rows = [p for p in byv[vid] if C.comparison(p) and C.is_num(C.comparison(p).get("overhead_pct"))
                            and p["point"]["size"] > 0]
                    if not rows:
                        continue
                    off = -group / 2 + bw * (i + 0.5)
                    lx = [math.log2(p["point"]["size"]) + off for p in rows]
                    hs = [C.comparison(p)["overhead_pct"] for p in rows]
                    alpha = [0.95 if C.verdict_of(p) in ("slower", "faster") else 0.35 for p in rows]
                    verts = [((2 ** (x - bw * 0.45), 0), (2 ** (x - bw * 0.45), h), (2 ** (x + bw * 0.45), h),
                              (2 ** (x + bw * 0.45), 0)) for x, h in zip(lx, hs)]
                    _poly(ax2, verts, style.color[vid], alpha)
                    cis = [C.overhead_ci(C.comparison(p)) for p in rows]
                    _errorbars(ax2, [2 ** x for x in lx], hs, cis)
                ax2.set_xscale("log", base=2)
                ax2.autoscale_view()
                _size_ticks(ax2, allsizes)
                ax2.set_xlabel("message size")
                ax2.grid(axis="x", visible=False)
                if col == 0:
                    ax2.set_ylabel("overhead %")
            else:
                ax.set_xlabel("message size")
        _layout(fig, legend=([handles[v] for v in style.sort(handles)], [style.label(v) for v in style.sort(handles)]),
                wspace=0.3, hspace=0.35, bottom=0.5)
        svg = _svg(fig, fid)
    cap = ("Median per message size, log–log; shaded: p5–p95 of the repetitions."
           + (" Below: overhead % of each variant against its baseline at every size (+ = slower), whiskers: 95% CI;"
              " solid bars: verdict slower/faster, pale: equivalent or inconclusive; green band: the equivalence "
              "margin." if has_cmp else ""))
    if len(shown) < len(pls):
        cap += f" {len(shown)} of {len(pls)} placements shown."
    if len(combos) > 1:
        cap += f" Points with {main} only."
    return Fig(fid, f"{C.what(bench, metric)} vs message size", svg, cap)


# ---------------------------------------------------------------------- overhead bars

def _poly(ax, verts, color, alpha):
    """Bars as one PolyCollection (one artist, fast in SVG) instead of a patch per bar."""
    m = _matplotlib()
    pc = m["PolyCollection"](verts, facecolors=[(color, a) for a in alpha], edgecolors="none")
    ax.add_collection(pc)
    return pc


def _bars(ax, xs, heights, width, color, alpha):
    verts = [((x - width / 2, 0), (x - width / 2, h), (x + width / 2, h), (x + width / 2, 0))
             for x, h in zip(xs, heights)]
    return _poly(ax, verts, color, alpha)


def _errorbars(ax, xs, hs, cis):
    """95% CI whiskers of overhead bars (one LineCollection)."""
    pts = [(x, h, ci) for x, h, ci in zip(xs, hs, cis) if ci]
    if pts:
        ax.vlines([x for x, _, _ in pts], [ci[0] for _, _, ci in pts], [ci[1] for _, _, ci in pts],
                  color="#333", lw=0.6)


def overhead_bars(fid, bench, groups, style):
    """Overhead % per point of one benchmark: x = metric × point × placement (headline metric
    first, at most 24 positions in all, aggregate ranks preferred), grouped bars per variant
    with 95% CI whiskers. Bars are solid where the verdict is slower or faster, pale where
    equivalent or inconclusive."""
    metrics = [m for m, entries in groups.items() if any(C.comparison(p) for p in entries)]
    if not metrics:
        return None
    head = C.headline_metric(metrics)
    metrics = [head] + [m for m in metrics if m != head]
    budget = max(3, MAX_BARS_KEYS // len(metrics))
    slots, notes, left_out, aggregated = [], [], [], []
    for metric in metrics:
        if len(slots) >= MAX_BARS_KEYS:
            left_out.append(metric)
            continue
        entries = [p for p in groups[metric] if C.comparison(p)]
        agg = [p for p in entries if (p.get("point") or {}).get("rank") in C.AGGREGATE_RANKS]
        if agg and len(agg) < len(entries):
            entries = agg
            aggregated.append(metric)
        keys, note = C.select_rows(entries, min(budget, MAX_BARS_KEYS - len(slots)))
        if note:
            notes.append(f"{metric}: {note}")
        for k in keys:
            slots.append((metric, k))
    if aggregated:
        notes.insert(0, f"aggregate ranks only ({', '.join(aggregated)})")
    pos = {s: i for i, s in enumerate(slots)}
    entries = [p for m in metrics for p in groups[m] if (m, C.row_key(p)) in pos and C.comparison(p)]
    byv = _entries_by(entries, lambda p: p.get("variant"))
    vids = style.sort(byv)
    multi_metric = len({m for m, _ in slots}) > 1
    multi_pl = len(C.placements(entries)) > 1
    labels = []
    for metric, k in slots:
        lab = C.point_label(json.loads(k[0]))
        lab = "" if lab == "—" else lab
        if multi_pl:
            lab = f"{lab} {C.fmt_placement(k[1], k[2])}".strip()
        if multi_metric:
            lab = f"{metric}\n{lab}" if lab else metric
        labels.append(lab or "—")
    m = _matplotlib()
    longest = max(len(x) for lab in labels for x in lab.split("\n"))
    rot = len(slots) * longest > 120
    with _rc():
        fig = _new_figure(min(11.0, max(6.0, 1.2 + 0.55 * len(slots) * max(1, len(vids)) ** 0.5)), 3.4)
        ax = fig.add_subplot()
        _margin_band(ax, style, "pct")
        width = 0.8 / max(1, len(vids))
        for i, vid in enumerate(vids):
            rows = [p for p in byv[vid] if C.is_num(C.comparison(p).get("overhead_pct"))]
            xs = [pos[(p.get("metric"), C.row_key(p))] - 0.4 + width * (i + 0.5) for p in rows]
            hs = [C.comparison(p)["overhead_pct"] for p in rows]
            alpha = [0.95 if C.verdict_of(p) in ("slower", "faster") else 0.35 for p in rows]
            _bars(ax, xs, hs, width * 0.9, style.color[vid], alpha)
            _errorbars(ax, xs, hs, [C.overhead_ci(C.comparison(p)) for p in rows])
        for i in range(1, len(slots)):  # separate metrics
            if slots[i][0] != slots[i - 1][0]:
                ax.axvline(i - 0.5, color="#999", lw=0.6, ls=":")
        ax.set_xticks(range(len(slots)))
        ax.set_xticklabels(labels, rotation=30 if rot else 0, ha="right" if rot else "center",
                           rotation_mode="anchor")
        ax.set_xlim(-0.6, len(slots) - 0.4)
        ax.autoscale_view()
        ax.grid(axis="x", visible=False)
        ax.set_ylabel("overhead %")
        handles = [m["Line2D"]([], [], color=style.color[v], lw=6) for v in vids]
        lines = max(lab.count("\n") + 1 for lab in labels)
        _layout(fig, legend=(handles, [style.label(v) for v in vids]),
                bottom=(0.25 + 0.065 * longest if rot else 0.2 + 0.14 * lines), top=0.2)
        svg = _svg(fig, fid)
    cap = ("Overhead of each variant against its baseline (positive = slower), whiskers: 95% CI; solid bars: "
           "verdict slower/faster, pale: equivalent or inconclusive; green band: the equivalence margin.")
    if notes:
        cap += " " + "; ".join(notes) + "."
    if left_out:
        cap += f" Not drawn: {', '.join(left_out)} (in the full table)."
    return Fig(fid, f"{bench}: overhead per point", svg, cap)


# ---------------------------------------------------------------------- scaling

SCALING_EFFICIENCY_KERNELS = ("stream", "cg", "phases")


def scaling(fid, bench, metric, entries, style):
    """Median vs cores (ranks × threads) at the benchmark's headline point, one line per
    variant and thread count; right: parallel efficiency (compute kernels) or the ratio to
    the baseline (communication kernels). Results that give the scale as a point parameter
    ('cores', 'nodes': imported studies) are drawn over that parameter. None with fewer than
    2 placements."""
    xname = "cores (ranks × threads)"
    if len(C.placements(entries)) < 2:
        sp = C.scale_param(entries)
        if not sp:
            return None
        entries = [dict(p, ranks=p["point"][sp], threads=1, point={k: v for k, v in p["point"].items() if k != sp})
                   for p in entries]
        xname = sp
    hp = C.headline_point(entries)
    sub = [p for p in entries if C.point_json(p.get("point")) == hp and C.median_of(p) is not None]
    if len(C.placements(sub)) < 2:
        return None
    hib = bool(entries[0].get("higher_is_better"))
    unit = entries[0].get("unit") or ""
    kb = C.kernel_base(entries[0].get("kernel"))
    efficiency = kb in SCALING_EFFICIENCY_KERNELS or (kb not in C.COMM_KERNELS and hib)
    m = _matplotlib()
    byv = _entries_by(sub, lambda p: p.get("variant"))
    threads = sorted({p.get("threads") for p in sub})
    styles = ("-", "--", ":", "-.")
    # reference for efficiency: the baseline (or the first variant) at the smallest placement
    ref = None
    if efficiency:
        cands = sorted(sub, key=lambda p: ((p.get("ranks") or 1) * (p.get("threads") or 1),
                                            0 if p.get("variant") in style.bases else 1,
                                            style.order.get(p.get("variant"), 1e9)))
        ref = cands[0]
    with _rc():
        fig = _new_figure(10.0, 3.2)
        ax1, ax2 = fig.subplots(1, 2)
        cores_all = set()
        allvals = []
        if not efficiency:
            _margin_band(ax2, style, "ratio")
        for vid in style.sort(byv):
            for ti, t in enumerate(threads):
                rows = sorted((p for p in byv[vid] if p.get("threads") == t), key=lambda p: p.get("ranks") or 0)
                if not rows:
                    continue
                cores = [(p.get("ranks") or 1) * (t or 1) for p in rows]
                cores_all.update(cores)
                ys = [C.median_of(p) for p in rows]
                allvals += ys
                ls = styles[ti % len(styles)]
                ax1.plot(cores, ys, color=style.color[vid], marker=style.marker[vid], ls=ls)
                if efficiency:
                    rc = (ref.get("ranks") or 1) * (ref.get("threads") or 1)
                    rv = C.median_of(ref)
                    if hib:
                        eff = [(y / c) / (rv / rc) if rv else None for y, c in zip(ys, cores)]
                    else:
                        eff = [(rv * rc) / (y * c) if y else None for y, c in zip(ys, cores)]
                    ax2.plot(cores, eff, color=style.color[vid], marker=style.marker[vid], ls=ls)
                else:
                    rr = [(c, C.comparison(p)) for c, p in zip(cores, rows) if C.comparison(p)
                          and C.is_num(C.comparison(p).get("ratio"))]
                    if rr:
                        xs = [c for c, _ in rr]
                        ax2.plot(xs, [cp["ratio"] for _, cp in rr], color=style.color[vid],
                                 marker=style.marker[vid], ls=ls)
                        lo = [cp.get("ci_low") for _, cp in rr]
                        hi = [cp.get("ci_high") for _, cp in rr]
                        if all(C.is_num(v) for v in lo + hi):
                            ax2.vlines(xs, lo, hi, color=style.color[vid], lw=1.5, alpha=0.6)
        ticks = []
        for c in sorted(cores_all):  # no two labels closer than a factor 1.3 (they would overlap)
            if not ticks or c >= ticks[-1] * 1.3:
                ticks.append(c)
        ticks[-1] = max(cores_all)
        for ax in (ax1, ax2):
            ax.set_xscale("log", base=2)
            ax.set_xticks(ticks)
            ax.set_xticklabels([f"{c:g}" for c in ticks])
            ax.minorticks_off()
            ax.set_xlabel(xname)
        _value_axis(ax1, allvals)
        ax1.set_ylabel(f"{metric} ({unit})" if unit else metric)
        ax1.set_title(f"{metric} at {C.point_label(json.loads(hp))}" if hp != "{}" else metric, loc="left")
        if efficiency:
            ax2.axhline(1, color="#444", lw=0.6)
            ax2.set_ylabel("efficiency")
            ax2.set_title("parallel efficiency vs baseline at smallest placement", loc="left")
        else:
            ax2.set_ylabel("ratio to baseline")
            ax2.set_title("variant / baseline (95% CI)", loc="left")
        handles = [m["Line2D"]([], [], color=style.color[v], marker=style.marker[v]) for v in style.sort(byv)]
        labels = [style.label(v) for v in style.sort(byv)]
        if len(threads) > 1:
            handles += [m["Line2D"]([], [], color="#444", ls=styles[i % len(styles)]) for i in range(len(threads))]
            labels += [f"{t} thread{'s' if t != 1 else ''}" for t in threads]
        _layout(fig, legend=(handles, labels), where="right", wspace=0.3, bottom=0.5)
        svg = _svg(fig, fid)
    cdef = "cores c = ranks × threads" if xname.startswith("cores (") else f"c = {xname}"
    if efficiency:
        how = ("throughput per core relative to the reference, (X/c)/(X_ref/c_ref)" if hib else
               "(T_ref · c_ref)/(T · c), fixed total work assumed")
        where = (C.fmt_placement(ref.get("ranks"), ref.get("threads")) if xname.startswith("cores (")
                 else f"{xname} = {ref.get('ranks')}")
        cap = (f"Left: median vs {cdef}. Right: efficiency = {how}; reference: {ref.get('variant')} at {where}. "
               "1 = perfect scaling with no container cost.")
    else:
        cap = (f"Left: median vs {cdef}. Right: variant median / baseline median at each placement with its 95% "
               "CI; green band: the equivalence margin.")
    return Fig(fid, f"{C.what(bench, metric)}: scaling", svg, cap)


# ---------------------------------------------------------------------- all-pairs matrix

def pairs_heatmaps(fid, bench, metric, entries, style):
    """Median per (src, dst) rank pair, one heatmap per variant on a shared color scale;
    second row: overhead % per pair for the variants with a baseline (diverging colors).
    The largest placement is drawn; with a size parameter, the smallest (lower is better)
    or largest (higher is better) size."""
    pe = [p for p in entries if isinstance(p.get("point"), dict) and "src" in p["point"] and "dst" in p["point"]]
    if not pe:
        return None
    pl = max(C.placements(pe), key=lambda x: ((x[0] or 0) * (x[1] or 0), x))
    pe = [p for p in pe if (p.get("ranks"), p.get("threads")) == pl]
    note = ""
    sizes = sorted({p["point"]["size"] for p in pe if C.is_num(p["point"].get("size"))})
    if len(sizes) > 1:
        s = sizes[-1] if entries[0].get("higher_is_better") else sizes[0]
        pe = [p for p in pe if p["point"].get("size") == s]
        note = f" Message size {C.fmt_size(s)}."
    import numpy as np

    ranks = sorted({int(p["point"][k]) for p in pe for k in ("src", "dst") if C.is_num(p["point"][k])})
    if not ranks:
        return None
    idx = {r: i for i, r in enumerate(ranks)}
    n = len(ranks)
    byv = _entries_by(pe, lambda p: p.get("variant"))
    vids = style.sort(byv)
    med, ovh = {}, {}
    for vid in vids:
        a = np.full((n, n), np.nan)
        o = np.full((n, n), np.nan)
        for p in byv[vid]:
            i, j = idx.get(p["point"]["src"]), idx.get(p["point"]["dst"])
            if i is None or j is None:
                continue
            v = C.median_of(p)
            if v is not None:
                a[i, j] = v
            c = C.comparison(p)
            if c and C.is_num(c.get("overhead_pct")):
                o[i, j] = c["overhead_pct"]
        med[vid] = a
        if not np.all(np.isnan(o)):
            ovh[vid] = o
    finite = np.concatenate([a[np.isfinite(a)] for a in med.values()]) if med else np.array([])
    if finite.size == 0:
        return None
    unit = entries[0].get("unit") or ""
    ncol = min(len(vids), 4)
    nrow_med = math.ceil(len(vids) / ncol)
    ovids = [v for v in vids if v in ovh]
    nrow_ovh = math.ceil(len(ovids) / ncol) if ovids else 0
    with _rc():
        fig = _new_figure(2.6 * ncol + 1.6, 2.6 * (nrow_med + nrow_ovh) + 0.2)
        axes = fig.subplots(nrow_med + nrow_ovh, ncol, squeeze=False)
        l, r, b, t = _layout(fig, right=1.3, left=0.6, bottom=0.45, top=0.3, wspace=0.35, hspace=0.45)
        vmin, vmax = float(np.min(finite)), float(np.max(finite))
        cmap = "viridis_r" if not entries[0].get("higher_is_better") else "viridis"
        ticks = ranks if n <= 8 else ranks[:: max(2, math.ceil(n / 6))]

        def colorbar(im, row0, nrows, label):
            # a colorbar axis right of the rows row0 .. row0 + nrows - 1
            top_ax, bot_ax = axes[row0][0], axes[row0 + nrows - 1][0]
            y0, y1 = bot_ax.get_position().y0, top_ax.get_position().y1
            cax = fig.add_axes([r + 0.25 / fig.get_size_inches()[0], y0 + 0.1 * (y1 - y0),
                                0.12 / fig.get_size_inches()[0], 0.8 * (y1 - y0)])
            cb = fig.colorbar(im, cax=cax)
            cb.set_label(label)

        im = None
        for k, vid in enumerate(vids):
            ax = axes[k // ncol][k % ncol]
            im = ax.imshow(med[vid], vmin=vmin, vmax=vmax, cmap=cmap, interpolation="nearest", aspect="equal")
            ax.set_title(style.label(vid))
            if n <= 8:
                for i in range(n):
                    for j in range(n):
                        if np.isfinite(med[vid][i, j]):
                            ax.text(j, i, C.fmt_num(med[vid][i, j], 2), ha="center", va="center", fontsize=5.5,
                                    color="w")
        if im is not None:
            colorbar(im, 0, nrow_med, f"{metric} ({unit})" if unit else metric)
        if ovids:
            lim = float(np.nanmax([np.nanmax(np.abs(ovh[v])) for v in ovids]))
            lim = max(lim, (style.margin or 0.03) * 100 * 2)
            im2 = None
            for k, vid in enumerate(ovids):
                ax = axes[nrow_med + k // ncol][k % ncol]
                im2 = ax.imshow(ovh[vid], vmin=-lim, vmax=lim, cmap="RdBu_r", interpolation="nearest",
                                aspect="equal")
                ax.set_title(f"{style.label(vid)}: overhead %")
            colorbar(im2, nrow_med, nrow_ovh, "overhead % (+ = slower)")
        for row in axes:
            for ax in row:
                if not ax.images:
                    ax.set_visible(False)
                    continue
                ax.set_xticks([idx[r] for r in ticks])
                ax.set_xticklabels([str(r) for r in ticks])
                ax.set_yticks([idx[r] for r in ticks])
                ax.set_yticklabels([str(r) for r in ticks])
                ax.set_xlabel("dst rank")
                ax.set_ylabel("src rank")
                ax.grid(False)
        svg = _svg(fig, fid)
    cap = (f"Median {metric} per rank pair (row: source, column: destination) at {pl[0]} ranks, one color scale for "
           "all variants" + ("; below: overhead % against the baseline, red = slower" if ovids else "") + "." + note)
    return Fig(fid, f"{C.what(bench, metric)}: all-pairs matrix", svg, cap)


# ---------------------------------------------------------------------- dispersion

def dispersion(fid, headline, style):
    """Box plots of the repetitions per variant for a handful of headline points (one per
    benchmark: its headline metric and point, largest placement), at most 8 panels."""
    def drawable(p):  # repetitions, not an imported summary's single mean
        return not (p.get("stats") or {}).get("from_summary") and len(p.get("values") or []) >= 3

    panels = [h for h in headline if any(drawable(p) for p in h[2])][:MAX_BOXES]
    if not panels:
        return None
    ncol = min(4, len(panels))
    nrow = math.ceil(len(panels) / ncol)
    m = _matplotlib()
    with _rc():
        fig = _new_figure(2.8 * ncol + 0.6, 2.5 * nrow + 0.6)
        axes = fig.subplots(nrow, ncol, squeeze=False)
        seen = style.sort({p.get("variant") for _, _, rows in panels for p in rows if drawable(p)})
        number = {v: i + 1 for i, v in enumerate(seen)}
        for k, (title, unit, rows) in enumerate(panels):
            ax = axes[k // ncol][k % ncol]
            rows = sorted(rows, key=lambda p: style.order.get(p.get("variant"), 1e9))
            data = [[v for v in p.get("values") or [] if C.is_num(v)] if drawable(p) else [] for p in rows]
            keep = [(p, d) for p, d in zip(rows, data) if d]
            if not keep:
                ax.set_visible(False)
                continue
            bp = ax.boxplot([d for _, d in keep], patch_artist=True, widths=0.6,
                            flierprops={"markersize": 2.5, "markeredgewidth": 0.5},
                            medianprops={"color": "#000", "linewidth": 1.0})
            for box, (p, _) in zip(bp["boxes"], keep):
                box.set_facecolor(style.color[p["variant"]])
                box.set_alpha(0.55)
            ax.set_xticks(range(1, len(keep) + 1))
            ax.set_xticklabels([str(number[p["variant"]]) for p, _ in keep])
            ax.set_title(title, fontsize=7.5)
            ax.set_ylabel(unit)
            ax.grid(axis="x", visible=False)
        for k in range(len(panels), nrow * ncol):
            axes[k // ncol][k % ncol].set_visible(False)
        handles = [m["Line2D"]([], [], color=style.color[v], lw=6, alpha=0.55) for v in seen]
        _layout(fig, legend=(handles, [f"{number[v]} {style.label(v)}" for v in seen]),
                wspace=0.45, hspace=0.45, bottom=0.35, left=0.6)
        svg = _svg(fig, fid)
    cap = ("Every repetition's value per variant (boxes: quartiles, whiskers: 1.5 IQR, dots: beyond). Boxes are "
           "numbered as in the legend.")
    return Fig(fid, "Dispersion at headline points", svg, cap)


# ---------------------------------------------------------------------- compute vs communication

COMPUTE_WORDS = ("compute", "comp", "work", "stencil", "kernel", "update", "solve", "flop", "local")
COMM_WORDS = ("comm", "halo", "allreduce", "reduce", "mpi", "exchange", "wait", "send", "recv", "bcast", "barrier",
              "alltoall", "allgather", "sync", "neighbor")
TOTAL_WORDS = ("total", "step", "wall", "time", "elapsed", "run", "iter", "loop")


def phase_class(name):
    """'compute', 'comm', 'total' or 'other' for a phase or metric name (suffix _s removed)."""
    n = name.lower().removesuffix("_s")
    if n in TOTAL_WORDS:
        return "total"
    if any(n == w or n.startswith(w) for w in COMPUTE_WORDS):
        return "compute"
    if any(w in n for w in COMM_WORDS):
        return "comm"
    return "other"


def phase_components(entries):
    """{(variant, ranks, threads): {component: median seconds}} and whether components come
    from metric names (*_s) or from a 'phase' point parameter. Rank-resolved points keep
    the aggregate 'mean' (else 'max', 'total'), which is what stacks into a step time."""
    by_metric = [p for p in entries if str(p.get("metric", "")).endswith("_s")]
    use_phase = not by_metric and any("phase" in (p.get("point") or {}) for p in entries)
    rows = by_metric if not use_phase else [p for p in entries if "phase" in (p.get("point") or {})]
    ranks_vals = {(p.get("point") or {}).get("rank") for p in rows}
    keep_rank = None
    if ranks_vals - {None}:
        for agg in ("mean", "max", "total"):
            if agg in ranks_vals:
                keep_rank = agg
                break
        else:
            keep_rank = sorted(ranks_vals - {None}, key=str)[0]
    out = defaultdict(dict)
    for p in rows:
        pt = p.get("point") or {}
        if keep_rank is not None and pt.get("rank") != keep_rank:
            continue
        name = pt["phase"] if use_phase else p["metric"]
        v = C.median_of(p)
        if v is not None:
            out[(p.get("variant"), p.get("ranks"), p.get("threads"))][str(name)] = v
    return out, keep_rank


def stack_parts(comps):
    """Components to stack and the total (or None): a class-level component ('compute_s',
    'comm_s') that coexists with finer ones of the same class is their subtotal, so the
    finer ones are stacked plus '<class> (other)' = subtotal - their sum (if positive)."""
    total = None
    by_class = defaultdict(dict)
    for name, v in comps.items():
        cls = phase_class(name)
        if cls == "total":
            total = v if total is None else max(total, v)
        else:
            by_class[cls][name] = v
    parts = []
    for cls in ("compute", "comm", "other"):
        items = by_class.get(cls, {})
        sub = [n for n in items if n.lower().removesuffix("_s") in (cls, "communication" if cls == "comm" else cls)]
        finer = {n: v for n, v in items.items() if n not in sub}
        if sub and finer:
            subtotal = items[sub[0]]
            for n in sorted(finer):
                parts.append((cls, n, finer[n]))
            rest = subtotal - sum(finer.values())
            if rest > 1e-12 * max(1.0, subtotal):
                parts.append((cls, f"{cls} (other)", rest))
        else:
            for n in sorted(items):
                parts.append((cls, n, items[n]))
    return parts, total


def phases_bars(fid, bench, entries, style):
    """Stacked bars of compute vs communication time per placement and variant."""
    comps, keep_rank = phase_components(entries)
    if not comps:
        return None
    stacked = {k: stack_parts(v) for k, v in comps.items()}
    if not any(parts for parts, _ in stacked.values()):
        return None
    m = _matplotlib()
    names = []
    for parts, _ in stacked.values():
        for cls, n, _v in parts:
            if (cls, n) not in names:
                names.append((cls, n))
    order = {"compute": 0, "comm": 1, "other": 2}
    names.sort(key=lambda x: (order[x[0]], x[1]))
    cmaps = {"compute": ("#1f4e79", "#2e75b6", "#9dc3e6", "#deebf7"), "comm": ("#c55a11", "#f4b183", "#843c0c",
                                                                              "#fbe5d6"),
             "other": ("#7f7f7f", "#bfbfbf", "#595959")}
    colors, ci = {}, defaultdict(int)
    for cls, n in names:
        pal = cmaps[cls]
        colors[n] = pal[ci[cls] % len(pal)]
        ci[cls] += 1
    pls = sorted({(k[1], k[2]) for k in stacked}, key=lambda x: ((x[0] or 0) * (x[1] or 0), x))
    vids = style.sort({k[0] for k in stacked})
    with _rc():
        fig = _new_figure(min(1.0 + 0.32 * len(pls) * len(vids) + 0.3 * len(pls), 11), 3.4)
        ax = fig.add_subplot()
        x = 0
        centers, labels, tot_x, tot_y = [], [], [], []
        vlabels = []
        verts = defaultdict(list)
        numbered = len(pls) * len(vids) > 30
        number = {v: i + 1 for i, v in enumerate(vids)}
        for pl in pls:
            start = x
            for vid in vids:
                key = (vid, pl[0], pl[1])
                if key not in stacked:
                    continue
                parts, total = stacked[key]
                bottom = 0.0
                for cls, n, v in parts:
                    verts[n].append(((x - 0.4, bottom), (x - 0.4, bottom + v), (x + 0.4, bottom + v),
                                     (x + 0.4, bottom)))
                    bottom += v
                if total is not None:
                    tot_x.append(x)
                    tot_y.append(total)
                vlabels.append((x, str(number[vid]) if numbered else style.label(vid)))
                x += 1
            if x > start:
                centers.append((start + x - 1) / 2)
                labels.append(C.fmt_placement(*pl))
            x += 0.6
        for n, vs in verts.items():
            ax.add_collection(m["PolyCollection"](vs, facecolors=colors[n], edgecolors="white", linewidths=0.3))
        ax.autoscale_view()
        ax.set_ylim(bottom=0)
        if tot_x:
            ax.scatter(tot_x, tot_y, marker="_", s=120, color="#000", zorder=5, linewidths=1.2)
        ax.set_xticks([vx for vx, _ in vlabels])
        ax.set_xticklabels([lab for _, lab in vlabels], rotation=0 if numbered else 60,
                           ha="center" if numbered else "right", fontsize=6)
        sec = ax.secondary_xaxis("top")
        sec.set_xticks(centers)
        sec.set_xticklabels(labels)
        sec.set_xlabel("ranks × threads")
        ax.set_ylabel("seconds")
        ax.grid(axis="x", visible=False)
        handles = [m["Line2D"]([], [], color=colors[n], lw=6) for _, n in names]
        labs = [f"{n} ({cls})" for cls, n in names]
        if tot_x:
            handles.append(m["Line2D"]([], [], color="#000", marker="_", ls="none", markersize=10))
            labs.append("total")
        _layout(fig, legend=(handles, labs), where="right", bottom=0.45 if numbered else 1.1, top=0.6)
        svg = _svg(fig, fid)
    cap = ("Median time per component, stacked: compute (blues) vs communication (oranges); black tick: the measured "
           "total. Component classes by name: compute*, work, stencil → compute; comm, halo, allreduce, mpi, "
           "exchange, wait → communication; total/step/wall/time → total (not stacked).")
    if keep_rank is not None:
        cap += f" Rank aggregate: {keep_rank}."
    if numbered:
        cap += " Bars numbered by variant: " + ", ".join(f"{number[v]} = {style.label(v)}" for v in vids) + "."
    return Fig(fid, f"{bench}: compute vs communication", svg, cap)
