"""At each look of an adaptive study: can the margin still be reached within the budget?
(docs/statistics.md, "Before spending the budget").

For every compared point still open, the interval it has after n blocks shrinks about as
1/sqrt(n). To decide, it must come to lie inside the margin (equivalent) or wholly beyond it
(a difference): its half-width h must fall to |m - d|, d = |centre - 1|. So the blocks the
point needs are about N = n (h / |m - d|)^2, and its seconds (N - n) x the time one block of
its two cells takes (their mean run times so far). The budget left is max_time minus the
seconds spent on runs, and max_repetitions blocks.

When no open point can be decided within STOP_FACTOR times what is left — the projection is
rough, so a point projected just past the budget still gets its blocks — the study stops
now and says so in one paragraph: the noise it sees, the blocks it would need, what the
budget allows, and what would help (a quiet machine, fewer variants, a wider margin, more
time). A point whose interval has no width yet (too few values) is never the reason to stop,
nor is a budget nearly spent (what is left would spend under MIN_STAKE_S seconds).
"""

import math

STOP_FACTOR = 2.0
MIN_STAKE_S = 30.0   # a budget left smaller than this is spent, not argued over
FAR = 10   # blocks beyond FAR x max_repetitions: "more time" is no advice


def interval(result):
    """(half-width, distance of the centre from 1) of a point's interval, or None when it has
    no finite one yet."""
    lo, hi = (result or {}).get("ci_low"), (result or {}).get("ci_high")
    if lo is None or hi is None or not (hi > lo > 0) or not math.isfinite(hi):
        return None
    return (hi - lo) / 2, abs((hi + lo) / 2 - 1)


def needed_blocks(result, n, margin):
    """Blocks a point needs to be decided, projected from its interval after n blocks; None
    when it has no interval yet; math.inf when its centre sits on the margin."""
    got = interval(result)
    if got is None or n < 1:
        return None
    half, d = got
    target = abs(margin - d)
    if target < 1e-9:
        return math.inf
    return max(n + 1, math.ceil(n * (half / target) ** 2))


def project(points, cell_seconds, blocks, margin, max_blocks, seconds_left):
    """The projection over the open points [(key, (cell, base cell), result)] after `blocks`
    blocks; cell_seconds: each cell's mean run time. {reachable, open, measured, at_stake_s
    (what the rest of the budget would spend on the open cells: below MIN_STAKE_S the study
    just goes on), half_pct
    (the open points' median interval half-width, %), need_blocks, need_s (all of them),
    one_s (the median point alone), max_blocks, seconds_left, margin_pct (the margin that
    the budget would reach for most of them)}."""
    rows = []
    for _, cells, result in points:
        n = (result or {}).get("look") or blocks
        need = needed_blocks(result, n, margin)
        if need is None:
            continue
        per_block = sum(cell_seconds.get(c, 0.0) for c in cells)
        rows.append((need, n, per_block, result))
    block_s = sum(cell_seconds.get(c, 0.0) for c in {c for _, cells, _ in points for c in cells})
    out = {"open": len(points), "measured": len(rows), "max_blocks": max_blocks, "seconds_left": seconds_left,
           "at_stake_s": min(seconds_left, max(0, max_blocks - blocks) * block_s)}
    if not rows or out["at_stake_s"] < MIN_STAKE_S:  # spending what little is left costs less than stopping
        out["reachable"] = True
        return out
    reach = [need <= STOP_FACTOR * max_blocks and (need - n) * per_block <= STOP_FACTOR * seconds_left
             for need, n, per_block, _ in rows]
    finite = [r for r in rows if math.isfinite(r[0])]
    halves = sorted((r[3]["ci_high"] - r[3]["ci_low"]) / 2 for r in rows)
    need_s = sum((need - n) * per_block for need, n, per_block, _ in finite)
    one = sorted((need - n) * per_block for need, n, per_block, _ in finite)
    affordable = []
    for need, n, per_block, result in rows:  # the blocks the budget allows this point alone
        can = min(max_blocks, n + (seconds_left / per_block if per_block > 0 else max_blocks))
        half = (result["ci_high"] - result["ci_low"]) / 2 * math.sqrt(n / max(can, n))
        centre = (result["ci_high"] + result["ci_low"]) / 2
        affordable.append(abs(centre - 1) + half)
    out.update(reachable=any(reach), half_pct=100 * halves[len(halves) // 2],
               need_blocks=max((r[0] for r in finite), default=math.inf),
               need_s=need_s if finite else math.inf, one_s=one[len(one) // 2] if one else math.inf,
               margin_pct=100 * sorted(affordable)[len(affordable) // 2])
    return out


def _fmt_s(s):
    if not math.isfinite(s):
        return "more than any budget"
    return f"~{s:.0f} s" if s < 36000 else f"~{s / 3600:.0f} hours"


def stop_text(p, cfg, spent, blocks, machine=None):
    """The one paragraph a stopped study says and keeps: the reason and what would help."""
    study = cfg.study
    busy = f"{machine}; " if machine else ""
    need_n, far = p["need_blocks"], FAR * max(study.max_repetitions, blocks)
    if not math.isfinite(need_n):
        need = "more blocks than any budget (an interval centred on the margin)"
    elif need_n > far:
        need = f"more than {far} blocks"
    else:
        need = f"~{need_n} blocks"
    advice = [f"wait for a quiet machine with quiet = true (it waits at most quiet_wait = {study.quiet_wait:g} s "
              f"before each run)" if not study.quiet else "run it when the machine is quiet (--resume)",
              f"use fewer variants (one comparison alone needs {_fmt_s(p['one_s'])} of runs)",
              f"widen the margin to ±{math.ceil(p['margin_pct']):.0f}%"]
    if need_n <= far:  # more time helps only where the blocks needed are within reach
        advice.append(f"raise max_time to {math.ceil((spent + p['need_s']) / 60) * 60:.0f} s"
                      + (f" and max_repetitions to {need_n}" if need_n > study.max_repetitions else ""))
    else:
        advice.append("more time would not do it at this noise")
    comparisons = f"{p['open']} comparison{'s' if p['open'] != 1 else ''}"
    return (f"Stopped after {blocks} blocks ({spent:.0f} s of runs): {busy}with this noise (intervals ±"
            f"{p['half_pct']:.0f}% wide after {blocks} blocks) the ±{study.margin * 100:g}% margin needs {need} "
            f"for the {comparisons} still open, {_fmt_s(p['need_s'])} of runs; the budget allows "
            f"{p['max_blocks']} blocks and {p['seconds_left']:.0f} s more. What would help: " + "; ".join(advice) + ".")
