"""Figures of the report's parallel-I/O section (drawing only: the analysis chose what each
figure holds, io_section hands it over as plain lists and dicts, so the figures draw in
forked workers like the rest of the report's).

Every function takes a figure id and rows [(row title, panels)] — one row per variant x
placement — and returns a plot_base.Fig, or None when there is nothing to draw.
"""

import math

from . import formatting as F
from . import plot_base as B

PHASE_COLORS = {"open_s": "#1f77b4", "write_s": "#d62728", "close_s": "#2ca02c", "read_s": "#9467bd"}


def _columns(rows):
    """Libraries present in any row, in the order the analysis gives them (the I/O library
    registry's order)."""
    return list(dict.fromkeys(lib for _, panels in rows for lib in panels))


def _cell_text(ax, i, j, text, bright):
    ax.text(j, i, text, ha="center", va="center", fontsize=6, color="#000" if bright else "#fff")


def _param(v):
    return "default" if v is None else str(v)


def _hide_empty(axes):
    for row in axes:
        for ax in row:
            if not ax.has_data() and not ax.images:
                ax.set_visible(False)


# ---------------------------------------------------------------------- Figs. 3-7

def phase_times(fid, rows):
    """Median time of each phase (maximum over ranks) per pattern and io_layout, one panel
    per library, one row per variant; whiskers: the 95% CI of the median."""
    if not rows:
        return None
    cols = _columns(rows)
    npos = max(len(p["xs"]) for _, panels in rows for p in panels.values())
    crowded = npos * len(cols) > 12  # tick labels would touch: slant them
    m = B.mpl()
    used = set()
    with B.rc():
        fig = B.new_figure(max(6.0, min(max(2.9, 0.62 * npos) * len(cols), 14.0) + 0.8),
                            2.5 * len(rows) + 0.9 + (0.45 if crowded else 0))
        axes = fig.subplots(len(rows), len(cols), squeeze=False)
        for r, (title, panels) in enumerate(rows):
            for c, lib in enumerate(cols):
                panel = panels.get(lib)
                if not panel:
                    continue
                ax = axes[r][c]
                xs = panel["xs"]
                phases = [ph for ph in PHASE_COLORS
                          if any((d.get(ph) or {}).get("median") for _, _, d in xs)]  # read_s is 0 with -r none
                allv = []
                for k, ph in enumerate(phases):
                    off = (k - (len(phases) - 1) / 2) * 0.08
                    pts = [(i + off, d[ph], pattern) for i, (_, pattern, d) in enumerate(xs) if d.get(ph)]
                    for i, (x, d, pattern) in enumerate(pts):
                        lo, hi = d["ci"] if d.get("ci") else (d["median"], d["median"])
                        ax.vlines([x], [lo], [hi], color=PHASE_COLORS[ph], lw=0.8)
                        allv += [lo, hi, d["median"]]
                    # lines join io_layouts of one pattern; patterns stay apart
                    run = []
                    for x, d, pattern in pts + [(None, None, None)]:
                        if run and pattern != run[-1][2]:
                            ax.plot([p[0] for p in run], [p[1]["median"] for p in run], color=PHASE_COLORS[ph],
                                    marker="o", markersize=3)
                            run = []
                        if x is not None:
                            run.append((x, d, pattern))
                    used.add(ph)
                B.value_axis(ax, allv)
                ax.set_xticks(range(len(xs)))
                if crowded:
                    ax.set_xticklabels([label.replace("\n", " ") for label, _, _ in xs], fontsize=6.5, rotation=35,
                                       ha="right", rotation_mode="anchor")
                else:
                    ax.set_xticklabels([label for label, _, _ in xs], fontsize=6.5)
                ax.set_xlim(-0.5, len(xs) - 0.5)
                ax.grid(axis="x", visible=False)
                ax.set_title(f"{lib}" + (f"\n{title}" if len(rows) > 1 else ""), fontsize=8)
                if c == 0 or not axes[r][c - 1].has_data():
                    ax.set_ylabel("seconds (max over ranks)")
        _hide_empty(axes)
        handles = [m["Line2D"]([], [], color=PHASE_COLORS[ph], marker="o", markersize=3) for ph in PHASE_COLORS
                   if ph in used]
        labels = [ph.removesuffix("_s") for ph in PHASE_COLORS if ph in used]
        B.layout(fig, legend=(handles, labels), wspace=0.35, hspace=1.0 if crowded else 0.75,
                  bottom=0.95 if crowded else 0.55, top=0.45)
        svg = B.svg(fig, fid)
    fixed = "; ".join(f"{lib}: {p['fixed']}" for _, panels in rows for lib, p in panels.items() if p["fixed"])
    cap = ("Median time of each phase, the maximum over ranks of every run (as FMS's mpp_open, mpp_write, "
           "mpp_close, mpp_read), per write pattern and io_layout; whiskers: 95% bootstrap CI of the median. "
           "Write includes the gather to the I/O-domain roots. Where a library was measured "
           "with several hints or chunkings, the panel holds them as in its fastest write")
    cap += f" ({fixed})." if fixed else "."
    return B.Fig(fid, "Parallel I/O: time per phase vs io_layout", svg, cap)


