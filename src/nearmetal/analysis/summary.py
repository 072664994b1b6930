"""Comparisons from summary statistics (n, mean, standard deviation) when raw values are
not available, e.g. results imported from a paper's table.

Ratio of means with a 95% confidence interval by the delta method on log(ratio), and
Welch's t-test for the p-value. With n = 1 on either side nothing can be said about
noise: the ratio is reported and the verdict is "inconclusive".
"""

import math

from ..study.records import comparable
from .stats import with_overhead
from .trimmed import exp_interval


def compare_summary(base, var, *, higher_is_better=False, margin=0.03, alpha=0.05):
    """base/var: dicts with n, mean, std. Same keys as stats.compare's result."""
    from scipy import stats as st

    nb, mb, sb = base["n"], base["mean"], base.get("std") or 0.0
    nv, mv, sv = var["n"], var["mean"], var.get("std") or 0.0
    ratio = mv / mb if mb else float("nan")
    out = {"ratio": ratio, "ci_low": None, "ci_high": None, "p_value": None, "test": None, "paired": False,
           "margin": margin, "n_baseline": nb, "n_variant": nv,
           "baseline_noise": {"cv": (sb / mb) if mb and nb > 1 else None, "rel_spread": None,
                              "median_ci_halfwidth_rel": None},
           "verdict": "inconclusive", "from_summary": True}
    if nb < 2 or nv < 2 or not (comparable(mb) and comparable(mv)):
        return with_overhead(out, higher_is_better)
    rb, rv = sb / mb, sv / mv  # relative spreads; x * x is inf past a double's range, x ** 2 raises
    var_log = rb * rb / nb + rv * rv / nv
    # Welch-Satterthwaite, its two variances scaled by the larger (the dof does not change):
    # squared twice, a spread of 1e80 would be past a double's range
    a, c = sb ** 2 / nb, sv ** 2 / nv
    top = max(a, c) or 1.0
    a, c = a / top, c / top
    dof_den = (a ** 2 / (nb - 1)) + (c ** 2 / (nv - 1))
    dof = (a + c) ** 2 / dof_den if dof_den else float(nb + nv - 2)
    tcrit = st.t.ppf(1 - alpha / 2, dof)
    half = tcrit * math.sqrt(var_log)
    out["ci_low"], out["ci_high"] = exp_interval(math.log(ratio) - half, math.log(ratio) + half)
    if out["ci_low"] is None:  # spreads past a double's range: nothing can be decided
        return with_overhead(out, higher_is_better)
    if sb or sv:
        # in units of the baseline's mean: the test is scale-free, scipy's own dof is not
        t = st.ttest_ind_from_stats(mv / mb, sv / mb, nv, 1.0, sb / mb, nb, equal_var=False)
        out["p_value"], out["test"] = float(t.pvalue), "welch"
    lo, hi = out["ci_low"], out["ci_high"]
    if 1 - margin <= lo and hi <= 1 + margin:
        out["verdict"] = "equivalent"
    elif out["p_value"] is not None and out["p_value"] < alpha and (lo > 1 or hi < 1):
        worse = hi < 1 if higher_is_better else lo > 1
        out["verdict"] = "slower" if worse else "faster"
    return with_overhead(out, higher_is_better)
