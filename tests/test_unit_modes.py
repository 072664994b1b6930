"""Launches that fall into modes: the detector (analysis/modes.py) and the comparison by mode
(analysis/mode_compare.py), on seeded synthetic samples; the intervals against published values
and scipy."""

import math
import re

import numpy as np
import pytest

from nearmetal.analysis import mode_compare, modes

pytestmark = pytest.mark.unit

ALPHA_LOOK = 0.008747  # the quickstart's level per look (7 looks: sequential.alpha_per_look)


def mixture(rng, n, locations, shares, sd=0.04):
    """n launches: mode j (location locations[j]) with probability shares[j], log-normal noise."""
    which = rng.choice(len(locations), size=n, p=shares)
    return np.asarray(locations)[which] * np.exp(rng.normal(0, sd, n))


def exact_mixture(n_per_mode, locations, rng, sd=0.04):
    return np.concatenate([loc * np.exp(rng.normal(0, sd, k)) for loc, k in zip(locations, n_per_mode)])


# ------------------------------------------------------------------ the detector

@pytest.mark.parametrize("n", [8, 18, 36, 120])
def test_one_group_is_not_split(n):
    rng = np.random.default_rng(n)
    for _ in range(50):
        assert modes.detect(np.exp(rng.normal(0, 0.05, n))) is None


def test_two_groups_found_with_their_locations_counts_and_bound():
    rng = np.random.default_rng(1)
    v = exact_mixture([11, 7], [0.18, 0.69], rng)
    m = modes.detect(v)
    assert m is not None and m["counts"] == [11, 7] and m["n"] == 18
    assert m["locations"][0] == pytest.approx(0.18, rel=0.05) and m["locations"][1] == pytest.approx(0.69, rel=0.05)
    assert 0.2 < m["bounds"][0] < 0.6 and m["separation"][0] > modes.MIN_SEPARATION
    assert list(modes.assign(v, m)) == [0] * 11 + [1] * 7
    assert modes.worst_mode_share(v, m) == (7, 18)
    assert modes.worst_mode_share(v, m, higher_is_better=True) == (11, 18)


def test_three_groups_found():
    rng = np.random.default_rng(2)
    m = modes.detect(exact_mixture([20, 15, 10], [1.0, 2.5, 6.0], rng))
    assert m is not None and m["counts"] == [20, 15, 10]
    assert [round(x, 1) for x in m["locations"]] == pytest.approx([1.0, 2.5, 6.0], rel=0.05)


def test_groups_closer_than_min_ratio_are_one():
    rng = np.random.default_rng(3)
    # 15% apart, sharply separated (D is large): a difference a comparison must see, not a mode
    v = exact_mixture([10, 10], [1.0, 1.15], rng, sd=0.005)
    assert modes.detect(v) is None


def test_a_few_slow_launches_are_not_a_mode():
    rng = np.random.default_rng(4)
    # 1 slow launch in 18 (under MIN_SHARE): the trimmed mean absorbs it
    assert modes.detect(exact_mixture([17, 1], [0.18, 0.69], rng)) is None
    # 2 of 36 (5.6%) neither
    assert modes.detect(exact_mixture([34, 2], [0.18, 0.69], rng)) is None
    # 4 of 36 is
    assert modes.detect(exact_mixture([32, 4], [0.18, 0.69], rng)) is not None


@pytest.mark.parametrize("values", [
    [0.18, 0.69, 0.7],                            # too few launches
    [0.5] * 20,                                   # all tied
    [1.0, 2.0] * 10,                              # a coarse timer's two levels
    [1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 1.0, 2.0],     # three levels
    [0.0, 0.18, 0.19, 0.7, 0.71, 0.69, 0.2, 0.18],  # a zero: no log
    [-1.0, 0.18, 0.19, 0.7, 0.71, 0.69, 0.2, 0.18],
    [math.nan, 0.18, 0.19, 0.7, 0.71, 0.69, 0.2, 0.18],
    [],
    ["a", "b"],
])
def test_edge_cases_are_one_group(values):
    assert modes.detect(values) is None


def test_ties_within_modes_keep_a_finite_answer():
    # timer-quantized but with enough distinct values: two tight groups of repeated values
    v = [0.18] * 6 + [0.19] * 5 + [0.2] + [0.68] * 3 + [0.69] * 3 + [0.7]
    m = modes.detect(v)
    assert m is not None and m["counts"] == [12, 7] and all(math.isfinite(d) for d in m["separation"])


