"""nearmetal.analysis.stats: summaries, comparisons, calibration on simulated A/A data, power."""

import json
import math
import time
from collections import Counter

import numpy as np
import pytest
from scipy import stats as sps

from nearmetal.analysis import stats
from nearmetal.analysis.stats import compare, direction_for_unit, summarize

pytestmark = pytest.mark.unit  # pure computation: no process, no MPI, no container


# --------------------------------------------------------------------------- helpers


def _plain(obj):
    """True when obj holds only JSON-native Python types (no numpy scalars)."""
    if obj is None or type(obj) in (bool, int, float, str):
        return True
    if type(obj) is list:
        return all(_plain(x) for x in obj)
    if type(obj) is dict:
        return all(type(k) is str and _plain(v) for k, v in obj.items())
    return False


def simulate(points, n, sigma, ratio=1.0, *, paired=False, higher_is_better=False, margin=0.03, seed=0):
    """Verdict fractions over `points` simulated benchmark points, each with n lognormal
    samples per variant (noise sigma; the variant's true median is `ratio` x the baseline's).
    Paired points share a per-block factor (as large as the run-to-run noise) between the
    baseline and the variant run of a block, as a randomized block design produces."""
    rng = np.random.default_rng(seed)
    verdicts = Counter()
    for k in range(points):
        block = rng.lognormal(0.0, sigma, n) if paired else np.ones(n)
        b = 100.0 * block * rng.lognormal(0.0, sigma, n)
        v = 100.0 * ratio * block * rng.lognormal(0.0, sigma, n)
        if higher_is_better:          # a bandwidth: value = work / time
            b, v = 1e4 / b, 1e4 / v
        r = compare(list(b), list(v), higher_is_better=higher_is_better, margin=margin,
                    pairs=list(zip(b, v)) if paired else None, seed=k)
        verdicts[r["verdict"]] += 1
    return {k: c / points for k, c in verdicts.items()}


# --------------------------------------------------------------------------- summarize


def test_summarize_known_values():
    s = summarize([1.0, 2.0, 3.0, 4.0, 5.0])
    assert s["n"] == 5 and s["min"] == 1.0 and s["max"] == 5.0
    assert s["median"] == 3.0 and s["mean"] == 3.0
    assert s["std"] == pytest.approx(math.sqrt(2.5))
    assert s["sem"] == pytest.approx(math.sqrt(2.5) / math.sqrt(5))
    assert s["p5"] == pytest.approx(1.2) and s["p95"] == pytest.approx(4.8)
    assert s["mad"] == 1.0
    assert s["cv"] == pytest.approx(math.sqrt(2.5) / 3.0)
    assert s["outliers"] == []
    assert _plain(s)
    json.dumps(s)


def test_summarize_even_count_and_numpy_agreement():
    x = [10.3, 9.8, 10.1, 10.0, 10.6, 9.9]
    s = summarize(x)
    assert s["median"] == pytest.approx(np.median(x))
    assert s["std"] == pytest.approx(np.std(x, ddof=1))
    assert s["p5"] == pytest.approx(np.percentile(x, 5)) and s["p95"] == pytest.approx(np.percentile(x, 95))
    assert s["mad"] == pytest.approx(np.median(np.abs(np.array(x) - np.median(x))))


def test_summarize_detects_one_injected_outlier():
    clean = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2, 99.8, 100.1, 99.9, 100.4, 99.6, 100.3]
    x = clean[:5] + [130.0] + clean[5:]            # one 30% slow run at index 5
    s = summarize(x)
    assert s["outliers"] == [5]
    assert summarize(clean)["outliers"] == []
    # modified z of the injected value: 0.6745 * (130 - median) / MAD
    med = float(np.median(x))
    mad = float(np.median(np.abs(np.array(x) - med)))
    assert 0.6745 * (130.0 - med) / mad > 3.5


def test_summarize_single_value():
    s = summarize([42.0])
    assert s["n"] == 1 and s["std"] == 0.0 and s["sem"] == 0.0 and s["mad"] == 0.0
    assert s["median"] == s["mean"] == s["p5"] == s["p95"] == 42.0
    assert s["cv"] == 0.0 and s["outliers"] == []


