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


def needed_blocks(result, n, margin):
    """Blocks a point needs to be decided, projected from its interval after n blocks; None
    when it has no interval yet; math.inf when its centre sits on the margin."""
    lo, hi = (result or {}).get("ci_low"), (result or {}).get("ci_high")
    if lo is None or hi is None or not (hi > lo > 0) or n < 1:
        return None
    half, centre = (hi - lo) / 2, (hi + lo) / 2
    target = abs(margin - abs(centre - 1))
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


# -- the outlook: a study that goes on, though most of its open points cannot be decided ---------
OUTLOOK_SHARE = 0.5   # said when at least half of the open points are out of the budget's reach
OUTLOOK_MIN = 3       # ... and at least this many: one hard point among easy ones is no news
MOST = 0.9            # "most of them": the share the widened margin or the longer budget would decide


def final_needed_blocks(result, n, margin, final_tail=None):
    """Blocks a point needs to be decided at the study's final look, where a difference shown
    (the interval excluding 1) is decided whatever its size: the half-width must fall below
    max(d, m - d) (d = |centre - 1|), so never more than to m / 2. The half-width shrinks as
    1/sqrt(blocks) and as the t quantile of its look's level (the result's alpha, one tail)
    becomes that of the final look's (final_tail; None: the same level). None without an interval."""
    from scipy.stats import t

    lo, hi = (result or {}).get("ci_low"), (result or {}).get("ci_high")
    if lo is None or hi is None or not (hi > lo > 0) or n < 2:
        return None
    half, d = (hi - lo) / 2, abs((hi + lo) / 2 - 1)
    tail = (result or {}).get("alpha") or final_tail or 0.025
    final_tail = final_tail or tail
    scale = half / t.ppf(1 - tail, n - 1) / max(d, margin - d)  # blocks needed = n (scale x quantile)^2
    need = n * (scale * t.ppf(1 - final_tail, 10 ** 6)) ** 2
    need = n * (scale * t.ppf(1 - final_tail, max(need, n + 1) - 1)) ** 2  # the quantile at about those blocks
    return max(n + 1, math.ceil(need)) if math.isfinite(need) else math.inf


def outlook(points, cell_seconds, blocks, margin, max_blocks, seconds_left, final_tail=None):
    """Where some open points can be decided but most cannot: the blocks the budget gives
    every open cell (all of them share it: A = blocks + seconds left / one block of all open
    cells, at most max_blocks) against the blocks each point needs to be decided by the final
    look (final_needed_blocks). Returns None when that is not the case (nothing to say), else
    {out, measured, afford, need_most (the blocks MOST of them need), need_most_s, half_pct,
    margin_pct (the margin MOST of them would reach in A blocks)}."""
    rows = []
    for _, cells, result in points:
        n = (result or {}).get("look") or blocks
        need = final_needed_blocks(result, n, margin, final_tail)
        if need is not None:
            rows.append((need, n, result))
    block_s = sum(cell_seconds.get(c, 0.0) for c in {c for _, cells, _ in points for c in cells})
    if not rows or block_s <= 0:
        return None
    afford = min(max_blocks, blocks + int(seconds_left // block_s))
    out = sum(1 for need, _, _ in rows if need > afford)
    if out < OUTLOOK_MIN or out < OUTLOOK_SHARE * len(rows):
        return None
    needs = sorted(need for need, _, _ in rows)
    need_most = needs[min(len(needs) - 1, math.ceil(MOST * len(needs)) - 1)]
    reach = []  # the margin each point's interval would lie within after A blocks (0: a difference shown)
    for _, n, r in rows:
        d = abs((r["ci_high"] + r["ci_low"]) / 2 - 1)
        half = (r["ci_high"] - r["ci_low"]) / 2 * math.sqrt(n / max(afford, n)) * _quantile_ratio(r, n, afford, final_tail)
        reach.append(0.0 if half < d else d + half)
    reach.sort()
    halves = sorted((r["ci_high"] - r["ci_low"]) / 2 for _, _, r in rows)
    return {"out": out, "measured": len(rows), "afford": afford, "need_most": need_most,
            "need_most_s": (need_most - blocks) * block_s,
            "half_pct": 100 * halves[len(halves) // 2],
            "margin_pct": float(100 * reach[min(len(reach) - 1, math.ceil(MOST * len(reach)) - 1)])}


def outlook_text(o, cfg, spent, blocks):
    """The one paragraph said at once (and kept) when most open points are out of reach: the
    study goes on for the others; this says what to expect and what would help."""
    study = cfg.study
    far = FAR * max(study.max_repetitions, blocks)
    advice = [f"wait for a quiet machine with quiet = true (it waits at most quiet_wait = {study.quiet_wait:g} s "
              f"before each run)" if not study.quiet else "run it when the machine is quiet",
              "use fewer variants or benchmarks (the blocks then come faster)",
              f"widen the margin to ±{math.ceil(o['margin_pct']):.0f}%"]
    if o["need_most"] <= far:
        advice.append(f"raise max_time to {math.ceil((spent + o['need_most_s']) / 60) * 60:.0f} s"
                      + (f" and max_repetitions to {o['need_most']}" if o["need_most"] > study.max_repetitions
                         else ""))
    need = f"~{o['need_most']} blocks" if o["need_most"] <= far else f"more than {far} blocks"
    return (f"After {blocks} blocks ({spent:.0f} s of runs), {o['out']} of the {o['measured']} comparisons still "
            f"open cannot reach the ±{study.margin * 100:g}% margin within the budget at this noise (intervals "
            f"±{o['half_pct']:.0f}% wide): most of them need {need}, the budget allows about {o['afford']} for every "
            f"open cell. Expect them undecided; the study goes on within its budget. What would help: "
            + "; ".join(advice) + ".")


def _quantile_ratio(result, n, blocks, final_tail):
    """How much narrower an interval becomes from its look's t quantile to the final look's."""
    from scipy.stats import t

    tail = result.get("alpha") or final_tail or 0.025
    return t.ppf(1 - (final_tail or tail), max(blocks, n) - 1) / t.ppf(1 - tail, n - 1)
