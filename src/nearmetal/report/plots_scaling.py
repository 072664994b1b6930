"""Figures over ranks: scaling over ranks x threads (with parallel efficiency or the ratio to
the baseline) and the all-pairs rank matrix."""

import json
import math

from . import formatting as F
from . import kernel_semantics as K
from . import plot_base as B
from . import points as PT


def scaling(fid, bench, metric, entries, style):
    """Median vs cores (ranks × threads) at the benchmark's headline point, one line per
    variant and thread count; right: parallel efficiency (compute kernels) or the ratio to
    the baseline (communication kernels). Results that give the scale as a point parameter
    ('cores', 'nodes': imported studies) are drawn over that parameter. None with fewer than
    2 placements."""
    xname = "cores (ranks × threads)"
    if len(PT.placements(entries)) < 2:
        sp = PT.scale_param(entries)
        if not sp:
            return None
        entries = [dict(p, ranks=p["point"][sp], threads=1, point={k: v for k, v in p["point"].items() if k != sp})
                   for p in entries]
        xname = sp
    hp = K.headline_point(entries)
    sub = [p for p in entries if PT.point_json(p.get("point")) == hp and PT.median_of(p) is not None]
    if len(PT.placements(sub)) < 2:
        return None
    hib = bool(entries[0].get("higher_is_better"))
    unit = entries[0].get("unit") or ""
    efficiency = K.scales_by_efficiency(entries)
    m = B.mpl()
    byv = B.entries_by(sub, lambda p: p.get("variant"))
    threads = sorted({p.get("threads") for p in sub})
    styles = ("-", "--", ":", "-.")
    # reference for efficiency: the baseline (or the first variant) at the smallest placement
    ref = None
    if efficiency:
        cands = sorted(sub, key=lambda p: ((p.get("ranks") or 1) * (p.get("threads") or 1),
                                            0 if p.get("variant") in style.bases else 1,
                                            style.order.get(p.get("variant"), 1e9)))
        ref = cands[0]
    with B.rc():
        fig = B.new_figure(10.0, 3.2)
        ax1, ax2 = fig.subplots(1, 2)
        cores_all = set()
        allvals = []
        if not efficiency:
            B.margin_band(ax2, style, "ratio")
        for vid in style.sort(byv):
            for ti, t in enumerate(threads):
                rows = sorted((p for p in byv[vid] if p.get("threads") == t), key=lambda p: p.get("ranks") or 0)
                if not rows:
                    continue
                cores = [(p.get("ranks") or 1) * (t or 1) for p in rows]
                cores_all.update(cores)
                ys = [PT.median_of(p) for p in rows]
                allvals += ys
                ls = styles[ti % len(styles)]
                ax1.plot(cores, ys, color=style.color[vid], marker=style.marker[vid], ls=ls)
                if efficiency:
                    rc = (ref.get("ranks") or 1) * (ref.get("threads") or 1)
                    rv = PT.median_of(ref)
                    if hib:
                        eff = [(y / c) / (rv / rc) if rv else None for y, c in zip(ys, cores)]
                    else:
                        eff = [(rv * rc) / (y * c) if y else None for y, c in zip(ys, cores)]
                    ax2.plot(cores, eff, color=style.color[vid], marker=style.marker[vid], ls=ls)
                else:
                    rr = [(c, PT.comparison(p)) for c, p in zip(cores, rows) if PT.comparison(p)
                          and F.is_num(PT.comparison(p).get("ratio"))]
                    if rr:
                        xs = [c for c, _ in rr]
                        ax2.plot(xs, [cp["ratio"] for _, cp in rr], color=style.color[vid],
                                 marker=style.marker[vid], ls=ls)
                        lo = [cp.get("ci_low") for _, cp in rr]
                        hi = [cp.get("ci_high") for _, cp in rr]
                        if all(F.is_num(v) for v in lo + hi):
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
        B.value_axis(ax1, allvals)
        ax1.set_ylabel(f"{metric} ({unit})" if unit else metric)
        ax1.set_title(f"{metric} at {F.point_label(json.loads(hp))}" if hp != "{}" else metric, loc="left")
        if efficiency:
            ax2.axhline(1, color="#444", lw=0.6)
            ax2.set_ylabel("efficiency")
            ax2.set_title("parallel efficiency vs baseline at smallest placement", loc="left")
        else:
            ax2.set_ylabel("ratio to baseline")
            ax2.set_title("variant / baseline (paired ratio)", loc="left")
        handles = [m["Line2D"]([], [], color=style.color[v], marker=style.marker[v]) for v in style.sort(byv)]
        labels = [style.label(v) for v in style.sort(byv)]
        if len(threads) > 1:
            handles += [m["Line2D"]([], [], color="#444", ls=styles[i % len(styles)]) for i in range(len(threads))]
            labels += [f"{t} thread{'s' if t != 1 else ''}" for t in threads]
        B.layout(fig, legend=(handles, labels), where="right", wspace=0.3, bottom=0.5)
        svg = B.svg(fig, fid)
    cdef = "cores c = ranks × threads" if xname.startswith("cores (") else f"c = {xname}"
    if efficiency:
        how = ("throughput per core relative to the reference, (X/c)/(X_ref/c_ref)" if hib else
               "(T_ref · c_ref)/(T · c), fixed total work assumed")
        where = (F.fmt_placement(ref.get("ranks"), ref.get("threads")) if xname.startswith("cores (")
                 else f"{xname} = {ref.get('ranks')}")
        cap = (f"Left: median vs {cdef}. Right: efficiency = {how}; reference: {ref.get('variant')} at {where}. "
               "1 = perfect scaling with no container cost.")
    else:
        cap = (f"Left: median vs {cdef}. Right: variant / baseline at each placement (the table's paired "
               "ratio) with its interval; green band: the equivalence margin.")
    return B.Fig(fid, f"{F.what(bench, metric)}: scaling", svg, cap)


