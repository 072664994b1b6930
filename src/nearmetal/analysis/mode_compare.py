"""Compare a variant with its baseline where launches fall into modes (modes.py).

Comparing launch by launch mixes the states: a block whose baseline launch was fast and whose
variant launch was slow reads "x3.6". What can be compared is (1) where each mode lies and
(2) how often launches land in the slow modes. decide_look() does both, at one look of the
sequential procedure (sequential.decide), and returns stats.compare's dict, settled:

- the location: within each mode (the modes found on both groups pooled, so both are cut at
  the same bounds), the difference of the log values' trimmed means with Yuen's variance;
  the modes' differences weighted by their share of all launches, the variances summed and
  the degrees of freedom by Welch-Satterthwaite (stratified()): a post-stratified comparison,
  each launch set against the others of its own state. Each mode's own ratio and interval is
  shown beside. The launches rescaled to the best mode (adjust()) give the noise within the
  modes and what answers.py aggregates over points.
- the share of launches outside the best mode: its difference, with Newcombe's hybrid score
  interval (Newcombe 1998, Stat Med 17:873, method 10), and what that difference does to the
  mean cost (1 + p (R - 1) for a slow mode R times the fast one).

Verdict: equivalent when the location's 1 - 2 alpha interval lies within the margin and the
share's 95% interval holds 0 (no difference in how often launches are slow); slower/faster
when the location (its t test p < alpha/2, interval beyond the margin) or the share (its 1 -
alpha/2 interval excludes 0 and its effect on the mean cost lies beyond the margin) shows it —
alpha split in two halves (Bonferroni), so a point's false slower/faster stays below alpha;
otherwise open. At the study's final look a difference shown is decided without the margin
(the location's interval excludes 1, or the share's excludes 0). docs/statistics.md,
"Launches that fall into modes", has the calibration.
"""

import math

import numpy as np

from . import stats
from .modes import MIN_GROUP, assign, describe, detect
from .trimmed import TRIM

SHARE_GATE_ALPHA = 0.05  # equivalence needs the share's 95% interval to hold 0


def _z(alpha):
    from scipy.special import ndtri

    return float(ndtri(1 - alpha / 2))


def _wilson(k, n, z):
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def share_difference(k_base, n_base, k_var, n_var, alpha):
    """(p_var - p_base, low, high): Newcombe's hybrid score interval at 1 - alpha."""
    z = _z(alpha)
    pb, pv = k_base / n_base, k_var / n_var
    lb, ub = _wilson(k_base, n_base, z)
    lv, uv = _wilson(k_var, n_var, z)
    d = pv - pb
    return d, d - math.sqrt((pv - lv) ** 2 + (ub - pb) ** 2), d + math.sqrt((uv - pv) ** 2 + (pb - lb) ** 2)


def _trimmed(x):
    s = np.sort(x)
    n = s.size
    g = int(TRIM * n)
    h = n - 2 * g
    w = np.clip(s, s[g], s[n - g - 1])
    d = (n - 1) * float(np.var(w, ddof=1)) / (h * (h - 1))
    return float(s[g:n - g].mean()), d, h


def yuen(base_logs, var_logs, alpha):
    """(difference of trimmed means, low, high) of two groups of log values: Yuen's (1974)
    two-sample interval at 1 - alpha, Welch's degrees of freedom; None under 2 values a group."""
    from scipy.special import stdtrit

    if len(base_logs) < 2 or len(var_logs) < 2:
        return None
    mb, db, hb = _trimmed(np.asarray(base_logs, float))
    mv, dv, hv = _trimmed(np.asarray(var_logs, float))
    est = mv - mb
    if db + dv == 0:
        return est, est, est
    df = (db + dv) ** 2 / (db * db / (hb - 1) + dv * dv / (hv - 1))
    q = float(stdtrit(df, 1 - alpha / 2)) * math.sqrt(db + dv)
    return est, est - q, est + q