def test_description_in_plain_words():
    m = {"bounds": [0.4], "locations": [0.18, 0.69], "counts": [11, 7], "separation": [20.0], "n": 18}
    assert modes.describe(m, "µs", 7 / 18, "natively too") == \
        "launches fall into two groups: 0.18 and 0.69 µs, 39% slow, natively too"
    m3 = {"bounds": [1.5, 4], "locations": [1.0, 2.5, 6.0], "counts": [1, 1, 1], "separation": [9, 9], "n": 3}
    assert modes.describe(m3) == "launches fall into three groups: 1, 2.5 and 6"


# ------------------------------------------------------------------ the intervals

def test_share_difference_matches_newcombe_1998():
    # Newcombe (1998), Stat Med 17:873, Table II, example (a): 56/70 - 48/80, method 10
    d, lo, hi = mode_compare.share_difference(48, 80, 56, 70, 0.05)
    assert d == pytest.approx(0.2) and lo == pytest.approx(0.0524, abs=5e-5) and hi == pytest.approx(0.3339, abs=5e-5)


def test_share_difference_at_the_extremes_stays_in_range():
    d, lo, hi = mode_compare.share_difference(0, 10, 10, 10, 0.05)
    assert d == 1 and 0 < lo < 1 and hi == pytest.approx(1.0)
    d, lo, hi = mode_compare.share_difference(5, 10, 5, 10, 0.05)
    assert d == 0 and lo < 0 < hi and lo == pytest.approx(-hi)


def test_yuen_interval_matches_scipy():
    from scipy import stats as st

    rng = np.random.default_rng(5)
    for _ in range(20):
        a, b = rng.normal(0, 1, rng.integers(5, 30)), rng.normal(0.3, 2, rng.integers(5, 30))
        est, lo, hi = mode_compare.yuen(a, b, 0.05)
        ci = st.ttest_ind(b, a, trim=0.2, equal_var=False).confidence_interval(0.95)
        assert (lo, hi) == pytest.approx((ci.low, ci.high), rel=1e-9)
    assert mode_compare.yuen([1.0], [1.0, 2.0], 0.05) is None
    assert mode_compare.yuen([1.0, 1.0], [2.0, 2.0], 0.05) == (1.0, 1.0, 1.0)


def test_adjust_moves_every_launch_to_the_best_mode():
    m = {"bounds": [0.4], "locations": [0.2, 0.7], "counts": [2, 2], "separation": [9], "n": 4}
    assert mode_compare.adjust([0.2, 0.7, 0.77], m).tolist() == pytest.approx([0.2, 0.2, 0.22])
    assert mode_compare.adjust([0.2, 0.7], m, higher_is_better=True).tolist() == pytest.approx([0.7, 0.7])


# ------------------------------------------------------------------ the comparison's verdicts

def compare(base, var, margin=0.10, hib=False, alpha=ALPHA_LOOK):
    pairs = list(zip(base, var))
    return mode_compare.decide_look(list(base), list(var), pairs, alpha=alpha, margin=margin,
                                    higher_is_better=hib, n_boot=200)


def test_same_modes_and_shares_are_equivalent():
    rng = np.random.default_rng(6)
    base = mixture(rng, 40, [0.18, 0.69], [0.6, 0.4])
    var = mixture(rng, 40, [0.18, 0.69], [0.6, 0.4])
    c = compare(base, var)
    assert c["verdict"] == "equivalent" and c["modes"]["decided_by"] == "location and share"
    assert 0.9 <= c["ci_low"] <= c["ratio"] <= c["ci_high"] <= 1.1
    assert re.match(r"launches fall into two groups: 0\.18\d* and 0\.6[89]\d*, \d+% slow", c["modes"]["text"])
    assert len(c["modes"]["per_mode"]) == 2 and all(pm["ratio"] for pm in c["modes"]["per_mode"])
    # the noise said is within a mode's, not the spread between the modes
    assert c["baseline_noise"]["cv"] < 0.1


def test_ordinary_comparison_cannot_decide_the_same_cells():
    from nearmetal.analysis import stats

    rng = np.random.default_rng(6)
    base = mixture(rng, 40, [0.18, 0.69], [0.6, 0.4])
    var = mixture(rng, 40, [0.18, 0.69], [0.6, 0.4])
    c = stats.compare(base, var, margin=0.10, pairs=list(zip(base, var)), alpha=2 * ALPHA_LOOK, n_boot=200)
    assert c["verdict"] == "inconclusive"


def test_both_modes_slower_is_slower_by_location():
    rng = np.random.default_rng(7)
    base = mixture(rng, 40, [0.18, 0.69], [0.6, 0.4])
    var = mixture(rng, 40, [0.18, 0.69], [0.6, 0.4]) * 1.25
    c = compare(base, var)
    assert c["verdict"] == "slower" and c["modes"]["decided_by"] == "location"
    assert c["ratio"] == pytest.approx(1.25, rel=0.05)


