"""Figures over message sizes and points: the size sweep (median vs size, overhead bars per
size) and the overhead bars of benchmarks without a size sweep."""

import json
import math

from . import formatting as F
from . import kernel_semantics as K
from . import plot_base as B
from . import points as PT
from . import row_selection as RS


MAX_BARS_KEYS = 24  # x positions in an overhead bar chart
MAX_PANELS = 3  # placements per size-sweep figure


def _pick_placements(pls, n=MAX_PANELS):
    if len(pls) <= n:
        return pls
    idx = sorted({round(i * (len(pls) - 1) / (n - 1)) for i in range(n)})
    return [pls[i] for i in idx]


def size_sweep(fid, bench, metric, entries, style):
    """Median vs message size (log-log), one line per variant with its p5–p95 band; below,
    the ratio to the baseline with its interval band and the equivalence margin. One panel per
    placement (at most 4: smallest, largest and evenly between)."""
    sized = [p for p in entries if F.is_num((p.get("point") or {}).get("size"))]
    if not PT.is_size_swept(sized):
        return None
    pls = PT.placements(sized)
    shown = _pick_placements(pls)
    # other point parameters than size: keep the most common combination
    def rest(p):
        return json.dumps({k: v for k, v in p["point"].items() if k != "size"}, sort_keys=True)
    combos = B.entries_by(sized, rest)
    main = max(combos, key=lambda k: len(combos[k]))
    sized = combos[main]
    unit = entries[0].get("unit") or ""
    has_cmp = any(PT.comparison(p) for p in sized)
    with B.rc():
        fig = B.new_figure(max(7.5, min(3.6 * len(shown), 11) + 0.8), 4.9 if has_cmp else 3.1)
        axes = fig.subplots(2 if has_cmp else 1, len(shown), squeeze=False,
                            gridspec_kw={"height_ratios": [3, 2]} if has_cmp else None, sharex="col")
        allvals = []
        handles = {}
        for col, pl in enumerate(shown):
            ax = axes[0][col]
            sub = [p for p in sized if (p.get("ranks"), p.get("threads")) == pl]
            byv = B.entries_by(sub, lambda p: p.get("variant"))
            allsizes = []
            for vid in style.sort(byv):
                rows = sorted(byv[vid], key=lambda p: p["point"]["size"])
                xs = [p["point"]["size"] for p in rows if PT.median_of(p) is not None]
                ys = [PT.median_of(p) for p in rows if PT.median_of(p) is not None]
                if not xs:
                    continue
                allsizes += xs
                allvals += ys
                lo = [(p.get("stats") or {}).get("p5") for p in rows if PT.median_of(p) is not None]
                hi = [(p.get("stats") or {}).get("p95") for p in rows if PT.median_of(p) is not None]
                (h,) = ax.plot(xs, ys, color=style.color[vid], marker=style.marker[vid], markersize=2.5,
                               label=style.label(vid), lw=1.0 if vid in style.bases else 1.3)
                handles[vid] = h
                if all(F.is_num(v) for v in lo + hi):
                    ax.fill_between(xs, lo, hi, color=style.color[vid], alpha=0.12, lw=0)
            ax.set_xscale("log", base=2)
            B.value_axis(ax, allvals)
            B.size_ticks(ax, allsizes)
            ax.set_title(F.placement_words(*pl) or F.what(bench, metric))
            if col == 0:
                ax.set_ylabel(f"{metric} ({unit})" if unit else metric)
            if has_cmp:
                ax2 = axes[1][col]
                B.margin_band(ax2, style, "pct")
                cvids = [v for v in style.sort(byv) if any(PT.comparison(p) for p in byv[v])]
                sizes = sorted(set(allsizes))
                gaps = [math.log2(b) - math.log2(a) for a, b in zip(sizes, sizes[1:]) if a > 0 and b > 0]
                group = 0.8 * min(min(gaps) if gaps else 1.0, 2.0)  # bar group width in log2 units
                bw = group / max(1, len(cvids))
                for i, vid in enumerate(cvids):
                    rows = [p for p in byv[vid] if PT.comparison(p) and F.is_num(PT.comparison(p).get("overhead_pct"))
                            and p["point"]["size"] > 0]
                    if not rows:
                        continue
                    off = -group / 2 + bw * (i + 0.5)
                    lx = [math.log2(p["point"]["size"]) + off for p in rows]
                    hs = [PT.comparison(p)["overhead_pct"] for p in rows]
                    alpha = [0.95 if PT.verdict_of(p) in ("slower", "faster") else 0.35 for p in rows]
                    verts = [((2 ** (x - bw * 0.45), 0), (2 ** (x - bw * 0.45), h), (2 ** (x + bw * 0.45), h),
                              (2 ** (x + bw * 0.45), 0)) for x, h in zip(lx, hs)]
                    B.poly(ax2, verts, style.color[vid], alpha)
                    cis = [PT.overhead_ci(PT.comparison(p)) for p in rows]
                    B.errorbars(ax2, [2 ** x for x in lx], hs, cis)
                ax2.set_xscale("log", base=2)
                ax2.autoscale_view()
                B.size_ticks(ax2, allsizes)
                ax2.set_xlabel("message size")
                ax2.grid(axis="x", visible=False)
                if col == 0:
                    ax2.set_ylabel("overhead %")
            else:
                ax.set_xlabel("message size")
        B.layout(fig, legend=([handles[v] for v in style.sort(handles)], [style.label(v) for v in style.sort(handles)]),
                wspace=0.3, hspace=0.35, bottom=0.5)
        svg = B.svg(fig, fid)
    cap = ("Median per message size, log–log; shaded: p5–p95 of the repetitions."
           + (" Below: overhead % of each variant against its baseline at every size (+ = slower), whiskers: "
              "the interval of the table's var/base column;"
              " solid bars: verdict slower/faster, pale: equivalent or inconclusive; green band: the equivalence "
              "margin." if has_cmp else ""))
    if len(shown) < len(pls):
        cap += f" {len(shown)} of {len(pls)} placements shown."
    if len(combos) > 1:
        cap += f" Points with {main} only."
    return B.Fig(fid, f"{F.what(bench, metric)} vs message size", svg, cap)


