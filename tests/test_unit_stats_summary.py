"""analysis/summary.py: a comparison from summary statistics (mean, n, std), as `import` stores them."""

import math

import pytest
from scipy import stats as st

from nearmetal.analysis.summary import compare_summary

pytestmark = pytest.mark.unit


def _welch_dof(sb, nb, sv, nv):
    a, c = sb ** 2 / nb, sv ** 2 / nv
    return (a + c) ** 2 / (a ** 2 / (nb - 1) + c ** 2 / (nv - 1))


def test_the_interval_is_scale_free_and_large_spreads_do_not_overflow():
    """The Welch degrees of freedom squared the variances twice: a spread of 1e80 overflowed
    (an imported study that could never be reported). Scaled, the answer is the same at any scale."""
    small = compare_summary({"n": 4, "mean": 10.0, "std": 1.0}, {"n": 6, "mean": 12.0, "std": 2.0})
    half = st.t.ppf(0.975, _welch_dof(1.0, 4, 2.0, 6)) * math.sqrt((1 / 10) ** 2 / 4 + (2 / 12) ** 2 / 6)
    assert small["ci_low"] == pytest.approx(1.2 * math.exp(-half)) and small["ci_high"] == pytest.approx(1.2 * math.exp(half))
    for scale in (1e-90, 1e80):
        big = compare_summary({"n": 4, "mean": 10.0 * scale, "std": 1.0 * scale},
                              {"n": 6, "mean": 12.0 * scale, "std": 2.0 * scale})
        assert big["ratio"] == pytest.approx(1.2)
        assert (big["ci_low"], big["ci_high"]) == pytest.approx((small["ci_low"], small["ci_high"]))
        assert big["p_value"] == pytest.approx(small["p_value"]) and big["verdict"] == small["verdict"]


def test_values_past_the_stored_range_give_no_ratio_not_an_overflow():
    """A database written before `import` refused them may hold 5e-324 beside 1e300: report and
    explain died with OverflowError on it (math.exp of the paired log ratio)."""
    from nearmetal.analysis.stats import compare

    for base, var in (([5e-324] * 4, [1.0] * 4), ([1.0] * 4, [1e300] * 4)):
        for pairs in (list(zip(base, var)), None):
            c = compare(base, var, pairs=pairs)
            assert c["ratio"] is None and c["ci_low"] is None and c["verdict"] == "inconclusive", (base, var, pairs)
    c = compare_summary({"n": 3, "mean": 1e-200, "std": 1e-200}, {"n": 3, "mean": 1e200, "std": 1e200})
    assert c["ci_low"] is None and c["verdict"] == "inconclusive"


def test_spreads_within_the_stored_range_but_past_a_doubles_give_no_interval_not_an_overflow():
    """Values inside 1e-100..1e100 can still overflow once squared or exponentiated: an imported
    std of 1000 on a mean of 1 beside 0.1 on 1, or paired runs alternating 1e-100 and 1e100,
    raised OverflowError in report and explain."""
    from nearmetal.analysis.stats import compare

    for base, var in (({"n": 3, "mean": 1.0, "std": 1000.0}, {"n": 3, "mean": 1.0, "std": 0.1}),
                      ({"n": 3, "mean": 1e-60, "std": 1e60}, {"n": 3, "mean": 1.0, "std": 1.0}),
                      ({"n": 3, "mean": 1e-100, "std": 1e100}, {"n": 3, "mean": 1e100, "std": 1e100})):
        c = compare_summary(base, var)
        assert c["ci_low"] is None and c["ci_high"] is None and c["verdict"] == "inconclusive", (base, var)
        assert c["ratio"] == pytest.approx(var["mean"] / base["mean"])
    b, v = [1e-100, 1e100, 1e-100, 1e100], [1e100, 1e-100, 1e100, 1e-100]
    c = compare(b, v, pairs=list(zip(b, v)))
    assert c["ci_low"] is None and c["verdict"] == "inconclusive" and math.isfinite(c["ratio"])