# ---------------------------------------------------------------------- heatmaps

def _heatmap_figure(fid, rows, *, xkey, ykey, xname, yname, cmap, unit, title, caption, extra=None):
    import numpy as np

    cols = _columns(rows)
    allv = [v for _, panels in rows for p in panels.values() for line in p["values"] for v in line
            if v is not None]
    allv += [v for _, panels in rows for p in panels.values() for _, v in p.get("refs") or () if v is not None]
    if not allv:
        return None
    vmin, vmax = min(allv), max(allv)
    if vmin == vmax:
        vmin, vmax = vmin * 0.95, vmax * 1.05 + 1e-12
    with B.rc():
        head_lines = max([1 + (len(rows) > 1)] + [1 + (extra(p).count("\n") + 1 if extra and extra(p) else 0)
                                                  for _, panels in rows for p in panels.values()])
        head = 0.14 * head_lines  # inches of panel title
        fig = B.new_figure(max(5.0, 2.7 * len(cols) + 1.6), (2.2 + head) * len(rows) + 0.7 + head)
        axes = fig.subplots(len(rows), len(cols), squeeze=False)
        l, r, b, t = B.layout(fig, right=1.3, left=0.75, bottom=0.5, top=0.25 + head, wspace=0.45,
                               hspace=0.45 + 0.8 * head)
        im = None
        for ri, (rtitle, panels) in enumerate(rows):
            for ci, lib in enumerate(cols):
                p = panels.get(lib)
                if not p:
                    continue
                ax = axes[ri][ci]
                a = np.array([[np.nan if v is None else v for v in line] for line in p["values"]], dtype=float)
                im = ax.imshow(a, vmin=vmin, vmax=vmax, cmap=cmap, origin="lower", interpolation="nearest",
                               aspect="auto")
                cm = im.get_cmap()
                for i in range(a.shape[0]):
                    for j in range(a.shape[1]):
                        if np.isfinite(a[i, j]):
                            lum = cm((a[i, j] - vmin) / (vmax - vmin))
                            bright = 0.299 * lum[0] + 0.587 * lum[1] + 0.114 * lum[2] > 0.5
                            _cell_text(ax, i, j, F.fmt_num(a[i, j]), bright)
                ax.set_xticks(range(len(p[xkey])))
                ax.set_xticklabels([_param(v) for v in p[xkey]])
                ax.set_yticks(range(len(p[ykey])))
                ax.set_yticklabels([_param(v) for v in p[ykey]])
                ax.set_xlabel(xname)
                ax.set_ylabel(yname)
                ax.grid(False)
                title_text = lib + (f" · {rtitle}" if len(rows) > 1 else "")
                if extra:
                    more = extra(p)
                    title_text += f"\n{more}" if more else ""
                ax.set_title(title_text, fontsize=7)
        _hide_empty(axes)
        if im is not None:
            W = fig.get_size_inches()[0]
            cax = fig.add_axes([r + 0.25 / W, b + 0.1 * (t - b), 0.12 / W, 0.8 * (t - b)])
            cb = fig.colorbar(im, cax=cax)
            cb.set_label(unit)
            from matplotlib.ticker import FuncFormatter

            cb.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: F.fmt_num(v)))  # no offset text
        svg = B.svg(fig, fid)
    fixed = "; ".join(f"{lib}: {p['fixed']}" for _, panels in rows for lib, p in panels.items() if p["fixed"])
    return B.Fig(fid, title, svg, caption + (f" Held fixed: {fixed}." if fixed else ""))