def test_bandwidth_modes_lower_are_slower():
    rng = np.random.default_rng(8)
    base = mixture(rng, 40, [2000.0, 8000.0], [0.3, 0.7])
    var = mixture(rng, 40, [2000.0, 8000.0], [0.3, 0.7]) * 0.75
    assert compare(base, var, hib=True)["verdict"] == "slower"
    assert compare(var, base, hib=True)["verdict"] == "faster"


def test_fast_mode_matches_but_many_more_slow_launches_is_slower_by_share():
    rng = np.random.default_rng(9)
    base = exact_mixture([54, 6], [0.18, 0.69], rng)
    var = exact_mixture([12, 48], [0.18, 0.69], rng)
    rng.shuffle(base)
    rng.shuffle(var)
    c = compare(base, var)
    assert c["verdict"] == "slower" and c["modes"]["decided_by"] == "share"
    s = c["modes"]["share"]
    assert s["baseline"] == pytest.approx(0.1) and s["variant"] == pytest.approx(0.8) and s["ci_low"] > 0
    assert s["mean_cost_effect"] > 1.1
    assert 0.9 <= c["ci_low"] and c["ci_high"] <= 1.1  # each mode alone: as fast


def test_fast_mode_matches_but_share_differs_somewhat_is_open_and_said():
    rng = np.random.default_rng(10)
    base = exact_mixture([14, 6], [0.18, 0.69], rng)
    var = exact_mixture([5, 15], [0.18, 0.69], rng)
    rng.shuffle(base)
    rng.shuffle(var)
    c = compare(base, var)
    assert c["verdict"] == "inconclusive" and c["modes"]["share"]["differs"]
    assert c["modes"]["decided_by"] is None
    assert 0.9 <= c["ci_low"] and c["ci_high"] <= 1.1


def test_one_group_or_groups_of_their_own_go_to_the_ordinary_comparison():
    rng = np.random.default_rng(11)
    base = np.exp(rng.normal(0, 0.05, 20))
    assert compare(base, base * 1.01) is None
    # a 1.7x slower variant: two groups, one per side, is a difference, not modes
    assert compare(base, base * 1.7) is None
    assert mode_compare.decide_look([], [1.0], None, alpha=0.01, margin=0.1, higher_is_better=False) is None


def test_a_variant_slow_only_sometimes_against_a_single_group_baseline():
    rng = np.random.default_rng(12)
    base = exact_mixture([38, 2], [0.18, 0.69], rng)   # 2 slow launches: the mode is shared
    var = exact_mixture([12, 28], [0.18, 0.69], rng)
    rng.shuffle(base)
    rng.shuffle(var)
    c = compare(base, var)
    assert c is not None and c["verdict"] == "slower" and c["modes"]["decided_by"] == "share"


def test_unpaired_and_few_launches():
    rng = np.random.default_rng(13)
    base = list(exact_mixture([3, 2], [0.18, 0.69], rng))
    var = list(exact_mixture([3, 2], [0.18, 0.69], rng))
    c = mode_compare.decide_look(base, var, None, alpha=ALPHA_LOOK, margin=0.1, higher_is_better=False, n_boot=100)
    assert c is not None and c["paired"] is False and c["verdict"] in ("equivalent", "inconclusive")
    assert c["n_baseline"] == 5 and c["modes"]["share"]["baseline"] == pytest.approx(0.4)


def test_false_verdicts_stay_rare_on_aa_mixtures():
    """A/A on 300 seeded bimodal pairs at one look: slower/faster in at most 5%."""
    rng = np.random.default_rng(14)
    false = 0
    for _ in range(300):
        p = rng.uniform(0.15, 0.45)
        base = mixture(rng, 18, [0.18, 0.69], [1 - p, p], sd=0.06)
        var = mixture(rng, 18, [0.18, 0.69], [1 - p, p], sd=0.06)
        c = compare(base, var, margin=0.03, alpha=0.05)
        false += c is not None and c["verdict"] in ("slower", "faster")
    assert false / 300 <= 0.05


def test_answer_words_name_the_point_and_the_baseline():
    m = {"bounds": [0.4], "locations": [0.18, 0.69], "counts": [11, 7], "separation": [20.0], "n": 18}
    info = {"detected": m, "share_baseline": 7 / 18, "share_variant": 0.25, "share_differs": False}
    assert mode_compare.answer_words({"size": 8}, info, "µs", "natively") == \
        "at 8 B launches fall into two groups: 0.18 and 0.69 µs, 25% slow against 39% natively"


# ------------------------------------------------------------------ wired into a study's analysis

