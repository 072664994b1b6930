"""The study's final look (study/plan/sequential.py): where the study ended, recorded by the
runner, a difference shown is decided even if it may lie within the margin, and a study whose
time ran out before its last planned look spends there what the looks not taken would have."""

import numpy as np
import pytest
from scipy.special import ndtri

pytestmark = pytest.mark.unit


def test_the_final_level_spends_what_the_looks_not_taken_would_have():
    from nearmetal.study.plan.sequential import _crossing, alpha_per_look, final_alpha, schedule

    planned = tuple(schedule(5, 60))
    per_look = alpha_per_look(planned)
    assert final_alpha(planned, planned) == per_look  # every look taken: nothing left to spend
    levels = [final_alpha(planned[:k], planned) for k in range(1, len(planned))]
    assert all(a > b for a, b in zip(levels, levels[1:]))  # the earlier the end, the more is left
    assert per_look < levels[-1] and levels[0] < 0.04
    for k, level in enumerate(levels, start=1):
        taken = planned[:k]
        # the looks taken cross no more often than the planned ones would: both uses of the level
        for sides in (2, 1):
            c, last = float(ndtri(1 - per_look / sides)), float(ndtri(1 - level / sides))
            assert _crossing((c,) * (k - 1) + (last,), taken) <= _crossing(c, planned) + 1e-4
    with pytest.raises(ValueError, match="are not the first of"):
        final_alpha((5, 12), planned)


def test_the_final_level_holds_the_planned_error_by_simulation():
    """Null paths (sums of independent normal steps, one per block) looked at the quickstart's
    first 4 looks, the 4th final at final_alpha: some look crosses as often as the planned 7
    looks would, not more (200,000 paths)."""
    from nearmetal.study.plan.sequential import alpha_per_look, final_alpha, schedule

    planned = schedule(5, 60)
    taken = planned[:4]
    rng = np.random.default_rng(11)
    steps = rng.standard_normal((200_000, len(planned))) * np.sqrt(np.diff([0] + planned))
    z = np.abs(np.cumsum(steps, axis=1) / np.sqrt(planned))
    c = ndtri(1 - alpha_per_look(tuple(planned)) / 2)
    full = float(np.mean(z.max(axis=1) >= c))
    last = ndtri(1 - final_alpha(tuple(taken), tuple(planned)) / 2)
    early = float(np.mean((z[:, :3].max(axis=1) >= c) | (z[:, 3] >= last)))
    assert early <= full + 0.002, (early, full)
    assert early > float(np.mean(z[:, :4].max(axis=1) >= c)) + 0.005  # and it does spend more than alpha' there


def _shown_within_margin(seed=3, n=12):
    """A variant 3% slower with 1% noise, margin 3%: shown slower, but its interval straddles
    1.03 (neither within the margin nor beyond it)."""
    rng = np.random.default_rng(seed)
    base = {b: 100 * (1 + rng.normal(0, 0.01)) for b in range(n)}
    var = {b: 100 * 1.03 * (1 + rng.normal(0, 0.01)) for b in range(n)}
    return base, var


def test_the_final_look_decides_a_difference_shown_within_the_margin():
    from nearmetal.study.plan.sequential import decide

    base, var = _shown_within_margin()
    looks, alpha = [5, 8, 12], 0.0117
    going_on = decide(base, var, looks, alpha, 0.03, False)
    assert going_on["verdict"] == "inconclusive" and going_on["look"] == 12 and not going_on["final"]
    assert going_on["ci_low"] > 1 and going_on["ci_low"] < 1.03 < going_on["ci_high"]
    ended = decide(base, var, looks, alpha, 0.03, False, final=(12, 0.03))
    assert ended["verdict"] == "slower" and ended["final"] and ended["alpha"] == 0.03
    assert ended["ci_level"] == pytest.approx(0.94)
    # the final look is only the look the study ended at: an earlier one decides as before
    assert decide(base, var, looks, alpha, 0.03, False, final=(8, 0.03))["look"] == 8
    # a rate (higher is better) 3% lower is slower the same way
    rates = decide({b: 1 / v for b, v in base.items()}, {b: 1 / v for b, v in var.items()}, looks, alpha, 0.03,
                   True, final=(12, alpha))
    assert rates["verdict"] == "slower"


