"""What every figure of the HTML report shares: matplotlib (Agg backend, imported on first
use) with one style, figures as inline SVG strings with ids of their own, fixed margins,
value axes, the per-variant colors and markers (Style), and bars as polygon collections."""

import contextlib
import io
import logging
import math
import re
import warnings
from collections import defaultdict

from . import formatting as F
from . import points as PT


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
_mpl = None


class Fig:
    __slots__ = ("id", "title", "svg", "caption")

    def __init__(self, fid, title, svg, caption=""):
        self.id, self.title, self.svg, self.caption = fid, title, svg, caption


def mpl():
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


# Control characters have no glyph (matplotlib warns "Glyph 9 missing from current font" and
# draws a box): a tab, carriage return, vertical tab or form feed reads as a space, any other
# control character (but the newline labels use on purpose) is dropped. A '$' is escaped
# (matplotlib draws it as '$'): two of them would start mathtext, which the report never uses
# and a label (a variant named 'a$b$c') need not parse as.
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")
_BLANK = {"\t": " ", "\r": " ", "\x0b": " ", "\x0c": " "}


def clean_label(text):
    """A label as it can be drawn: no control characters (but newlines), '$' literal."""
    if not isinstance(text, str):
        return text
    return _CONTROL.sub(lambda m: _BLANK.get(m.group(0), ""), text).replace("$", "\\$")


def _clean_texts(fig):
    """clean_label on every text of the figure: titles, axis labels, legends, annotations,
    and tick labels given as strings (a FixedFormatter's, set at draw time)."""
    from matplotlib.text import Text
    from matplotlib.ticker import FixedFormatter

    for t in fig.findobj(Text):
        s = t.get_text()
        c = clean_label(s)
        if c != s:
            t.set_text(c)
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for fmt in (axis.get_major_formatter(), axis.get_minor_formatter()):
                if isinstance(fmt, FixedFormatter):
                    fmt.seq = [clean_label(x) for x in fmt.seq]


def svg(fig, fid):
    """The figure as an inline <svg> element: no XML prolog, no metadata block, every id
    prefixed with the figure's id (several SVGs in one page must not share ids). Every text
    of the figure is drawn through clean_label."""
    _clean_texts(fig)
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    s = buf.getvalue()
    start = s.find("<svg")
    s = s[start:] if start >= 0 else s
    s = re.sub(r"<metadata>.*?</metadata>\s*", "", s, count=1, flags=re.S)
    s = _ID.sub(lambda m: f'id="{fid}-{m.group(1)}"', s)
    s = _REF.sub(lambda m: f"{m.group(1)}{fid}-{m.group(2)}", s)
    return s.replace("<svg ", f'<svg class="plot" role="img" aria-label="{fid}" ', 1)


def new_figure(w, h):
    m = mpl()
    return m["Figure"](figsize=(w, h), dpi=72)


def layout(fig, *, left=0.75, right=0.2, top=0.35, bottom=0.45, wspace=0.25, hspace=0.5, legend=None,
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


def value_axis(ax, values, axis="y"):
    """Log scale where values span more than 20x, linear otherwise; tick labels as plain
    numbers (no mathtext: parsing it is the slowest part of a log axis)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter, NullLocator

    vals = [v for v in values if F.is_num(v) and v > 0]
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
    compared variants from a 10-color palette; short labels (points.short_variant_labels)."""

    def __init__(self, analysis):
        order = PT.variant_order(analysis)
        self.order = order
        bases = PT.baseline_ids(analysis)
        self.labels, self.dropped = PT.short_variant_labels(analysis)
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


@contextlib.contextmanager
def rc():
    """The report's matplotlib style, with matplotlib's own warnings and log messages kept
    from the user (every figure is drawn inside it): a report either renders or fails with
    nearmetal's message, never with a library's."""
    log = logging.getLogger("matplotlib")
    level = log.level
    with warnings.catch_warnings(), mpl()["matplotlib"].rc_context(RC):
        warnings.simplefilter("ignore")
        log.setLevel(logging.ERROR)
        try:
            yield
        finally:
            log.setLevel(level)


def size_ticks(ax, sizes):
    sizes = sorted(set(sizes))
    if not sizes:
        return
    if len(sizes) <= 8:  # few sizes: label exactly those measured
        ax.set_xticks(sizes)
        ax.set_xticklabels([F.fmt_size(t).replace(" ", "\u2009") for t in sizes])
        ax.minorticks_off()
        return
    lo, hi = math.log2(max(sizes[0], 1)), math.log2(max(sizes[-1], 1))
    step = max(1, int(math.ceil((hi - lo) / 8)))
    if step % 2 and step > 1:
        step += 1
    ticks = [2 ** e for e in range(int(lo), int(hi) + 1) if (e - int(lo)) % step == 0]
    ax.set_xticks(ticks)
    ax.set_xticklabels([F.fmt_size(t).replace(" ", "\u2009") for t in ticks])
    ax.minorticks_off()


def margin_band(ax, style, kind):
    m = style.margin
    if not F.is_num(m):
        return
    if kind == "ratio":
        ax.axhspan(1 - m, 1 + m, color="#2ca02c", alpha=0.08, lw=0)
        ax.axhline(1, color="#444", lw=0.6)
    else:
        ax.axhspan(-m * 100, m * 100, color="#2ca02c", alpha=0.08, lw=0)
        ax.axhline(0, color="#444", lw=0.6)


def entries_by(entries, keyf):
    out = defaultdict(list)
    for p in entries:
        out[keyf(p)].append(p)
    return out


def poly(ax, verts, color, alpha):
    """Bars as one PolyCollection (one artist, fast in SVG) instead of a patch per bar."""
    m = mpl()
    pc = m["PolyCollection"](verts, facecolors=[(color, a) for a in alpha], edgecolors="none")
    ax.add_collection(pc)
    return pc


def bars(ax, xs, heights, width, color, alpha):
    verts = [((x - width / 2, 0), (x - width / 2, h), (x + width / 2, h), (x + width / 2, 0))
             for x, h in zip(xs, heights)]
    return poly(ax, verts, color, alpha)


def errorbars(ax, xs, hs, cis):
    """95% CI whiskers of overhead bars (one LineCollection)."""
    pts = [(x, h, ci) for x, h, ci in zip(xs, hs, cis) if ci]
    if pts:
        ax.vlines([x for x, _, _ in pts], [ci[0] for _, _, ci in pts], [ci[1] for _, _, ci in pts],
                  color="#333", lw=0.6)
