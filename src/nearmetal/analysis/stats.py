"""Statistics of the study engine: pure functions over lists of floats, no I/O.

summarize(values)            -> one group's descriptive statistics and outliers
compare(baseline, variant)   -> ratio (paired: trimmed mean of per-block log ratios; else of medians),
                                its CI (paired: Yuen's t; else bootstrap), rank-test p-value,
                                overhead and its CI, verdict
direction_for_unit(unit)     -> whether higher values are better for a unit

Every result is a JSON-serializable dict of plain floats/ints/None/bools/lists.
The formulas, the verdict rule and the measured calibration are in docs/statistics.md.
"""

import math
from functools import lru_cache

import numpy as np

from ..study.records import comparable
from .trimmed import exp_interval, trimmed_mean_ci

__all__ = ["summarize", "compare", "direction_for_unit"]

# Iglewicz-Hoaglin modified z-score: 0.6745 = Phi^-1(0.75) makes MAD a consistent sigma
# estimate for normal data; the mean-absolute-deviation fallback uses 0.7979 = sqrt(2/pi).
_MZ_MAD = 0.6745
_MZ_MEANAD = 0.7979
_MZ_THRESHOLD = 3.5

# Exact rank-test null distributions are used up to these sizes (beyond: normal approximation).
_MWU_EXACT_MAX_CELLS = 2500     # n1 * n2
_WILCOXON_EXACT_MAX_N = 50
_WILCOXON_MIN_PAIRS = 6         # with 5 pairs the smallest two-sided p is 0.0625
# "equivalent" needs at least this many values per group (pairs when paired): with 2 or 3
# values the percentile bootstrap CI is far too narrow (measured: a real 4% difference with
# 2% noise came out "equivalent" in 8-13% of points at n = 2, <= 2% at n >= 4).
MIN_N_EQUIVALENT = 4
# ---------------------------------------------------------------------------------------
# summarize


def _as_array(values, what):
    try:
        x = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{what}: values must be numbers ({e})") from None
    if x.ndim != 1:
        x = x.reshape(-1)
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{what}: values must be finite (no NaN or inf)")
    return x


def _outliers(x, med, mad):
    dev = x - med
    if mad > 0:
        score = _MZ_MAD * dev / mad
    else:
        mean_ad = float(np.mean(np.abs(dev)))
        if mean_ad == 0:          # all values equal the median
            return []
        score = _MZ_MEANAD * dev / mean_ad
    return [int(i) for i in np.flatnonzero(np.abs(score) > _MZ_THRESHOLD)]


def summarize(values) -> dict:
    """Descriptive statistics of one group of measurements.

    Returns n, min, max, median, mean, std (sample, ddof=1; 0.0 for n=1), sem (std/sqrt(n)),
    p5, p95 (linear interpolation), mad (unscaled median absolute deviation), cv (std/mean,
    None when the mean is 0) and outliers (indices whose modified z-score exceeds 3.5).
    """
    x = _as_array(values, "summarize")
    n = int(x.size)
    if n == 0:
        raise ValueError("summarize: no values")
    xs = np.sort(x)
    med = _median_sorted(xs)
    mean = float(np.mean(x))
    std = float(np.std(x, ddof=1)) if n > 1 else 0.0
    mad = _median_sorted(np.sort(np.abs(x - med)))
    p5, p95 = _quantiles(xs, (0.05, 0.95), presorted=True)
    return {
        "n": n,
        "min": float(xs[0]),
        "max": float(xs[-1]),
        "median": med,
        "mean": mean,
        "std": std,
        "sem": std / math.sqrt(n),
        "p5": p5,
        "p95": p95,
        "mad": mad,
        "cv": (std / mean) if mean != 0 else None,
        "outliers": _outliers(x, med, mad),
    }


# ---------------------------------------------------------------------------------------
# direction