def test_summarize_all_equal_values():
    s = summarize([7.0] * 8)
    assert s["std"] == 0.0 and s["mad"] == 0.0 and s["cv"] == 0.0 and s["outliers"] == []


def test_summarize_mad_zero_uses_mean_absolute_deviation():
    # MAD = 0 (more than half the values equal the median): modified z = 0.7979 (x-med)/meanAD
    assert summarize([5.0, 5.0, 5.0, 5.0, 100.0])["outliers"] == [4]   # 0.7979*95/19 = 3.99
    assert summarize([5.0, 5.0, 5.0, 6.0])["outliers"] == []           # 0.7979*1/0.25 = 3.19


def test_summarize_cv_none_for_zero_mean_and_errors():
    assert summarize([-1.0, 1.0])["cv"] is None
    with pytest.raises(ValueError):
        summarize([])
    with pytest.raises(ValueError):
        summarize([1.0, float("nan")])


# --------------------------------------------------------------------------- direction_for_unit


@pytest.mark.parametrize("unit", ["MB/s", "GB/s", "GFLOP/s", "ops/s", "Gop/s", "B/s", " mb/s ", "GFLOPS", "MLUPS"])
def test_direction_rates_higher_is_better(unit):
    assert direction_for_unit(unit) is True


@pytest.mark.parametrize("unit", ["us", "ms", "s", "ns", "µs", "sec", "seconds", "cycles", "ranks", ""])
def test_direction_times_and_others_lower_is_better(unit):
    assert direction_for_unit(unit) is False


# --------------------------------------------------------------------------- compare: basics


def test_compare_result_shape_and_json():
    rng = np.random.default_rng(1)
    b, v = list(rng.lognormal(0, 0.05, 10)), list(rng.lognormal(0, 0.05, 10))
    r = compare(b, v)
    assert set(r) >= {"ratio", "ci_low", "ci_high", "overhead_pct", "p_value", "test", "paired", "verdict",
                      "margin", "n_baseline", "n_variant", "baseline_noise"}
    assert set(r["baseline_noise"]) >= {"cv", "rel_spread", "median_ci_halfwidth_rel"}
    assert r["ratio"] == pytest.approx(np.median(v) / np.median(b))
    assert r["ci_low"] <= r["ratio"] <= r["ci_high"]
    assert r["test"] == "mannwhitney" and r["paired"] is False
    assert r["n_baseline"] == 10 and r["n_variant"] == 10
    assert _plain(r)
    json.dumps(r)


def test_compare_is_deterministic_given_seed():
    rng = np.random.default_rng(2)
    b, v = list(rng.lognormal(0, 0.05, 10)), list(rng.lognormal(0, 0.05, 10))
    assert compare(b, v, seed=5) == compare(b, v, seed=5)
    assert compare(b, v, seed=5)["ci_low"] != compare(b, v, seed=6)["ci_low"]
    pairs = list(zip(b, v))
    assert compare(b, v, pairs=pairs, seed=5) == compare(b, v, pairs=pairs, seed=5)


def test_compare_time_metric_slower():
    b = [10.0, 10.1, 9.9, 10.05, 9.95, 10.02, 9.98, 10.03, 9.97, 10.0]
    v = [x * 1.2 for x in b]
    r = compare(b, v)
    assert r["ratio"] == pytest.approx(1.2)
    assert r["overhead_pct"] == pytest.approx(20.0)
    assert r["verdict"] == "slower" and r["ci_low"] > 1.0 and r["p_value"] < 0.05


def test_compare_bandwidth_lower_is_slower_and_overhead_positive():
    b = [1000.0, 1010.0, 990.0, 1005.0, 995.0, 1002.0, 998.0, 1003.0, 997.0, 1000.0]
    v = [x / 1.25 for x in b]                      # container reaches 80% of the bandwidth
    r = compare(b, v, higher_is_better=True)
    assert r["ratio"] == pytest.approx(0.8)
    assert r["overhead_pct"] == pytest.approx(25.0)  # (1/ratio - 1) * 100: "worse is positive"
    assert r["verdict"] == "slower"
    r2 = compare(v, b, higher_is_better=True)
    assert r2["verdict"] == "faster" and r2["overhead_pct"] == pytest.approx(-20.0)


