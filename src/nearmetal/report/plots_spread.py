"""Figures of distributions and parts: box plots of the repetitions at headline points, and
stacked compute vs communication bars."""

import math
from collections import defaultdict

from . import formatting as F
from . import kernel_semantics as K
from . import plot_base as B


MAX_BOXES = 8  # headline points in the dispersion figure


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
    m = B.mpl()
    with B.rc():
        fig = B.new_figure(2.8 * ncol + 0.6, 2.5 * nrow + 0.6)
        axes = fig.subplots(nrow, ncol, squeeze=False)
        seen = style.sort({p.get("variant") for _, _, rows in panels for p in rows if drawable(p)})
        number = {v: i + 1 for i, v in enumerate(seen)}
        for k, (title, unit, rows) in enumerate(panels):
            ax = axes[k // ncol][k % ncol]
            rows = sorted(rows, key=lambda p: style.order.get(p.get("variant"), 1e9))
            data = [[v for v in p.get("values") or [] if F.is_num(v)] if drawable(p) else [] for p in rows]
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
        B.layout(fig, legend=(handles, [f"{number[v]} {style.label(v)}" for v in seen]),
                wspace=0.45, hspace=0.45, bottom=0.35, left=0.6)
        svg = B.svg(fig, fid)
    cap = ("Every repetition's value per variant (boxes: quartiles, whiskers: 1.5 IQR, dots: beyond). Boxes are "
           "numbered as in the legend.")
    return B.Fig(fid, "Dispersion at headline points", svg, cap)


def phases_bars(fid, bench, entries, style):
    """Stacked bars of compute vs communication time per placement and variant."""
    comps, keep_rank = K.phase_components(entries)
    if not comps:
        return None
    stacked = {k: K.stack_parts(v) for k, v in comps.items()}
    if not any(parts for parts, _ in stacked.values()):
        return None
    m = B.mpl()
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
    with B.rc():
        fig = B.new_figure(min(1.0 + 0.32 * len(pls) * len(vids) + 0.3 * len(pls), 11), 3.4)
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
                labels.append(F.fmt_placement(*pl))
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
        B.layout(fig, legend=(handles, labs), where="right", bottom=0.45 if numbered else 1.1, top=0.6)
        svg = B.svg(fig, fid)
    cap = ("Median time per component, stacked: compute (blues) vs communication (oranges); black tick: the measured "
           "total. Component classes by name: compute*, work, stencil → compute; comm, halo, allreduce, mpi, "
           "exchange, wait → communication; total/step/wall/time → total (not stacked).")
    if keep_rank is not None:
        cap += f" Rank aggregate: {keep_rank}."
    if numbered:
        cap += " Bars numbered by variant: " + ", ".join(f"{number[v]} = {style.label(v)}" for v in vids) + "."
    return B.Fig(fid, f"{bench}: compute vs communication", svg, cap)