def stratified(baseline, variant, ib, iv, k, alpha):
    """(estimate, low, high, p, df) of the log ratio variant/baseline within modes: each mode's
    difference of trimmed means (Yuen), weighted by the mode's share of all launches, the
    variance summed and its degrees of freedom by Welch-Satterthwaite; modes with fewer than 2
    launches of a group are left out. None when no mode has 2 of each."""
    from scipy.special import stdtr, stdtrit

    lb, lv = np.log(np.asarray(baseline, float)), np.log(np.asarray(variant, float))
    parts = []
    for j in range(k):
        b, v = lb[ib == j], lv[iv == j]
        if b.size >= 2 and v.size >= 2:
            mb, db, hb = _trimmed(b)
            mv, dv, hv = _trimmed(v)
            parts.append((b.size + v.size, mv - mb, db, dv, hb, hv))
    if not parts:
        return None
    total = sum(x[0] for x in parts)
    est = sum(w / total * e for w, e, *_ in parts)
    terms = [((w / total) ** 2 * db, hb - 1) for w, _, db, _, hb, _ in parts] + \
            [((w / total) ** 2 * dv, hv - 1) for w, _, _, dv, _, hv in parts]
    var = sum(t for t, _ in terms)
    if var == 0:
        return est, est, est, (1.0 if est == 0 else 0.0), math.inf
    df = var * var / sum(t * t / f for t, f in terms if t > 0)
    se = math.sqrt(var)
    q = float(stdtrit(df, 1 - alpha / 2)) * se
    p = float(2 * stdtr(df, -abs(est) / se))
    return est, est - q, est + q, p, df


def adjust(values, modes, higher_is_better=False):
    """The values rescaled to the best mode: each divided by its own mode's location and
    multiplied by the best mode's (the lowest for times, the highest for rates)."""
    loc = np.asarray(modes["locations"], float)
    best = loc[-1] if higher_is_better else loc[0]
    v = np.asarray(values, float)
    return v * (best / loc[assign(v, modes)])


def _share_cost(p_base, delta, ratio):
    """The mean cost with share p_base + delta of launches in a mode `ratio` times as costly,
    relative to the cost at p_base."""
    return (1 + (p_base + delta) * (ratio - 1)) / (1 + p_base * (ratio - 1))


def decide_look(baseline, variant, pairs, *, alpha, margin, higher_is_better, n_boot=2000, unit="", final=False):
    """One look's mode-aware comparison, or None when the pooled values form one group.
    alpha: the level of this look (sequential: Pocock's alpha' per look, study/plan/sequential.py).
    final: the study's final look, where a difference shown is decided even if it may lie
    within the margin (no block can come to bound it).
    baseline, variant: all values of each group; pairs: (baseline, variant) of each block that
    measured both."""
    if not baseline or not variant:
        return None
    modes = detect(list(baseline) + list(variant))
    if modes is None:
        return None
    # Modes are states that launches of both groups fall into. Groups that each sit in modes
    # of their own are a difference between them (a 1.7x slower start-up), not modes.
    ib, iv = assign(baseline, modes), assign(variant, modes)
    k = len(modes["locations"])
    if not any(np.sum(ib == j) >= MIN_GROUP and np.sum(iv == j) >= MIN_GROUP for j in range(k)):
        return None
    hib = bool(higher_is_better)
    adj_pairs = None
    if pairs is not None and len(pairs) >= 2:
        pa = np.asarray(pairs, float)
        adj_pairs = list(zip(adjust(pa[:, 0], modes, hib).tolist(), adjust(pa[:, 1], modes, hib).tolist()))
    c = stats.compare(adjust(baseline, modes, hib).tolist(), adjust(variant, modes, hib).tolist(),
                      higher_is_better=hib, margin=margin, pairs=adj_pairs, n_boot=n_boot, alpha=min(0.5, 2 * alpha))
    strat = stratified(baseline, variant, ib, iv, len(modes["locations"]), min(0.5, 2 * alpha))
    c["verdict"] = "inconclusive"
    if strat is None:
        c.update(ci_low=None, ci_high=None, p_value=None, test=None)
    else:
        c.update(ratio=math.exp(strat[0]), ci_low=math.exp(strat[1]), ci_high=math.exp(strat[2]),
                 p_value=strat[3], test="yuen by mode", paired=False)  # within modes, not block by block
        inside = 1 - margin <= c["ci_low"] and c["ci_high"] <= 1 + margin
        if inside and min(len(baseline), len(variant)) >= stats.MIN_N_EQUIVALENT:
            c["verdict"] = "equivalent"
    stats.with_overhead(c, hib)
    lo, hi, p = c["ci_low"], c["ci_high"], c["p_value"]

    # the share of launches outside the best mode, and what it does to the mean cost
    best = len(modes["locations"]) - 1 if hib else 0
    kb, nb, kv, nv = int(np.sum(ib != best)), len(ib), int(np.sum(iv != best)), len(iv)
    locs = np.asarray(modes["locations"], float)
    pooled = np.concatenate([ib, iv])
    worse = pooled[pooled != best]
    worst_loc = float(np.exp(np.mean(np.log(locs[worse])))) if worse.size else locs[best]
    cost_ratio = (locs[best] / worst_loc) if hib else (worst_loc / locs[best])  # > 1: slow modes cost more
    d, s_lo, s_hi = share_difference(kb, nb, kv, nv, alpha / 2)
    _, g_lo, g_hi = share_difference(kb, nb, kv, nv, SHARE_GATE_ALPHA)
    share_shown = s_lo > 0 or s_hi < 0
    share_effect = None
    if share_shown:
        share_effect = _share_cost(kb / nb, s_lo if s_lo > 0 else s_hi, cost_ratio)

    verdict, by = "inconclusive", None
    beyond = lo is not None and (lo > 1 + margin or hi < 1 - margin)
    if c["verdict"] == "equivalent" and g_lo <= 0 <= g_hi:
        verdict, by = "equivalent", "location and share"
    elif lo is not None and p is not None and p < alpha / 2 and (beyond or final and (lo > 1 or hi < 1)):
        verdict, by = ("faster" if (lo > 1) == hib else "slower"), "location"
    elif share_effect is not None and (share_effect > 1 + margin or share_effect < 1 - margin or
                                       final and share_effect != 1):
        verdict, by = ("slower" if share_effect > 1 else "faster"), "share"

    per_mode = []
    for j, loc in enumerate(modes["locations"]):
        b = np.log(np.asarray(baseline, float)[ib == j])
        v = np.log(np.asarray(variant, float)[iv == j])
        y = yuen(b, v, min(0.5, 2 * alpha))
        per_mode.append({"location": loc, "n_baseline": int(b.size), "n_variant": int(v.size),
                         "baseline": float(np.exp(np.median(b))) if b.size else None,
                         "variant": float(np.exp(np.median(v))) if v.size else None,
                         "ratio": math.exp(y[0]) if y else None, "ci_low": math.exp(y[1]) if y else None,
                         "ci_high": math.exp(y[2]) if y else None})
    c["verdict"] = verdict
    c["modes"] = {
        "method": "post-stratified by mode", "detected": modes, "per_mode": per_mode,
        "share": {"baseline": kb / nb, "variant": kv / nv, "difference": d, "ci_low": s_lo, "ci_high": s_hi,
                  "ci_level": 1 - alpha / 2, "gate_ci": [g_lo, g_hi], "gate_level": 1 - SHARE_GATE_ALPHA,
                  "slow_cost_ratio": float(cost_ratio), "mean_cost_effect": share_effect,
                  "differs": not g_lo <= 0 <= g_hi},
        "decided_by": by,
        "text": describe(modes, unit, kv / nv) + f" (baseline {kb / nb * 100:.0f}% slow)",
    }
    return c