def test_compare_paired_uses_wilcoxon_and_block_bootstrap():
    rng = np.random.default_rng(4)
    block = rng.lognormal(0, 0.2, 12)              # strong block effect: pairing removes it
    b = 100 * block * rng.lognormal(0, 0.01, 12)
    v = 1.05 * 100 * block * rng.lognormal(0, 0.01, 12)
    r = compare(list(b), list(v), pairs=list(zip(b, v)))
    assert r["paired"] is True and r["test"] == "wilcoxon" and r["n_pairs"] == 12
    assert r["p_value"] == pytest.approx(sps.wilcoxon(v, b).pvalue)
    assert r["verdict"] == "slower"


def test_compare_paired_few_pairs_falls_back_to_mannwhitney():
    b, v = [10.0, 10.2, 9.9, 10.1, 9.8], [11.0, 11.3, 10.9, 11.2, 11.1]
    r = compare(b, v, pairs=list(zip(b, v)))
    assert r["paired"] is True and r["test"] == "mannwhitney"
    assert r["p_value"] == pytest.approx(sps.mannwhitneyu(v, b, method="exact").pvalue)


def test_compare_pairs_subset_of_groups():
    # analysis passes every value of both groups plus the pairs of complete blocks
    b = [10.0, 10.1, 9.9, 10.05, 9.95, 10.02, 9.98, 10.4]
    v = [10.0, 10.1, 9.9, 10.05, 9.95, 10.02, 9.98]
    r = compare(b, v, pairs=list(zip(b[:7], v)))
    assert r["n_baseline"] == 8 and r["n_variant"] == 7 and r["n_pairs"] == 7
    assert r["ratio"] == pytest.approx(1.0)
    r_none = compare(None, None, pairs=list(zip(b[:7], v)))
    assert r_none["n_baseline"] == 7 and r_none["ratio"] == r["ratio"]


def test_compare_degenerate_inputs():
    r = compare([5.0], [6.0])                     # n = 1: no CI, no test
    assert r["ci_low"] is None and r["p_value"] is None and r["test"] is None
    assert r["verdict"] == "inconclusive" and r["ratio"] == pytest.approx(1.2)
    assert r["baseline_noise"]["cv"] is None
    r = compare([3.0] * 6, [3.0] * 6)             # all ties: no p-value, zero-width CI at 1
    assert r["p_value"] is None and r["ci_low"] == r["ci_high"] == 1.0 and r["verdict"] == "equivalent"
    r = compare([3.0] * 3, [3.0] * 3)             # too few values to claim equivalence
    assert r["verdict"] == "inconclusive"
    r = compare([0.0, 1.0, 2.0], [1.0, 2.0, 3.0])  # ratios need positive values
    assert r["ratio"] is None and r["ci_low"] is None and r["verdict"] == "inconclusive"
    with pytest.raises(ValueError):
        compare([], [1.0])
    with pytest.raises(ValueError):
        compare([1.0, float("inf")], [1.0, 2.0])
    with pytest.raises(ValueError):
        compare(None, None, pairs=[1.0, 2.0, 3.0, 4.0])      # not pairs
    assert compare([1.0, 2.0], [1.5, 2.5], pairs=[])["paired"] is False


# --------------------------------------------------------------------------- rank tests vs scipy


def test_mannwhitney_matches_scipy():
    rng = np.random.default_rng(7)
    for trial in range(200):
        n1, n2 = (int(k) for k in rng.integers(2, 16, 2))
        a, b = rng.normal(0, 1, n1), rng.normal(0.5, 1, n2)
        if trial % 3 == 0:
            a, b = np.round(a), np.round(b)        # ties -> normal approximation
        ties = np.unique(np.r_[a, b]).size < n1 + n2
        if np.unique(np.r_[a, b]).size == 1:
            continue
        ref = sps.mannwhitneyu(a, b, method="asymptotic" if ties else "exact").pvalue
        assert stats._mannwhitney_p(a, b) == pytest.approx(ref, abs=1e-12)