def _analysis(base, var, modes_on=True, margin=0.10):
    """A one-point analysis dict as analysis.analyze builds it, the point decided by the
    quickstart's looks (sequential.decide)."""
    from nearmetal.analysis import stats
    from nearmetal.study.plan import sequential

    looks = sequential.schedule(5, 60)
    bd, vd = dict(enumerate(map(float, base))), dict(enumerate(map(float, var)))
    comp = sequential.decide(bd, vd, looks, sequential.alpha_per_look(tuple(looks)), margin, False, n_boot=200,
                             modes=modes_on)
    native = {"mode": "native", "mpi": "mpich"}
    bind = {"mode": "bind", "runtime": "charliecloud", "mpi": "mpich", "image": "default"}
    common = {"benchmark": "latency", "kernel": "latency", "metric": "latency", "unit": "us",
              "higher_is_better": False, "point": {"size": 8}, "ranks": 2, "threads": 1,
              "blocks": list(range(len(base)))}
    points = [{**common, "variant": "native/mpich", "variant_dims": native, "values": list(bd.values()),
               "stats": stats.summarize(base), "baseline": None, "comparison": None},
              {**common, "variant": "bind/charliecloud/mpich/default", "variant_dims": bind,
               "values": list(vd.values()), "stats": stats.summarize(var), "baseline": "native/mpich",
               "comparison": comp}]
    return {"study": {"name": "t", "margin": margin}, "points": points,
            "variants": [{"id": "native/mpich", **native, "baseline": "native/mpich"},
                         {"id": "bind/charliecloud/mpich/default", **bind, "baseline": "native/mpich"}],
            "sequential": {"alpha_per_look": sequential.alpha_per_look(tuple(looks)),
                           "ci_level": 1 - 2 * sequential.alpha_per_look(tuple(looks))}}


def test_a_study_point_with_modes_is_decided_and_answered_in_plain_words():
    from nearmetal.analysis.answers import answers

    rng = np.random.default_rng(20)
    base = mixture(rng, 60, [0.18, 0.69], [0.6, 0.4], sd=0.05)
    var = mixture(rng, 60, [0.18, 0.69], [0.6, 0.4], sd=0.05)
    on, off = _analysis(base, var), _analysis(base, var, modes_on=False)
    assert on["points"][1]["comparison"]["verdict"] == "equivalent" and on["points"][1]["comparison"]["modes"]
    assert off["points"][1]["comparison"]["verdict"] == "inconclusive"
    assert on["points"][1]["comparison"]["look"] < off["points"][1]["comparison"]["look"]
    a = answers(on)
    v = a["by_variant"][0]
    assert v["verdict"] == "equivalent" and a["by_benchmark"][0]["modes"]["n_points"] == 1
    assert re.search(r"On latency, at 8 B launches fall into two groups: 0\.1\d+ and 0\.[67]\d* us, \d+% slow "
                     r"against \d+% natively\.$", v["sentence"])
    assert answers(off)["by_variant"][0]["verdict"] == "inconclusive"


def test_an_answer_whose_slow_share_differs_is_not_equivalent_and_says_why():
    from nearmetal.analysis.answers import answers

    rng = np.random.default_rng(21)
    base = exact_mixture([14, 6], [0.18, 0.69], rng)
    var = exact_mixture([5, 15], [0.18, 0.69], rng)
    rng.shuffle(base)
    rng.shuffle(var)
    a = answers(_analysis(base, var))
    e = a["by_benchmark"][0]
    assert e["verdict"] == "inconclusive" and e["modes"]["share_differs"]
    assert e["text"].startswith("latency: as fast in each group of launches, but the share of slow launches differs")
    assert "75% slow against 30% natively" in e["text"]
    assert a["by_variant"][0]["verdict"] == "inconclusive"  # a variant of one benchmark: the same answer
    assert "share of slow launches differs" in a["by_variant"][0]["sentence"]


def test_a_real_difference_at_the_margin_is_rarely_called_equivalent():
    """A variant exactly at the margin (both modes x1.10, the quickstart's 10%), through the
    quickstart's looks on 300 seeded bimodal pairs: equivalent in at most 5% (1,000 pairs: 2.9%)."""
    from nearmetal.study.plan import sequential

    rng = np.random.default_rng(15)
    looks = sequential.schedule(5, 60)
    wrong = 0
    for _ in range(300):
        p = rng.uniform(0.2, 0.45)
        base = mixture(rng, 60, [0.18, 0.69], [1 - p, p], sd=0.05)
        var = mixture(rng, 60, [0.18, 0.69], [1 - p, p], sd=0.05) * 1.10
        # n_boot as studies use it (2000 there; 200 keeps this quick): 50 draws made the
        # intervals themselves noisy enough to add a point or two of false equivalence
        c = sequential.decide(dict(enumerate(base)), dict(enumerate(var)), looks,
                              sequential.alpha_per_look(tuple(looks)), 0.10, False, n_boot=200)
        wrong += c["verdict"] == "equivalent"
    assert wrong / 300 <= 0.05
