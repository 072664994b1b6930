"""Numbers, sizes, ratios and labels as every report format writes them."""

import math

from ..analysis.labels import fmt_ratios as ratio_texts
from ..analysis.labels import fmt_size, is_num, point_label  # noqa: F401  (report modules use them as F.*)


def fmt_num(v, digits=3):
    """A measured value, readable: 3 significant digits, thousands separated, no exponent
    between 1e-3 and 1e9."""
    if not is_num(v):
        return "—"
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 1e9 or a < 1e-3:
        return f"{v:.{digits - 1}e}"
    if a >= 10 ** digits:
        return f"{v:,.0f}"
    decimals = max(0, digits - 1 - int(math.floor(math.log10(a))))
    return f"{v:.{decimals}f}"


def fmt_ratio(c):
    """'1.030 [0.990–1.070]' from a comparison; '—' without one. A point decided at a final look
    of its own level (the time ran out) says it: '1.030 [0.990–1.070] (94.9%)'."""
    if not c or not is_num(c.get("ratio")):
        return "—"
    lo, hi = c.get("ci_low"), c.get("ci_high")
    if is_num(lo) and is_num(hi):
        level = c.get("ci_level")
        own = f" ({level * 100:.3g}%)" if c.get("own_level") and is_num(level) else ""
        r, lo_txt, hi_txt = ratio_texts(c["ratio"], lo, hi)
        return f"{r} [{lo_txt}–{hi_txt}]{own}"
    return ratio_texts(c["ratio"])[0]


def fmt_pct(p, signed=True, digits=1):
    if not is_num(p):
        return "—"
    if signed:
        return f"{p:+.{digits}f}%"
    return f"{p:.{digits}f}%"


def fmt_placement(ranks, threads):
    if not ranks and not threads:
        return "—"
    return f"{ranks}×{threads}"


def what(bench, metric):
    """'bw · bandwidth', or just 'latency' where benchmark and metric share the name."""
    return bench if metric == bench else f"{bench} · {metric}"


def placement_words(ranks, threads):
    if not ranks and not threads:
        return ""
    return f"{ranks} rank{'s' if ranks != 1 else ''} × {threads} thread{'s' if threads != 1 else ''}"


def tail_lines(text, n=6):
    lines = (text or "").rstrip().splitlines()
    return "\n".join(lines[-n:])