def test_wilcoxon_matches_scipy():
    rng = np.random.default_rng(8)
    for trial in range(200):
        n = int(rng.integers(1, 30))
        a = rng.normal(0, 1, n)
        b = a + rng.normal(0.3, 1, n)
        if trial % 3 == 0:
            a, b = np.round(a), np.round(b)        # ties and zero differences
        d = (b - a)[(b - a) != 0]
        if d.size == 0:
            assert stats._wilcoxon_p(a, b) is None
            continue
        ties = np.unique(np.abs(d)).size < d.size
        ref = sps.wilcoxon(d, method="asymptotic" if ties else "exact", correction=False).pvalue
        assert stats._wilcoxon_p(a, b) == pytest.approx(ref, abs=1e-12)


# --------------------------------------------------------------------------- calibration (A/A)


@pytest.mark.parametrize("paired", [False, True])
@pytest.mark.parametrize("sigma", [0.02, 0.10])
def test_aa_calibration_false_verdicts_at_most_5_percent(sigma, paired):
    frac = simulate(400, 10, sigma, 1.0, paired=paired, seed=100 + int(sigma * 100) + paired)
    false_calls = frac.get("slower", 0.0) + frac.get("faster", 0.0)
    assert false_calls <= 0.05, frac


def test_aa_calibration_bandwidth_metric():
    frac = simulate(400, 10, 0.05, 1.0, higher_is_better=True, seed=9)
    assert frac.get("slower", 0.0) + frac.get("faster", 0.0) <= 0.05, frac


# --------------------------------------------------------------------------- power


@pytest.mark.parametrize("paired", [False, True])
def test_power_20pct_slowdown_2pct_noise(paired):
    frac = simulate(200, 10, 0.02, 1.20, paired=paired, seed=21)
    assert frac.get("slower", 0.0) >= 0.95, frac


def test_power_20pct_bandwidth_loss():
    frac = simulate(200, 10, 0.02, 1.20, higher_is_better=True, seed=22)
    assert frac.get("slower", 0.0) >= 0.95, frac


@pytest.mark.parametrize("paired", [False, True])
def test_small_difference_small_noise_is_equivalent(paired):
    frac = simulate(200, 10, 0.005, 1.005, paired=paired, margin=0.03, seed=23)
    assert frac.get("equivalent", 0.0) >= 0.95, frac


@pytest.mark.parametrize("paired", [False, True])
def test_small_difference_large_noise_is_inconclusive(paired):
    frac = simulate(200, 10, 0.30, 1.05, paired=paired, seed=24)
    assert frac.get("inconclusive", 0.0) >= 0.80, frac


def test_difference_beyond_margin_is_rarely_equivalent():
    frac = simulate(200, 10, 0.01, 1.04, seed=25)
    assert frac.get("equivalent", 0.0) <= 0.05, frac


# --------------------------------------------------------------------------- cost


def test_compare_cost_per_call():
    rng = np.random.default_rng(0)
    b, v = list(rng.lognormal(0, 0.05, 10)), list(rng.lognormal(0, 0.05, 10))
    compare(b, v)
    t = time.process_time()
    for i in range(500):
        compare(b, v, seed=i)
    per_call = (time.process_time() - t) / 500
    assert per_call < 0.002, f"{per_call * 1e3:.2f} ms per compare() call"


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 8, 10])
def test_the_rank_tests_floor_is_what_compare_gives_for_data_wholly_apart(n):
    """smallest_p(n) is the p compare() gives when every block says the same (the most extreme
    data there is): Mann-Whitney below 6 pairs, Wilcoxon from 6; not monotone (5: 0.0079, 6: 0.031)."""
    from nearmetal.analysis.rank_floor import smallest_p

    base = np.arange(1.0, n + 1)
    var = base + 100 + np.arange(n) * 0.1  # each block's variant above its baseline, differences all distinct
    c = compare(base, var, pairs=list(zip(base, var)), n_boot=50, alpha=0.5)
    assert c["p_value"] == pytest.approx(smallest_p(n)), (n, c["test"])


