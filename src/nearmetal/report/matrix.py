"""The first screen of every report: a summary of two to four sentences and the verdict
matrix, variants (rows) x benchmarks (columns), each cell one answer of
analysis['answers']['by_benchmark'] (analysis/answers.py): its cost ratio, interval, verdict
and whether runs on a busy machine went into it.

Rendering only: every number comes from the analysis as it is; this module counts verdicts
and formats. The terminal's column groups (split_columns) keep the matrix within 100
columns however many benchmarks a study has.
"""

from . import formatting as F
from ..analysis.labels import fmt_ratio, fmt_ratios  # noqa: F401  (one way to write ratios, the sentences' too)

# the verdicts as the reports say them ('inconclusive' in the analysis reads 'undecided')
WORDS = {"equivalent": "equivalent", "slower": "slower", "faster": "faster", "inconclusive": "undecided"}
# one character each, so that the matrix reads without colour too
MARKS = {"equivalent": "≈", "slower": "▲", "faster": "▼", "inconclusive": "?"}
DISTURBED = "⚠"
TERMINAL_WIDTH = 100


def _cell(e, level_txt):
    verdict = e.get("verdict") if e.get("verdict") in WORDS else "inconclusive"
    lo, hi, r = e.get("ci_low"), e.get("ci_high"), e.get("cost_ratio")
    disturbed = e.get("disturbed") or 0
    r_txt, lo_txt, hi_txt = fmt_ratios(r, lo, hi)
    interval = f"{lo_txt}–{hi_txt}" if F.is_num(lo) and F.is_num(hi) else "no interval"
    own = e.get("ci_level")  # an answer decided at a final look of its own level says that one
    level_txt = f"{own * 100:.4g}%" if F.is_num(own) and 0 < own < 1 else level_txt
    title = f"{WORDS[verdict]}: cost ratio {r_txt}, {level_txt} interval {interval}"
    n = e.get("n_points")
    if n is not None:
        title += f"; {n} point{'s' * (n != 1)}, {e.get('n_blocks')} blocks"
    if disturbed:
        title += f"; {disturbed} of its values from runs on a busy machine"
    return {"verdict": verdict, "word": WORDS[verdict], "mark": MARKS[verdict], "ratio": r, "lo": lo, "hi": hi,
            "ratio_txt": r_txt, "interval_txt": f"[{interval}]" if F.is_num(lo) and F.is_num(hi) else "",
            "disturbed": disturbed, "text": e.get("text") or "", "title": title}


def build(analysis):
    """The matrix and its summary from analysis['answers'], or None when the analysis has no
    answer per benchmark: {"cols": [benchmark label], "rows": [{"variant", "name", "cells":
    [cell or None]}], "summary": [sentence], "legend": str, "level": "95%", "margin": "±3%"}.
    A cell: {"verdict" (an analysis verdict), "word", "mark", "ratio", "lo", "hi", "ratio_txt",
    "interval_txt", "disturbed", "text", "title"}."""
    a = analysis.get("answers")
    if not isinstance(a, dict):
        return None
    entries = [e for e in a.get("by_benchmark") or [] if isinstance(e, dict)]
    # one cell per variant x benchmark: its primary quantity (the others follow in the detail)
    entries = [e for e in entries if e.get("primary", True)]
    if not entries:
        return None
    level, margin = a.get("ci_level"), a.get("margin")
    level_txt = f"{level * 100:.4g}%" if F.is_num(level) else "95%"
    level_words = a.get("level_words") or f"{level_txt} interval"
    margin_txt = f"±{margin * 100:g}%" if F.is_num(margin) else "the margin"
    names = {v.get("variant"): v.get("name") or v.get("variant") for v in a.get("by_variant") or []
             if isinstance(v, dict)}
    cols, order = [], []
    for e in entries:
        if e.get("label") not in cols:
            cols.append(e.get("label"))
        if e.get("variant") not in order:
            order.append(e.get("variant"))
    index = {(e.get("variant"), e.get("label")): _cell(e, level_txt) for e in entries}
    rows = [{"variant": vid, "name": str(names.get(vid) or vid),
             "cells": [index.get((vid, c)) for c in cols]} for vid in order]
    return {"cols": [str(c) for c in cols], "rows": rows, "level": level_txt, "margin": margin_txt,
            "summary": _summary(rows, cols, margin_txt, analysis),
            "legend": (f"Each cell: the cost ratio (variant / baseline for times, baseline / variant for rates: "
                       f"> 1 = the variant is slower) of its primary quantity and its {level_words}. ≈ equivalent: the interval "
                       f"lies within {margin_txt}; ▲ slower, ▼ faster: it lies beyond 1 on that side and "
                       f"the rank test confirms it; ? undecided: not decided either way (the detail says why); "
                       f"{DISTURBED}: some of the cell's runs were taken on a busy machine.")}