def test_the_runners_first_look_is_not_final():
    """The runner passes the looks up to the blocks measured: at the first look that is one
    look, which must not be taken for a design of one look (its point would be decided for the
    runner and left open by the analysis)."""
    from nearmetal.study.plan.sequential import decide, schedule

    rng = np.random.default_rng(3)  # 2.8% slower, 0.6% noise: shown after 5 blocks, not beyond 3%
    base = {b: float(x) for b, x in enumerate(1 + 0.006 * rng.standard_normal(8))}
    var = {b: base[b] * 1.028 * (1 + 0.006 * rng.standard_normal()) for b in range(8)}
    base, var = {b: base[b] for b in range(5)}, {b: var[b] for b in range(5)}
    cut = [n for n in schedule(5, 60) if n <= 5]
    for looks in (cut, schedule(5, 60)):
        c = decide(base, var, looks, 0.0087, 0.03, False, modes=False)
        assert c["verdict"] == "inconclusive" and not c["final"] and 1 < c["ci_low"] < 1.03 < c["ci_high"]
    assert decide(base, var, cut, 0.0087, 0.03, False, modes=False, final=(5, 0.0087))["verdict"] == "slower"


def test_a_study_of_fixed_repetitions_is_one_final_look(tmp_path):
    """repetitions = 12: one look, always final: a difference shown inside the margin is slower."""
    from nearmetal.analysis.analyze import analyze
    from nearmetal.study.execute import runner
    from nearmetal.study.plan.study_file import parse

    cfg = parse('[study]\nname = "x"\nwarmup = 0\nseed = 1\nrepetitions = 12\n[baseline]\nvariant = "base"\n'
                '[[variant]]\nname = "base"\nmode = "native"\nmpi = "mpich"\n'
                '[[variant]]\nname = "other"\nmode = "native"\nmpi = "mpich"\n[[benchmark]]\nkernel = "latency"\n')
    store, study_id, _ = runner.open_study(cfg, "text", tmp_path / "x.db", resume=False)
    base, var = _shown_within_margin()
    for row in store.pending(study_id):
        value = (var if row["variant"] == "other" else base)[row["block"]]
        store.finish_run(row["id"], "ok", 0, [], {}, None, "t", 0.1, None,
                         [{"metric": "latency", "unit": "us", "value": value, "point": {"size": 8}}])
    a = analyze(store)
    assert a["sequential"]["final"] == {"blocks": 12, "alpha": 0.05, "ci_level": pytest.approx(0.90),
                                        "reason": "fixed"}
    c = next(p["comparison"] for p in a["points"] if p["comparison"])
    assert c["verdict"] == "slower" and c["final"] and 1 < c["ci_low"] < 1.03 < c["ci_high"]
    store.close()


def test_the_final_look_calls_no_difference_that_is_not_shown():
    """Same launches in both arms up to noise: the final look does not turn them into a verdict
    of difference (equivalent, or open)."""
    from nearmetal.study.plan.sequential import decide

    rng = np.random.default_rng(8)
    wrong = 0
    for i in range(200):
        base = {b: 100 * (1 + rng.normal(0, 0.05)) for b in range(8)}
        var = {b: 100 * (1 + rng.normal(0, 0.05)) for b in range(8)}
        c = decide(base, var, [5, 8], 0.025, 0.03, False, final=(8, 0.0344))
        wrong += c["verdict"] in ("slower", "faster")
    assert wrong <= 10  # <= 5% of A/A points