def test_an_answer_that_no_data_could_decide_says_the_tests_floor_not_the_margin():
    """A walk-through's study with max_repetitions = 6 (looks at 3, 5, 6; level 0.0195) ended
    'faster throughout this interval, but not shown to be by more than the margin': 6 pairs
    cannot give p below 0.031, whatever the margin."""
    from nearmetal.analysis.answer_text import could_be_words
    from nearmetal.analysis.rank_floor import out_of_reach

    c = {"verdict": "inconclusive", "alpha": 0.01953, "paired": True, "n_pairs": 6, "n_baseline": 6, "n_variant": 6,
         "p_value": 0.03125}
    floor = out_of_reach(c)
    assert floor == {"blocks": 6, "smallest_p": 0.03125, "level": 0.01953, "blocks_needed": 7}
    assert out_of_reach(dict(c, n_pairs=5)) is None  # Mann-Whitney 5 a side: 0.0079, below the level
    assert out_of_reach(dict(c, verdict="faster")) is None
    assert out_of_reach(dict(c, p_value=0.0143)) is None  # tied pairs: the approximation has no floor
    unpaired = dict(c, paired=False, n_pairs=None, n_baseline=3, n_variant=6, alpha=0.05, p_value=0.0238)
    assert out_of_reach(unpaired) is None  # 3 against 6 values: 2/C(9,3) = 0.024, below 0.05
    assert out_of_reach(dict(unpaired, n_variant=3, p_value=0.1))["smallest_p"] == pytest.approx(0.1)
    e = {"cost_ratio": 0.75, "ci_low": 0.561, "ci_high": 0.995, "overhead_ci": [-43.9, -0.5], "rank_test_floor": floor,
         "level_words": "96.1% interval"}
    words = could_be_words(e, 0.03)
    assert "faster throughout this interval, but its rank test over 6 blocks cannot give a p below 0.0312, above " \
           "the level 0.0195: it takes at least 7 blocks" in words, words
    assert "not shown to be by more than the margin" in could_be_words(dict(e, rank_test_floor=None), 0.03)


def test_a_study_of_3_blocks_answers_with_the_rank_tests_floor_end_to_end(tmp_path):
    """Through the store, analyze() and the answers: 3 fixed blocks, the variant 20% slower in
    every block: the interval lies above 1, the rank test cannot go below 0.1 > 0.05, and the
    answer says so (the key the words read is the one answers() writes)."""
    from nearmetal.analysis.analyze import analyze
    from nearmetal.study.execute import runner
    from nearmetal.study.plan import study_file as config_mod
    from nearmetal.study.records import OK, RunResult
    from nearmetal.study.store import codec

    text = ('[study]\nname = "f"\nrepetitions = 3\nwarmup = 0\n[matrix]\nmode = ["native", "hybrid"]\n'
            'mpi = ["openmpi"]\n[[benchmark]]\nkernel = "latency"\n')
    cfg = config_mod.parse(text)
    store, sid, _ = runner.open_study(cfg, text, tmp_path / "f.db", resume=False, say=lambda m: None)
    with store:
        for run in store.pending(sid):
            slow = json.loads(run["variant_json"]).get("mode") == "hybrid"
            value = (1.2 if slow else 1.0) * (1 + 0.001 * run["block"])
            rec = [{"metric": "latency", "unit": "us", "value": value, "point": {"size": 8}}]
            codec.store_result(store, run["id"], RunResult(OK, 0, ["x"], {}, None, "t", 0.5, None, rec))
        analysis = analyze(store, n_boot=200)
    [e] = [e for e in analysis["answers"]["by_benchmark"] if e["metric"] == "latency"]
    assert e["verdict"] == "inconclusive" and e["ci_low"] > 1, e
    assert e["rank_test_floor"]["blocks"] == 3 and e["rank_test_floor"]["smallest_p"] == pytest.approx(0.1)
    assert "its rank test over 3 blocks cannot give a p below 0.1" in " ".join(analysis["answers"]["headline"]) + \
        " ".join(str(x.get("sentence")) for x in analysis["answers"]["by_benchmark"])