def _row_verdict(cells):
    verdicts = {c["verdict"] for c in cells if c}
    if "slower" in verdicts:
        return "slower"
    if "faster" in verdicts:
        return "faster"
    return "equivalent" if verdicts == {"equivalent"} else "inconclusive"


def _summary(rows, cols, margin_txt, analysis):
    """Two to four sentences: the variants' verdicts counted; the largest difference (or,
    where none is decided, the equivalent ratio farthest from 1); the undecided cells; the busy
    machine. The second or the third is always there: a cell is decided or undecided."""
    per_variant = [_row_verdict(r["cells"]) for r in rows]
    n = len(rows)
    parts = []
    for verdict, words in (("equivalent", "equivalent on every benchmark"), ("slower", "slower on at least one"),
                           ("faster", "faster on at least one and slower on none"),
                           ("inconclusive", "undecided on at least one and neither slower nor faster on any")):
        k = per_variant.count(verdict)
        if k:
            parts.append(f"{k} {words}")
    what = f"{n} variant{'s' * (n != 1)} × {len(cols)} benchmark{'s' * (len(cols) != 1)}"
    out = [f"{what} compared with {'their' if n != 1 else 'its'} baseline at a margin of {margin_txt}: "
           + "; ".join(parts) + "."]  # ';': a part's own 'and' must not read as the next part
    cells = [(r, c, label) for r in rows for c, label in zip(r["cells"], cols) if c]
    decided = [t for t in cells if t[1]["verdict"] in ("slower", "faster") and F.is_num(t[1]["ratio"])]
    same = [t for t in cells if t[1]["verdict"] == "equivalent" and F.is_num(t[1]["ratio"])]
    if decided:
        r, c, label = max(decided, key=lambda t: abs(_log(t[1]["ratio"])))
        out.append(f"The largest difference: {r['name']} is {c['word']} on {label}, "
                   f"cost ratio {c['ratio_txt']} {c['interval_txt']}.".replace(" .", "."))
    elif same:  # nothing decided beyond the margin: the largest cost an equivalent cell shows
        r, c, label = max(same, key=lambda t: abs(_log(t[1]["ratio"])))
        out.append(f"No cell is decided slower or faster; the equivalent ratio farthest from 1: {r['name']} on {label}, "
                   f"{c['ratio_txt']} {c['interval_txt']}.".replace(" .", "."))
    undecided = sum(1 for _, c, _ in cells if c["verdict"] == "inconclusive")
    if undecided:
        out.append(f"{undecided} of {len(cells)} cell{'s' if len(cells) != 1 else ''} "
                   f"{'is' if undecided == 1 else 'are'} undecided (?): the detail below says why for each.")
    busy = (analysis.get("contention") or {}).get("text")
    if busy and any(c["disturbed"] for _, c, _ in cells):
        out.append(f"{DISTURBED} {busy}")
    return out


def _log(x):
    import math

    return math.log(x) if x > 0 else 0.0


# ---------------------------------------------------------------- terminal layout

def cell_text(c):
    """A cell in the terminal, on one line: its mark, ratio and interval (and ⚠)."""
    if c is None:
        return "—"
    return " ".join(x for x in (c["mark"], c["ratio_txt"], c["interval_txt"], DISTURBED if c["disturbed"] else "")
                    if x)