_TIME_UNITS = {"ns", "us", "µs", "μs", "usec", "ms", "msec", "s", "sec", "secs", "second", "seconds",
               "min", "mins", "minute", "minutes", "h", "hr", "hour", "hours", "cycles", "ticks"}
_RATE_SUFFIXES = ("/s", "/sec", "/second", "per second", "per sec", "flops", "lups", "iops", "bps",
                  "/min", "/h", "/hour", "/day")  # per-time rates, e.g. GROMACS's ns/day


def direction_for_unit(unit: str) -> bool:
    """higher_is_better for a unit: True for rates (anything ending in "/s", e.g. "MB/s",
    "GB/s", "GFLOP/s", "ops/s"; also "GFLOPS", "MLUPS", "IOPS", "Gbps", and per minute,
    hour or day: "ns/day"), or what a unit ending "(higher is better)" or "(lower is
    better)" says (a figure of merit's override); False for times
    ("ns", "us", "ms", "s", ...) and for any other unit (lower is better by default)."""
    u = str(unit or "").strip().casefold()
    # A figure of merit whose direction its unit does not tell (apps/fom.py): said in the unit.
    if u.endswith("(higher is better)"):
        return True
    if u.endswith("(lower is better)"):
        return False
    if u in _TIME_UNITS:
        return False
    return u.endswith(_RATE_SUFFIXES)


# ---------------------------------------------------------------------------------------
# rank tests (exact null distributions cached; cross-checked against scipy.stats in tests)


