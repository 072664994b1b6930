"""Noise with structure: do a cell's per-launch values fall into groups (modes)?

On a small shared machine one launch of a benchmark may run in a fast state and the next in
a slow one (two ranks sharing a core, or not): 8-byte latency at 0.18 us in 11 launches and
0.69 us in 7. Such a cell's spread is not noise around one value, and comparing it run by run
with another cell mixes the states. detect() finds the groups; mode_compare.py compares what
can be compared (each group's location, the share of launches in the slow ones).

The statistic (docs/statistics.md, "Launches that fall into modes"): on the log values, the
best split into three groups and into two (1-D k-means, exact: every cut of the sorted values
is tried, by prefix sums), kept when neighbouring groups are well separated by Ashman's D
(Ashman, Bird & Zepf 1994, AJ 108:2348; D = |m1 - m2| / s, with s the pooled within-group
standard deviation, so a group of tied values keeps D finite), lie at least MIN_RATIO apart,
and the smallest holds at least MIN_SHARE of the launches (and MIN_GROUP): three groups where
all three pass, else two, else none.
"""

import math

import numpy as np

# Ashman's D > 2 separates two normal components cleanly; the best split of a single normal
# sample already scores ~2.7 (its halves lie 1.6 sd apart, 0.6 sd wide), heavier tails more.
# D >= 6 and 1.5x apart keep launches off the wrong side of a bound when a variant is shifted
# by a margin: with 4 and 1.3x, a variant exactly at a 10% margin was called equivalent in 8%
# of simulated points (its launches crossed a bound into the wrong mode); with these, 2.3%
# (bench/modes_simulation.py, "at margin"; docs/statistics.md).
MIN_SEPARATION = 6.0
MIN_RATIO = 1.5        # groups at least 50% apart: far beyond any margin a study tests
MIN_SHARE = 0.10       # a smaller group is a few slow launches, which the trimmed mean absorbs
MIN_GROUP = 2          # launches in the smaller group, whatever the share
MIN_DISTINCT = 5       # fewer distinct values: a coarse timer's levels, not modes
MAX_MODES = 3


def _costs(x):
    """ss(i, j): the sum of squares of sorted x[i:j] about its mean, from prefix sums."""
    c1, c2 = np.concatenate(([0.0], np.cumsum(x))), np.concatenate(([0.0], np.cumsum(x * x)))

    def ss(i, j):
        return (c2[j] - c2[i]) - (c1[j] - c1[i]) ** 2 / (j - i)
    return ss


def _best_cut(x, k, least):
    """The cut points of sorted x into k groups of at least `least` values each that minimise
    the within-group sum of squares (1-D k-means, exact: every cut tried, k <= 3); None when
    x is too small."""
    n = x.size
    if n < k * least:
        return None
    ss = _costs(x)
    if k == 2:
        a = np.arange(least, n - least + 1)
        return [int(a[np.argmin(ss(0, a) + ss(a, n))])]
    a, b = np.meshgrid(np.arange(least, n - 2 * least + 1), np.arange(2 * least, n - least + 1), indexing="ij")
    ok = b - a >= least
    a, b = a[ok], b[ok]
    i = int(np.argmin(ss(0, a) + ss(a, b) + ss(b, n)))
    return [int(a[i]), int(b[i])]


def _separations(x, cuts):
    """Ashman's D between each pair of neighbouring groups (pooled within-group sd) and their
    location ratios."""
    groups = np.split(x, cuts)
    within = sum(float(((g - g.mean()) ** 2).sum()) for g in groups)
    sd = math.sqrt(max(within, 0.0) / (x.size - len(groups)))
    gaps = [b.mean() - a.mean() for a, b in zip(groups, groups[1:])]
    return [math.inf if sd == 0 else g / sd for g in gaps], [math.exp(g) for g in gaps]


def detect(values):
    """The modes of one group of values, or None when they form a single group (or cannot be
    split: fewer than 4 values, a value <= 0, not finite, fewer than MIN_DISTINCT levels).
    Three groups are tried first, then two: the most groups whose neighbours are all apart.

    Returns {"bounds": [b1, ...] (ascending: a value v is in mode searchsorted(bounds, v)),
    "locations": [median of each mode, ascending], "counts": [...], "separation": [Ashman's
    D between neighbouring modes], "n": n}, in the values' own units."""
    try:
        v = np.asarray(values, dtype=float).ravel()
    except (TypeError, ValueError):
        return None
    if v.size < 4 or not np.all(np.isfinite(v)) or np.any(v <= 0) or np.unique(v).size < MIN_DISTINCT:
        return None
    x = np.sort(np.log(v))
    least = max(MIN_GROUP, math.ceil(MIN_SHARE * x.size - 1e-9))
    for k in range(MAX_MODES, 1, -1):
        cuts = _best_cut(x, k, least)
        if cuts is None:
            continue
        seps, ratios = _separations(x, cuts)
        if all(d >= MIN_SEPARATION for d in seps) and all(r >= MIN_RATIO for r in ratios):
            groups = np.split(x, cuts)
            return {"bounds": [float(math.exp((a[-1] + b[0]) / 2)) for a, b in zip(groups, groups[1:])],
                    "locations": [float(math.exp(np.median(g))) for g in groups],
                    "counts": [int(g.size) for g in groups], "separation": [float(d) for d in seps],
                    "n": int(x.size)}
    return None


def assign(values, modes):
    """The mode index of each value (0 = the lowest mode)."""
    return np.searchsorted(np.asarray(modes["bounds"]), np.asarray(values, dtype=float), side="right")


def worst_mode_share(values, modes, higher_is_better=False):
    """(launches not in the best mode, all launches): the best mode is the lowest for times,
    the highest for rates."""
    idx = assign(values, modes)
    best = len(modes["bounds"]) if higher_is_better else 0
    return int(np.sum(idx != best)), int(idx.size)


NUMBER_WORDS = {2: "two", 3: "three"}


def _fmt(x):
    return f"{x:.3g}" if abs(x) < 1e4 else f"{x:.3e}"


def describe(modes, unit="", slow_share=None, where=""):
    """One plain sentence: "launches fall into two groups: 0.18 and 0.69 us, 39% slow, natively
    too". slow_share: the share of launches outside the best mode (0-1); where: the words that
    end it ("natively too", "in the variant")."""
    locs = [_fmt(x) for x in modes["locations"]]
    listed = " and ".join(locs) if len(locs) == 2 else ", ".join(locs[:-1]) + " and " + locs[-1]
    text = f"launches fall into {NUMBER_WORDS.get(len(locs), len(locs))} groups: {listed}{' ' + unit if unit else ''}"
    if slow_share is not None:
        text += f", {slow_share * 100:.0f}% slow"
    return text + (f", {where}" if where else "")