BREAK_AFTER = "-_./:,"


def wrap_label(text, width):
    """Break a label at spaces into lines of at most width; a word longer than width breaks
    after its last '-', '_', '.', '/', ':' or ',' that fits (benchmark names are often
    hyphenated), else at width. Nothing is added: the pieces joined give the word again."""
    lines, cur = [], ""
    for word in str(text).split():
        while len(word) > width:
            if cur:
                lines.append(cur)
                cur = ""
            cut = max((i + 1 for i, ch in enumerate(word[:width]) if ch in BREAK_AFTER), default=width)
            lines.append(word[:cut])
            word = word[cut:]
        if not cur:
            cur = word
        elif len(cur) + 1 + len(word) <= width:
            cur += " " + word
        else:
            lines.append(cur)
            cur = word
    if cur or not lines:
        lines.append(cur)
    return lines


# a column is as wide as its cells, and as its name up to MAX_COL (a longer name is wrapped)
MAX_COL = 22
MAX_LABEL = 30
GAP = 2


def column_width(matrix, j):
    body = max((len(cell_text(r["cells"][j])) for r in matrix["rows"]), default=1)
    return max(body, min(MAX_COL, len(matrix["cols"][j])))


def label_width(matrix, total=TERMINAL_WIDTH):
    longest = max((len(r["name"]) for r in matrix["rows"]), default=8)
    return max(8, min(longest, MAX_LABEL, total // 3))


def split_columns(matrix, total=TERMINAL_WIDTH):
    """The benchmark columns in groups [[j, ...], ...], in order, each group with the
    variants' label column fitting in `total` characters (GAP between columns)."""
    lw = label_width(matrix, total)
    groups, cur, used = [], [], lw
    for j in range(len(matrix["cols"])):
        w = min(column_width(matrix, j), total - lw - GAP)
        if cur and used + GAP + w > total:
            groups.append(cur)
            cur, used = [], lw
        cur.append(j)
        used += GAP + w
    if cur:
        groups.append(cur)
    return groups


def terminal_lines(matrix, total=TERMINAL_WIDTH):
    """The matrix as lines of at most `total` characters, each a list of (text, verdict or
    None) segments (the caller colours a verdict's segment): per column group a header of
    wrapped benchmark names and a rule, then a line per variant (more where its name wraps)
    that has an answer in any of the group's columns; a blank line between groups. No line
    ends in blanks."""
    lw = label_width(matrix, total)
    out = []
    for g, group in enumerate(split_columns(matrix, total)):
        widths = [min(column_width(matrix, j), total - lw - GAP) for j in group]
        if g:
            out.append([])
        heads = [wrap_label(matrix["cols"][j], w) for j, w in zip(group, widths)]
        height = max(len(h) for h in heads)
        for i in range(height):
            line = [(("variant" if i == height - 1 else "").ljust(lw), None)]
            for h, w in zip(heads, widths):
                at = i - (height - len(h))  # a wrapped name ends on the rule
                line.append((" " * GAP + (h[at] if at >= 0 else "").rjust(w), None))
            out.append(_rstrip(line))
        out.append([("─" * (lw + sum(GAP + w for w in widths)), None)])
        for r in matrix["rows"]:
            if all(r["cells"][j] is None for j in group):
                continue  # nothing measured in these columns: the row would be dashes only
            label = wrap_label(r["name"], lw)
            for i, text in enumerate(label):
                line = [(text.ljust(lw), None)]
                for j, w in zip(group, widths):
                    cell = r["cells"][j]
                    line.append((" " * GAP, None))
                    line.append(((cell_text(cell) if i == 0 else "").rjust(w), cell["verdict"] if cell else None))
                out.append(_rstrip(line))
    return out


def _rstrip(line):
    """A line without the blanks its last cells leave at its end."""
    while line and not line[-1][0].strip():
        line = line[:-1]
    if line:
        line[-1] = (line[-1][0].rstrip(), line[-1][1])
    return line
