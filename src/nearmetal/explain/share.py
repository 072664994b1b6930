"""The share of a gap an ablation recovers, with its interval.

For each compared point (a metric at one point of a benchmark the slow variant was slower on)
and each block in which the slow variant S, its baseline B and the ablation A all ran (the
explain stage's blocks: the three side by side, in random order), on the log scale with the
cost's sign (higher-is-better metrics negated):
    gap_b = cost(S_b) - cost(B_b),   recovered_b = cost(S_b) - cost(A_b)
share = mean over points of mean over blocks of recovered / the same mean of gap: 1 is the
whole gap recovered (the ablation as fast as the baseline), 0 nothing, above 1 faster than
the baseline. Its interval: the percentile interval of a paired bootstrap over blocks (one
draw of block indices per replicate, shared by every point, as answers.py), each replicate's
share the same ratio of means. A ratio of means, not a mean of ratios: a block whose gap is
near zero does not blow it up. No share where the gap is not positive in the blocks used.
The ablation is also compared with each side: its geometric-mean cost ratio against the
baseline (1: as fast) and against the slow variant (below 1: faster), with the same bootstrap."""

import math

import numpy as np

N_BOOT = 2000
SEED = 0


def _cost(x, hib):
    c = np.log(np.asarray(x, float))
    return -c if hib else c


def recovered_share(points, alpha=0.05, n_boot=N_BOOT, seed=SEED):
    """points: [{"slow": {block: v}, "base": {block: v}, "ablation": {block: v}, "hib": bool}].
    Returns {"share", "low", "high", "n_blocks", "n_points"}; share None when no point has two
    blocks of all three, or the gap is not positive."""
    rows = []
    blocks = sorted({b for p in points for b in p["slow"] if b in p["base"] and b in p["ablation"]}, key=repr)
    col = {b: i for i, b in enumerate(blocks)}
    for p in points:
        common = [b for b in p["slow"] if b in p["base"] and b in p["ablation"]]
        vals = [p["slow"][b] for b in common] + [p["base"][b] for b in common] + [p["ablation"][b] for b in common]
        if len(common) < 2 or not all(isinstance(v, (int, float)) and v > 0 for v in vals):
            continue
        s, b, a = (_cost([p[k][c] for c in common], p.get("hib", False)) for k in ("slow", "base", "ablation"))
        gap, rec = np.full(len(blocks), np.nan), np.full(len(blocks), np.nan)
        idx = [col[c] for c in common]
        gap[idx], rec[idx] = s - b, s - a
        rows.append((gap, rec))
    out = {"share": None, "low": None, "high": None, "n_blocks": len(blocks), "n_points": len(rows),
           "vs_baseline": None, "vs_slow": None}
    if not rows:
        return out
    gap = np.vstack([r[0] for r in rows])
    rec = np.vstack([r[1] for r in rows])

    def ratio(g, r):
        with np.errstate(invalid="ignore", divide="ignore"):
            mg = np.nanmean(np.nanmean(g, axis=-1), axis=-1)
            mr = np.nanmean(np.nanmean(r, axis=-1), axis=-1)
            return np.where(mg > 0, mr / mg, np.nan)

    rng = np.random.default_rng(seed)
    draw = rng.integers(0, len(blocks), size=(n_boot, len(blocks)))

    def cost_ratio(d):  # the ablation's geometric-mean cost ratio against a side, with its interval
        mean = lambda x: np.nanmean(np.nanmean(x, axis=-1), axis=-1)  # noqa: E731
        reps = mean(np.transpose(d[:, draw], (1, 0, 2)))
        lo, hi = np.quantile(reps[np.isfinite(reps)], (alpha / 2, 1 - alpha / 2)) if len(blocks) >= 2 else (None, None)
        return {"ratio": float(math.exp(mean(d))), "low": None if lo is None else float(math.exp(lo)),
                "high": None if hi is None else float(math.exp(hi))}

    out["vs_baseline"], out["vs_slow"] = cost_ratio(gap - rec), cost_ratio(-rec)  # A - B, A - S
    est = float(ratio(gap, rec))
    if not math.isfinite(est):
        return out
    reps = ratio(np.transpose(gap[:, draw], (1, 0, 2)), np.transpose(rec[:, draw], (1, 0, 2)))
    reps = reps[np.isfinite(reps)]
    out["share"] = est
    if reps.size >= n_boot // 2 and len(blocks) >= 2:
        out["low"], out["high"] = (float(x) for x in np.quantile(reps, (alpha / 2, 1 - alpha / 2)))
    return out
