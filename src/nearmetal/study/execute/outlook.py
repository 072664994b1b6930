"""At a look where an adaptive study goes on: can most of its open points still be decided
within the budget? (docs/statistics.md, "Before spending the budget": the outlook).

budget_check.py stops a study when *no* open point can reach the margin; a study whose noise
puts most of its points out of reach while a few remain decidable would otherwise spend its
whole budget without a word. Each open point is projected as the study's final look will
judge it — a difference shown (the interval excluding 1) is decided whatever its size — and
all open cells share what is left of the budget. When at least half of them (and at least
OUTLOOK_MIN) are out of reach, the runner says so once and keeps it with the study.
"""

import functools
import math

from .budget_check import interval

OUTLOOK_SHARE = 0.5   # said when at least half of the open points (with an interval) are out of reach
OUTLOOK_MIN = 3       # ... and at least this many: one hard point among easy ones is no news
MOST = 0.9            # the share the advice is for: the blocks, and the margin, 90% of them need
CAP = 100_000         # blocks: beyond this a point is out of any budget's reach


@functools.lru_cache(maxsize=4096)
def half_width(n, tail):
    """The paired interval's half-width after n blocks, in units of the log ratios' winsorized
    standard deviation (analysis/trimmed.py: the 20% trimmed mean's Yuen interval,
    t(h - 1) sqrt((n - 1) / (h (h - 1))) with h values kept); its level has `tail` on each side."""
    from scipy.stats import t

    from ...analysis.trimmed import TRIM

    h = n - 2 * int(TRIM * n)
    if h < 2:
        return math.inf
    return float(t.ppf(1 - tail, h - 1)) * math.sqrt((n - 1) / (h * (h - 1)))


def final_needed_blocks(result, n, margin, final_tail=None):
    """Blocks a point needs to be decided at the study's final look, where a difference shown
    is decided whatever its size: its half-width must fall below max(d, m - d) (d = |centre -
    1|), never more than to m / 2. The half-width after n blocks, at its look's level (the
    result's alpha, one tail), becomes half_width(N, final_tail) / half_width(n, alpha) of
    itself after N. None without a (finite) interval; math.inf beyond CAP blocks."""
    got = interval(result)
    if got is None or n < 2:
        return None
    half, d = got
    tail = result.get("alpha") or final_tail or 0.025
    final_tail = final_tail or tail
    now = half_width(n, tail)
    if not math.isfinite(now):
        return None
    target = max(d, margin - d) / half * now

    def enough(blocks):
        return half_width(blocks, final_tail) < target

    low, high = n, n + 1
    while not enough(high):  # doubling, then bisection (the half-width falls with the blocks)
        if high >= CAP:
            return math.inf
        low, high = high, min(CAP, 2 * high)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if not enough(mid) else (low, mid)
    return high


def affordable(points, cell_seconds, blocks, max_blocks, seconds_left):
    """(A, seconds of one block of every open cell): the blocks the budget gives every open
    cell, as they share it — blocks + seconds left / one block of them all, at most
    max_blocks; A None where no open cell has a run time yet."""
    block_s = sum(cell_seconds.get(c, 0.0) for c in {c for _, cells, _ in points for c in cells})
    if block_s <= 0:
        return None, block_s
    return min(max_blocks, blocks + int(seconds_left // block_s)), block_s


def outlook(points, blocks, margin, afford, block_s, final_tail=None):
    """points: the open ones [(key, (cell, base cell), decide()'s result)]; afford, block_s:
    affordable()'s. The blocks each point needs (final_needed_blocks, at the final look's
    level final_tail) against A. None when fewer than OUTLOOK_SHARE of the points with an
    interval (or fewer than OUTLOOK_MIN) need more than A: nothing to say. Else {out,
    measured, afford, need_most (the blocks MOST of them need), need_most_s, half_pct (their
    median interval half-width, %), margin_pct (the margin MOST of them would be decided at in
    A blocks)}."""
    rows = []
    for _, _, result in points:
        n = (result or {}).get("look") or blocks
        need = final_needed_blocks(result, n, margin, final_tail)
        if need is not None:
            rows.append((need, n, result, *interval(result)))
    if afford is None or not rows:
        return None
    out = sum(1 for need, *_ in rows if need > afford)
    if out < OUTLOOK_MIN or out < OUTLOOK_SHARE * len(rows):
        return None
    need_most = sorted(need for need, *_ in rows)[math.ceil(MOST * len(rows)) - 1]
    reach = []  # the margin each point would be decided at after A blocks (0: a difference shown)
    for _, n, r, half, d in rows:
        tail = r.get("alpha") or final_tail or 0.025
        later = half * half_width(max(afford, n), final_tail or tail) / half_width(n, tail)
        reach.append(0.0 if later < d else d + later)
    reach.sort()
    return {"out": out, "measured": len(rows), "afford": afford, "need_most": need_most,
            "need_most_s": (need_most - blocks) * block_s,
            "half_pct": 100 * sorted(half for *_, half, _ in rows)[len(rows) // 2],
            "margin_pct": float(100 * reach[math.ceil(MOST * len(reach)) - 1])}


def outlook_text(o, cfg, spent, blocks):
    """The paragraph said at once and kept with the study (the reports print it after the
    study ended too, so it reads as of the look that said it): what to expect, what would help."""
    study = cfg.study
    far = 10 * max(study.max_repetitions, blocks)
    advice = [f"quiet = true (it waits at most quiet_wait = {study.quiet_wait:g} s for a quiet machine before each "
              f"run)" if not study.quiet else "a quieter machine",
              "fewer variants or benchmarks (each look's blocks then come faster)"]
    if math.isfinite(o["margin_pct"]) and study.margin * 100 < math.ceil(o["margin_pct"]) < 100:
        advice.append(f"a margin of ±{math.ceil(o['margin_pct']):.0f}%")
    if o["need_most"] <= far:
        advice.append(f"max_time = {math.ceil((spent + o['need_most_s']) / 60) * 60:.0f}"
                      + (f" and max_repetitions = {o['need_most']}" if o["need_most"] > study.max_repetitions else ""))
    need = f"~{o['need_most']} blocks" if o["need_most"] <= far else f"more than {far} blocks"
    return (f"After {blocks} blocks ({spent:.0f} s of runs), {o['out']} of the {o['measured']} points still open "
            f"then cannot be decided at the ±{study.margin * 100:g}% margin within the budget, at this noise (intervals "
            f"±{o['half_pct']:.0f}% wide; 90% of the open ones need {need}; the budget allows about {o['afford']} "
            f"for every open cell): expect them undecided. What would help, in a new study: "
            + "; ".join(advice) + ".")