def _norm_sf(z):
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def _average_ranks(x):
    """1-based average ranks of x and the sizes of its tie groups."""
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    new = np.empty(xs.size, dtype=bool)
    new[0] = True
    np.not_equal(xs[1:], xs[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    counts = np.diff(np.append(starts, xs.size))
    avg = starts + (counts + 1) / 2.0
    ranks = np.empty(xs.size)
    ranks[order] = np.repeat(avg, counts)
    return ranks, counts


@lru_cache(maxsize=256)
def _mwu_sf_table(m, n):
    """sf[u] = P(U >= u) under H0 for sample sizes m, n (no ties): the coefficients of the
    Gaussian binomial [m+n choose m]_q, computed exactly with Python integers."""
    size = m * n + 1
    c = np.zeros(size, dtype=object)
    c[0] = 1
    for i in range(1, m + 1):
        k = n + i                         # multiply by (1 - q^k)
        if k < size:
            c[k:] = c[k:] - c[:-k].copy()
        pad = (-size) % i                 # divide by (1 - q^i): running sums per residue mod i
        cc = np.concatenate([c, np.zeros(pad, dtype=object)]).reshape(-1, i)
        c = np.cumsum(cc, axis=0).reshape(-1)[:size]
    total = sum(c)
    tail = np.cumsum(c[::-1])[::-1]       # tail[u] = #arrangements with U >= u
    return np.array([t / total for t in tail], dtype=float)


@lru_cache(maxsize=64)
def _wilcoxon_cdf_table(n):
    """cdf[t] = P(T+ <= t) under H0 for n non-zero, untied differences."""
    top = n * (n + 1) // 2
    c = np.zeros(top + 1, dtype=np.int64)  # fits: at most 2^50 arrangements for n = 50
    c[0] = 1
    for i in range(1, n + 1):
        c[i:] = c[i:] + c[:-i].copy()
    return np.cumsum(c) / float(2 ** n)


def _mannwhitney_p(a, b):
    """Two-sided Mann-Whitney U p-value; None when not computable. Exact null distribution
    without ties (n1*n2 <= 2500), else normal approximation with tie and continuity
    correction (as scipy.stats.mannwhitneyu(method="asymptotic"))."""
    n1, n2 = a.size, b.size
    if n1 < 2 or n2 < 2:
        return None
    ranks, ties = _average_ranks(np.concatenate([a, b]))
    if ties.size == 1:                    # all values equal
        return None
    u1 = float(ranks[:n1].sum()) - n1 * (n1 + 1) / 2.0
    u = max(u1, n1 * n2 - u1)
    if ties.max() == 1 and n1 * n2 <= _MWU_EXACT_MAX_CELLS:
        p = 2.0 * float(_mwu_sf_table(min(n1, n2), max(n1, n2))[int(round(u))])
    else:
        n = n1 + n2
        tie_term = float(np.sum(ties.astype(float) ** 3 - ties))
        s = math.sqrt(n1 * n2 / 12.0 * ((n + 1) - tie_term / (n * (n - 1))))
        p = 2.0 * _norm_sf((u - n1 * n2 / 2.0 - 0.5) / s)
    return min(1.0, p)


def _wilcoxon_p(b, v):
    """Two-sided Wilcoxon signed-rank p-value of the differences v - b; zero differences
    are dropped (Wilcoxon's method); None when none is left. Exact null distribution
    without ties (n <= 50), else normal approximation with tie correction (as
    scipy.stats.wilcoxon(method="asymptotic"))."""
    d = v - b
    d = d[d != 0]
    n = d.size
    if n == 0:
        return None
    ranks, ties = _average_ranks(np.abs(d))
    r_plus = float(ranks[d > 0].sum())
    if ties.max() == 1 and n <= _WILCOXON_EXACT_MAX_N:
        cdf = _wilcoxon_cdf_table(n)
        t = int(round(min(r_plus, n * (n + 1) / 2.0 - r_plus)))
        p = 2.0 * float(cdf[t])
    else:
        mn = n * (n + 1) / 4.0
        var = (n * (n + 1) * (2 * n + 1) - float(np.sum(ties.astype(float) ** 3 - ties)) / 2.0) / 24.0
        if var <= 0:
            return None
        p = 2.0 * _norm_sf(abs(r_plus - mn) / math.sqrt(var))
    return min(1.0, p)


# ---------------------------------------------------------------------------------------
# bootstrap


def _boot_medians(sorted_x, idx):
    """Medians of the resamples sorted_x[idx[r]] (one per row), idx sorted in place.
    sorted_x is ascending, so sorting indices sorts values: small-int sorts are fast."""
    n = idx.shape[1]
    idx.sort(axis=1)
    lo, hi = (n - 1) // 2, n // 2
    if lo == hi:
        return sorted_x[idx[:, lo]]
    return 0.5 * (sorted_x[idx[:, lo]] + sorted_x[idx[:, hi]])


def _index_dtype(n):
    return np.int16 if n < 2 ** 15 else np.int64


def _quantiles(x, qs, presorted=False):
    """numpy's default ("linear") quantiles of x at the probabilities qs, without numpy's
    generic quantile machinery (which costs more than the bootstrap itself at n = 10)."""
    n = x.size
    pos = [(n - 1) * q for q in qs]
    lo = [int(math.floor(h)) for h in pos]
    hi = [min(i + 1, n - 1) for i in lo]
    xs = x if presorted else np.partition(x, sorted(set(lo + hi)))
    out = []
    for h, i, j in zip(pos, lo, hi):
        a, b = float(xs[i]), float(xs[j])
        out.append(a + (b - a) * (h - i))
    return out


def _median_sorted(xs):
    n = xs.size
    return float(xs[n // 2]) if n % 2 else 0.5 * (float(xs[n // 2 - 1]) + float(xs[n // 2]))


def _pct_interval(samples, alpha):
    lo, hi = _quantiles(samples, (alpha / 2.0, 1.0 - alpha / 2.0))
    return lo, hi


# ---------------------------------------------------------------------------------------
# compare


def median_ci(values, alpha=0.05, n_boot=2000, seed=0):
    """Percentile-bootstrap interval of one group's median (the resampling compare() uses),
    with a fixed seed so every report of the same values prints the same interval; None
    with fewer than 2 numeric values."""
    x = np.sort(np.asarray([v for v in values if isinstance(v, (int, float, np.integer, np.floating))
                            and not isinstance(v, bool) and math.isfinite(v)], dtype=float))
    if x.size < 2:
        return None
    rng = np.random.default_rng(seed)
    idx = np.sort(rng.integers(0, x.size, size=(n_boot, x.size)), axis=1)
    lo, hi = (x.size - 1) // 2, x.size // 2
    meds = 0.5 * (x[idx[:, lo]] + x[idx[:, hi]])
    return float(np.quantile(meds, alpha / 2)), float(np.quantile(meds, 1 - alpha / 2))


def compare(baseline, variant, *, higher_is_better=False, margin=0.03, pairs=None, n_boot=2000,
            seed=0, alpha=0.05) -> dict:
    """Compare a variant with its baseline: ratio, its interval, two-sided rank test, overhead
    and verdict. See docs/statistics.md.

    baseline, variant: the two groups' values (unpaired: the ratio of their medians). pairs:
    optional list of (baseline_value, variant_value) measured in the same randomized block;
    when given, the ratio is exp(trimmed mean of the blocks' log ratios), and it, its CI and
    the test use the pairs (Yuen's trimmed-mean t interval, Wilcoxon signed-rank); without,
    the CI is a percentile bootstrap of the ratio of medians; and
    baseline/variant (which may be None) are the full groups, used for n_baseline,
    n_variant and baseline_noise. An empty pairs list means an unpaired comparison.
    """
    if not 0 <= margin < 1:
        raise ValueError(f"compare: margin must be in [0, 1), got {margin!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"compare: alpha must be in (0, 1), got {alpha!r}")
    n_boot = int(n_boot)
    if n_boot < 1:
        raise ValueError("compare: n_boot must be >= 1")

    if pairs is not None and len(pairs) == 0:
        pairs = None                    # no complete block: an unpaired comparison
    paired = pairs is not None
    if paired:
        try:
            pa = np.asarray(pairs, dtype=float)
        except (TypeError, ValueError) as e:
            raise ValueError(f"compare: pairs must be (baseline_value, variant_value) numbers ({e})") from None
        if pa.ndim != 2 or pa.shape[1] != 2:
            raise ValueError("compare: pairs must be a list of (baseline_value, variant_value)")
        pa = _as_array(pa, "compare pairs").reshape(-1, 2)
        b_data, v_data = pa[:, 0].copy(), pa[:, 1].copy()
        base_all = _as_array(baseline, "compare baseline") if baseline is not None else b_data
        var_all = _as_array(variant, "compare variant") if variant is not None else v_data
    else:
        if baseline is None or variant is None:
            raise ValueError("compare: baseline and variant are required without pairs")
        b_data = base_all = _as_array(baseline, "compare baseline")
        v_data = var_all = _as_array(variant, "compare variant")
    if base_all.size == 0 or var_all.size == 0:
        raise ValueError("compare: baseline and variant need at least one value each")

    nb, nv = b_data.size, v_data.size
    rng = np.random.default_rng(seed)
    ob = np.argsort(b_data, kind="mergesort")
    ov = np.argsort(v_data, kind="mergesort")
    sb, sv = b_data[ob], v_data[ov]
    med_b, med_v = _median_sorted(sb), _median_sorted(sv)
    # a ratio needs values above 0, within the range the store admits (a database written
    # before that rule may hold 5e-324 or 1e300: then no ratio, as for a 0, never an overflow)
    positive = all(comparable(x) for x in (sb[0], sb[-1], sv[0], sv[-1]))
    ratio = (med_v / med_b) if positive else None

    # --- the ratio's interval: paired, the trimmed mean's; else a bootstrap of the medians ---
    ci_low = ci_high = None
    boot_base_meds = None               # bootstrap medians of b_data, reused for baseline_noise
    if nb >= 2 and nv >= 2 and positive and paired:
        center, low, high = trimmed_mean_ci(np.log(v_data) - np.log(b_data), alpha)
        ratio, (ci_low, ci_high) = math.exp(center), exp_interval(low, high)
    elif nb >= 2 and nv >= 2:
        boot_base_meds = _boot_medians(sb, rng.integers(0, nb, size=(n_boot, nb), dtype=_index_dtype(nb)))
        mv = _boot_medians(sv, rng.integers(0, nv, size=(n_boot, nv), dtype=_index_dtype(nv)))
        if positive:
            ci_low, ci_high = _pct_interval(mv / boot_base_meds, alpha)

    # --- rank test -------------------------------------------------------------------------
    if paired and nb >= _WILCOXON_MIN_PAIRS:
        test, p_value = "wilcoxon", _wilcoxon_p(b_data, v_data)
    else:
        test, p_value = "mannwhitney", _mannwhitney_p(b_data, v_data)
    if p_value is None:
        test = None

    # --- verdict ---------------------------------------------------------------------------
    verdict = "inconclusive"
    if ci_low is not None:
        if 1.0 - margin <= ci_low and ci_high <= 1.0 + margin:
            if min(nb, nv) >= MIN_N_EQUIVALENT:
                verdict = "equivalent"
        elif p_value is not None and p_value < alpha and (ci_low > 1.0 or ci_high < 1.0):
            above = ci_low > 1.0          # variant's median is larger
            verdict = "faster" if above == bool(higher_is_better) else "slower"

    return with_overhead({
        "ratio": ratio,
        "ci_low": ci_low,
        "ci_high": ci_high,
        "p_value": p_value,
        "test": test,
        "paired": paired,
        "verdict": verdict,
        "margin": float(margin),
        "n_baseline": int(base_all.size),
        "n_variant": int(var_all.size),
        "n_pairs": int(nb) if paired else None,
        "baseline_noise": _baseline_noise(base_all, sb, boot_base_meds, rng, n_boot, alpha),
    }, higher_is_better)


def overhead_of(ratio, higher_is_better):
    """The cost in percent a ratio (variant / baseline) means: + slower, - faster, for a
    time and a rate alike; None where there is none."""
    if ratio is None or (higher_is_better and ratio <= 0):
        return None
    return ((1.0 / ratio) - 1.0) * 100.0 if higher_is_better else (ratio - 1.0) * 100.0


def with_overhead(c, higher_is_better):
    """A comparison with overhead_pct and its interval, overhead_ci ([low, high]), from its
    ratio and the ratio's interval: computed here once, for every report to show."""
    ends = [overhead_of(c.get("ci_low"), higher_is_better), overhead_of(c.get("ci_high"), higher_is_better)]
    c["overhead_pct"] = overhead_of(c.get("ratio"), higher_is_better)
    c["overhead_ci"] = sorted(ends) if None not in ends else None
    return c


def _baseline_noise(base_all, sb, boot_meds, rng, n_boot, alpha):
    """Run-to-run noise of the baseline group: cv, (p95-p5)/median, and the half-width of
    the bootstrap CI of its median relative to the median. sb: the sorted baseline values
    the ratio's bootstrap used, with their bootstrap medians boot_meds (reused when they
    are the whole baseline group, bootstrapped afresh otherwise)."""
    n = base_all.size
    out = {"n": int(n), "cv": None, "rel_spread": None, "median_ci_halfwidth_rel": None}
    if n < 2:
        return out
    s = np.sort(base_all)
    med = _median_sorted(s)
    mean = float(np.mean(s))
    std = float(np.std(s, ddof=1))
    if mean != 0:
        out["cv"] = std / abs(mean)
    if med != 0:
        p5, p95 = _quantiles(s, (0.05, 0.95), presorted=True)
        out["rel_spread"] = (p95 - p5) / abs(med)
        if boot_meds is None or s.size != sb.size or not np.array_equal(s, sb):
            boot_meds = _boot_medians(s, rng.integers(0, n, size=(n_boot, n), dtype=_index_dtype(n)))
        lo, hi = _pct_interval(boot_meds, alpha)
        out["median_ci_halfwidth_rel"] = (hi - lo) / 2.0 / abs(med)
    return out