def for_answer(base, var, result, higher_is_better=False, alpha=0.05):
    """What an answer needs of a point compared by mode (result: its comparison's "modes"),
    over all the point's block pairs (base, var: the values of each pair), not only those of
    the deciding look: (base, var) rescaled to the best mode, and {"detected", "share_baseline",
    "share_variant", "share_differs" (the share's 95% interval excludes 0), "interval"
    (stratified() at 1 - alpha: an answer of this one point takes it)}."""
    hib = bool(higher_is_better)
    m = detect(np.concatenate([np.asarray(base, float), np.asarray(var, float)])) or result["detected"]
    best = len(m["locations"]) - 1 if hib else 0
    kb, kv = int(np.sum(assign(base, m) != best)), int(np.sum(assign(var, m) != best))
    _, lo, hi = share_difference(kb, len(base), kv, len(var), SHARE_GATE_ALPHA)
    info = {"detected": m, "share_baseline": kb / len(base), "share_variant": kv / len(var),
            "share_differs": not lo <= 0 <= hi,  # over all pairs, as the answer's interval
            "interval": stratified(base, var, assign(base, m), assign(var, m), len(m["locations"]), alpha)}
    return adjust(base, m, hib), adjust(var, m, hib), info


def answer_words(point, info, unit="", baseline_words="in the baseline"):
    """The plain sentence an answer adds for a benchmark whose launches fall into modes:
    'at 8 B launches fall into two groups: 0.18 and 0.69 us, 39% slow against 33% natively'."""
    from .labels import point_label

    label = point_label(point) if point else ""
    text = (describe(info["detected"], unit, info["share_variant"])
            + f" against {info['share_baseline'] * 100:.0f}% {baseline_words}")
    return (f"at {label} " if label and label != "—" else "") + text