def bw_heatmaps(fid, rows):
    """Median write bandwidth over aggregators per node x stripe count, one heatmap per
    shared-file library (seed 004, Figs. 8-9)."""
    if not rows:
        return None
    return _heatmap_figure(
        fid, rows, xkey="aggr", ykey="stripes", xname="aggregators per node (cb_config_list)",
        yname="stripes (striping_factor)", cmap="viridis", unit="write MB/s (median)",
        title="Parallel I/O: write bandwidth vs aggregators × stripes",
        caption=("Median write bandwidth (bytes / the slowest rank's open + write + close) of the shared-file "
                 "configurations per number of aggregators and stripe count; 'default' = the hint not set. Bright = "
                 "faster. Each library's panel holds its other parameters as in its highest bandwidth. Stripes "
                 "only act on Lustre: elsewhere the MPI library ignores striping_factor (see the table's hints)."))


def chunk_grid(fid, rows):
    """Median write time over chunk layouts CX x CY for netCDF-4 and HDF5, with the default
    chunking and the contiguous PnetCDF file as references (seed 004, Fig. 15)."""
    if not rows:
        return None

    def refs(p):
        return "\n".join(f"{name}: {F.fmt_num(v)} s" for name, v in p.get("refs") or ())

    return _heatmap_figure(
        fid, rows, xkey="cx", ykey="cy", xname="CX (x split into CX chunks)", yname="CY (y split into CY chunks)",
        cmap="viridis_r", unit="write s (median, max over ranks)",
        title="Parallel I/O: write time vs chunk layout", extra=refs,
        caption=("Median write time (the slowest rank) per chunk layout, FMS's chunk_layout: chunk = (1, nz, "
                 "ceil(ny/CY), ceil(nx/CX)); 1×1 is one chunk per record, the layout closest to the contiguous "
                 "PnetCDF file. Dark = slower. References in each panel's title: the library's default chunking and "
                 "the contiguous files (PnetCDF, HDF5's default) closest to that configuration, on the same color "
                 "scale."))


# ---------------------------------------------------------------------- load balance

def load_balance(fid, rows):
    """Median write time per rank of the fastest configuration and of serial; whiskers: the
    95% CI of the median."""
    if not rows:
        return None
    ncol = max(len(panels) for _, panels in rows)
    nranks = max(len(ranks) for _, panels in rows for _, ranks in panels)
    with B.rc():
        fig = B.new_figure(max(5.5, min(ncol * (1.6 + 0.18 * nranks), 11.0) + 0.8), 2.4 * len(rows) + 0.7)
        axes = fig.subplots(len(rows), ncol, squeeze=False, sharey="row")
        for ri, (rtitle, panels) in enumerate(rows):
            top = max(max(d["ci"][1] if d.get("ci") else d["median"], d["median"]) for _, ranks in panels
                      for _, d in ranks)
            for ci, (ptitle, ranks) in enumerate(panels):
                ax = axes[ri][ci]
                xs = [r for r, _ in ranks]
                hs = [d["median"] for _, d in ranks]
                color = "#7f7f7f" if ptitle.startswith("serial") else "#1f77b4"
                B.bars(ax, xs, hs, 0.7, color, [0.85] * len(xs))
                cis = [d["ci"] for _, d in ranks]
                B.errorbars(ax, xs, hs, cis)
                ax.set_xlim(min(xs) - 0.6, max(xs) + 0.6)
                ax.set_ylim(0, top * 1.08)  # one scale per row: serial's single writer against the fastest
                ax.set_xticks(xs if len(xs) <= 16 else xs[:: math.ceil(len(xs) / 12)])
                ax.set_xlabel("rank")
                ax.grid(axis="x", visible=False)
                ax.set_title(ptitle + (f"\n{rtitle}" if len(rows) > 1 else ""), fontsize=7.5)
                if ci == 0:
                    ax.set_ylabel("write s (median)")
        _hide_empty(axes)
        B.layout(fig, wspace=0.25, hspace=0.8, top=0.55, bottom=0.45)
        svg = B.svg(fig, fid)
    cap = ("Median write time of every rank (gather + library write of all records, as FMS's mpp_write), whiskers: "
           "95% CI of the median: the fastest configuration against serial. Ranks that only send their block wait "
           "in the next record's gather until their writer is done, so a slow writer lengthens every bar of its "
           "domain; uneven bars show unequal blocks or writers.")
    return B.Fig(fid, "Parallel I/O: per-rank write time (load balance)", svg, cap)