def _bimodal(rng, n, shift, share=0.4):
    slow = rng.random(n) < share
    return (np.where(slow, 0.69, 0.19) * shift * np.exp(rng.normal(0, 0.02, n))).tolist()


def test_the_final_look_decides_a_mode_location_shown_within_the_margin():
    from nearmetal.analysis.mode_compare import decide_look

    rng = np.random.default_rng(4)
    base, var = _bimodal(rng, 18, 1.0), _bimodal(rng, 18, 1.09)
    kw = dict(alpha=0.0256, margin=0.10, higher_is_better=False, n_boot=200)
    going_on = decide_look(base, var, list(zip(base, var)), **kw)
    assert going_on["verdict"] == "inconclusive" and going_on["ci_low"] > 1 and going_on["ci_high"] > 1.10
    ended = decide_look(base, var, list(zip(base, var)), final=True, **kw)
    assert ended["verdict"] == "slower" and ended["modes"]["decided_by"] == "location"


def test_the_runner_records_where_a_study_ended_and_the_analysis_reads_it(tmp_path):
    from nearmetal.study.plan.sequential import END_KEY, alpha_per_look, end_of, final_alpha, record_end
    from nearmetal.study.store.store import Store

    assert final_alpha([5, 8], [5, 8, 12, 18]) == final_alpha((5, 8), (5, 8, 12, 18))  # lists as tuples
    with pytest.raises(ValueError, match="are not the first of"):
        final_alpha((), (5, 8))
    store = Store(tmp_path / "s.db")
    looks = [5, 8, 12, 18]
    alpha = alpha_per_look(tuple(looks))
    assert end_of(store, 1, looks, alpha, 8) is None  # nothing recorded: the study may go on
    record_end(store, 1, 8, "max_time")
    assert end_of(store, 1, looks, alpha, 8) == (8, final_alpha((5, 8), tuple(looks), alpha), "max_time")
    assert end_of(store, 1, looks, alpha, 12) is None  # resumed past it: that end is void
    record_end(store, 1, 12, "budget")  # the budget check's stop: its look's own level
    assert end_of(store, 1, looks, alpha, 12) == (12, alpha, "budget")
    record_end(store, 1, 12)  # it goes on
    assert end_of(store, 1, looks, alpha, 12) is None
    # between two looks: a shortened final look where the time ran out (runner.extend), else none
    store.set_meta(END_KEY.format(1), '{"blocks": 10, "reason": "max_time"}')
    assert end_of(store, 1, looks, alpha, 10) == (10, final_alpha((5, 8, 10), tuple(looks), alpha), "max_time")
    assert final_alpha((5, 8), looks, alpha) > final_alpha((5, 8, 10), looks, alpha) > final_alpha((5, 8, 12), looks, alpha)
    store.set_meta(END_KEY.format(1), '{"blocks": 10, "reason": "budget"}')
    assert end_of(store, 1, looks, alpha, 10) is None
    store.set_meta(END_KEY.format(1), '{"blocks": 20, "reason": "max_time"}')
    assert end_of(store, 1, looks, alpha, 20) is None  # past the last look
    with pytest.raises(ValueError, match="are not the first of"):
        final_alpha((5, 10, 12), looks)  # a shortened look is the last one taken
    with pytest.raises(ValueError, match="unknown end of a study"):
        record_end(store, 1, 12, "tired")
    store.close()