def overhead_bars(fid, bench, groups, style):
    """Overhead % per point of one benchmark: x = metric × point × placement (headline metric
    first, at most 24 positions in all, aggregate ranks preferred), grouped bars per variant
    with interval whiskers (the level of the table's var/base column). Bars are solid where the
    verdict is slower or faster, pale where
    equivalent or inconclusive."""
    metrics = [m for m, entries in groups.items() if any(PT.comparison(p) for p in entries)]
    if not metrics:
        return None
    head = K.headline_metric(metrics)
    metrics = [head] + [m for m in metrics if m != head]
    budget = max(3, MAX_BARS_KEYS // len(metrics))
    slots, notes, left_out, aggregated = [], [], [], []
    for metric in metrics:
        if len(slots) >= MAX_BARS_KEYS:
            left_out.append(metric)
            continue
        entries = [p for p in groups[metric] if PT.comparison(p)]
        agg = [p for p in entries if (p.get("point") or {}).get("rank") in PT.AGGREGATE_RANKS]
        if agg and len(agg) < len(entries):
            entries = agg
            aggregated.append(metric)
        keys, note = RS.select_rows(entries, min(budget, MAX_BARS_KEYS - len(slots)))
        if note:
            notes.append(f"{metric}: {note}")
        for k in keys:
            slots.append((metric, k))
    if aggregated:
        notes.insert(0, f"aggregate ranks only ({', '.join(aggregated)})")
    pos = {s: i for i, s in enumerate(slots)}
    entries = [p for m in metrics for p in groups[m] if (m, PT.row_key(p)) in pos and PT.comparison(p)]
    byv = B.entries_by(entries, lambda p: p.get("variant"))
    vids = style.sort(byv)
    multi_metric = len({m for m, _ in slots}) > 1
    multi_pl = len(PT.placements(entries)) > 1
    labels = []
    for metric, k in slots:
        lab = F.point_label(json.loads(k[0]))
        lab = "" if lab == "—" else lab
        if multi_pl:
            lab = f"{lab} {F.fmt_placement(k[1], k[2])}".strip()
        if multi_metric:
            lab = f"{metric}\n{lab}" if lab else metric
        labels.append(lab or "—")
    m = B.mpl()
    longest = max(len(x) for lab in labels for x in lab.split("\n"))
    rot = len(slots) * longest > 120
    with B.rc():
        fig = B.new_figure(min(11.0, max(6.0, 1.2 + 0.55 * len(slots) * max(1, len(vids)) ** 0.5)), 3.4)
        ax = fig.add_subplot()
        B.margin_band(ax, style, "pct")
        width = 0.8 / max(1, len(vids))
        for i, vid in enumerate(vids):
            rows = [p for p in byv[vid] if F.is_num(PT.comparison(p).get("overhead_pct"))]
            xs = [pos[(p.get("metric"), PT.row_key(p))] - 0.4 + width * (i + 0.5) for p in rows]
            hs = [PT.comparison(p)["overhead_pct"] for p in rows]
            alpha = [0.95 if PT.verdict_of(p) in ("slower", "faster") else 0.35 for p in rows]
            B.bars(ax, xs, hs, width * 0.9, style.color[vid], alpha)
            B.errorbars(ax, xs, hs, [PT.overhead_ci(PT.comparison(p)) for p in rows])
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
        B.layout(fig, legend=(handles, [style.label(v) for v in vids]),
                bottom=(0.25 + 0.065 * longest if rot else 0.2 + 0.14 * lines), top=0.2)
        svg = B.svg(fig, fid)
    cap = ("Overhead of each variant against its baseline (positive = slower), whiskers: the interval of the "
           "table's var/base column; solid bars: "
           "verdict slower/faster, pale: equivalent or inconclusive; green band: the equivalence margin.")
    if notes:
        cap += " " + "; ".join(notes) + "."
    if left_out:
        cap += f" Not drawn: {', '.join(left_out)} (in the full table)."
    return B.Fig(fid, f"{bench}: overhead per point", svg, cap)