def pairs_heatmaps(fid, bench, metric, entries, style):
    """Median per (src, dst) rank pair, one heatmap per variant on a shared color scale;
    second row: overhead % per pair for the variants with a baseline (diverging colors).
    The largest placement is drawn; with a size parameter, the smallest (lower is better)
    or largest (higher is better) size."""
    pe = [p for p in entries if isinstance(p.get("point"), dict) and "src" in p["point"] and "dst" in p["point"]]
    if not pe:
        return None
    pl = max(PT.placements(pe), key=lambda x: ((x[0] or 0) * (x[1] or 0), x))
    pe = [p for p in pe if (p.get("ranks"), p.get("threads")) == pl]
    note = ""
    sizes = sorted({p["point"]["size"] for p in pe if F.is_num(p["point"].get("size"))})
    if len(sizes) > 1:
        s = sizes[-1] if entries[0].get("higher_is_better") else sizes[0]
        pe = [p for p in pe if p["point"].get("size") == s]
        note = f" Message size {F.fmt_size(s)}."
    import numpy as np

    ranks = sorted({int(p["point"][k]) for p in pe for k in ("src", "dst") if F.is_num(p["point"][k])})
    if not ranks:
        return None
    idx = {r: i for i, r in enumerate(ranks)}
    n = len(ranks)
    byv = B.entries_by(pe, lambda p: p.get("variant"))
    vids = style.sort(byv)
    med, ovh = {}, {}
    for vid in vids:
        a = np.full((n, n), np.nan)
        o = np.full((n, n), np.nan)
        for p in byv[vid]:
            i, j = idx.get(p["point"]["src"]), idx.get(p["point"]["dst"])
            if i is None or j is None:
                continue
            v = PT.median_of(p)
            if v is not None:
                a[i, j] = v
            c = PT.comparison(p)
            if c and F.is_num(c.get("overhead_pct")):
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
    with B.rc():
        fig = B.new_figure(2.6 * ncol + 1.6, 2.6 * (nrow_med + nrow_ovh) + 0.2)
        axes = fig.subplots(nrow_med + nrow_ovh, ncol, squeeze=False)
        l, r, b, t = B.layout(fig, right=1.3, left=0.6, bottom=0.45, top=0.3, wspace=0.35, hspace=0.45)
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
                            ax.text(j, i, F.fmt_num(med[vid][i, j], 2), ha="center", va="center", fontsize=5.5,
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
        svg = B.svg(fig, fid)
    cap = (f"Median {metric} per rank pair (row: source, column: destination) at {pl[0]} ranks, one color scale for "
           "all variants" + ("; below: overhead % against the baseline, red = slower" if ovids else "") + "." + note)
    return B.Fig(fid, f"{F.what(bench, metric)}: all-pairs matrix", svg, cap)