def test_an_answer_of_one_point_decided_at_the_final_look_names_that_level():
    """The point's own interval at the final look's level is the answer's, and the answer says
    which level that is; a point decided at an earlier look keeps the study's level and words."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from test_answers import BIND, build, only

    from nearmetal.analysis.answers import answers

    data = build([("cg", "cg", "gflops", "GFLOP/s", [({}, 5.0)])], [(BIND, 1.05)], noise=0.01)
    seq = {"alpha_per_look": 0.008747, "ci_level": 1 - 2 * 0.008747, "looks": [5, 8, 12, 18, 27, 41, 60],
           "final": {"blocks": 18, "alpha": 0.02561, "ci_level": 1 - 2 * 0.02561, "reason": "max_time"}}
    point = next(p for p in data["points"] if p["comparison"])
    point["comparison"].update(ci_level=1 - 2 * 0.02561, final=True)
    a = answers(dict(data, sequential=seq))
    answer = only(a)
    assert answer["ci_level"] == pytest.approx(0.94878)
    assert answer["level_words"] == "94.9% interval (sequential, the final look, after 18 blocks: the time ran out)"
    assert "94.9% interval (sequential, the final look" in a["headline"][0]
    assert (answer["ci_low"], answer["ci_high"]) == pytest.approx(
        (1 / point["comparison"]["ci_high"], 1 / point["comparison"]["ci_low"]))  # a rate: its cost
    point["comparison"].update(ci_level=seq["ci_level"], final=False)  # decided before the final look
    earlier = only(answers(dict(data, sequential=seq)))
    assert earlier["level_words"] == "98.3% interval (sequential, 7 looks planned)"
    from nearmetal.analysis.answer_text import level_words

    assert level_words(dict(data, sequential=seq)) == (
        "98.3% interval (sequential, 7 looks planned; 94.9% at the final look, the 4th, after 18 blocks: the time ran out)")
    # a shortened final look (16 blocks, between the planned 12 and 18) is the 4th look too
    short = dict(seq, final={"blocks": 16, "alpha": 0.02687, "ci_level": 1 - 2 * 0.02687, "reason": "max_time"})
    assert level_words(dict(data, sequential=short)) == (
        "98.3% interval (sequential, 7 looks planned; 94.6% at the final look, the 4th, after 16 blocks: the time ran out)")
    # every point decided at the 2nd look (8 blocks): the level is still the 7 looks' planned one, said so
    early = dict(seq, final={"blocks": 8, "alpha": seq["alpha_per_look"], "ci_level": seq["ci_level"],
                             "reason": "decided"})
    assert level_words(dict(data, sequential=early)) == (
        "98.3% interval (sequential, 7 looks planned, every point decided by the 2nd look)")
    # stopped at the 2nd look, its open points out of reach in the budget: said, not read as 7 looks taken
    spent = dict(early, final=dict(early["final"], reason="budget"))
    assert level_words(dict(data, sequential=spent)) == (
        "98.3% interval (sequential, 7 looks planned, stopped at the 2nd look: its open points could not be "
        "decided within max_time and max_repetitions)")
    last = dict(early, final=dict(early["final"], blocks=60))  # decided at the last look: nothing to add
    assert level_words(dict(data, sequential=last)) == "98.3% interval (sequential, 7 looks planned)"


def test_the_tables_and_the_matrix_say_a_final_looks_own_level():
    from nearmetal.report.formatting import fmt_ratio
    from nearmetal.report.matrix import _cell

    c = {"ratio": 1.15, "ci_low": 1.001, "ci_high": 1.33, "ci_level": 1 - 2 * 0.02561, "final": True}
    # the matrix's digits: a lower end of 1.001 is not printed as 1.00, which reads as "not slower"
    assert fmt_ratio(c) == "1.150 [1.001–1.330]"  # the study's level: the column header says it
    assert fmt_ratio(dict(c, own_level=True)) == "1.150 [1.001–1.330] (94.9%)"
    answer = {"verdict": "equivalent", "cost_ratio": 0.967, "ci_low": 0.924, "ci_high": 1.011, "ci_level": 0.94878}
    assert "94.88% interval" in _cell(answer, "98.25%")["title"]
    assert "98.25% interval" in _cell(dict(answer, ci_level=None), "98.25%")["title"]


def test_look_numbers_are_english_ordinals():
    from nearmetal.analysis.answer_text import _ordinal

    assert [_ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 101, 111)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "23rd", "101st", "111th"]

