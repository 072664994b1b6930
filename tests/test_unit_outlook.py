"""The outlook (study/execute/outlook.py): at a look where a study goes on, the blocks each
open point needs to be decided by the final look against the blocks the shared budget
affords; said once, with what would help, when most points are out of reach, and kept with
the study. Replayed on real quickstart databases in bench/outlook_replay.py."""

import math

import pytest

from nearmetal.study.execute import machine_check as M
from nearmetal.study.execute import outlook as O
from nearmetal.study.execute.budget_check import needed_blocks
from nearmetal.study.store.store import Store

from test_unit_machine_check import QUIET, _cfg

pytestmark = pytest.mark.unit


def _result(lo, hi, alpha=0.0087, look=8):
    return {"ci_low": lo, "ci_high": hi, "alpha": alpha, "look": look}


def test_the_half_width_follows_the_trimmed_means_degrees_of_freedom():
    # 5 blocks keep h = 3 values (df 2), 8 keep 6 (df 5): the interval narrows far faster than 1/sqrt(n)
    assert O.half_width(5, 0.0087) > 3 * O.half_width(8, 0.0087)
    assert O.half_width(18, 0.0087) == pytest.approx(O.half_width(8, 0.0087) * 0.594, rel=0.01)
    assert O.half_width(1, 0.0087) == math.inf  # h < 2: no interval


def test_at_the_final_look_a_shown_difference_needs_no_more_than_half_the_margin():
    # centred 6% off with ±4%: a difference already shown: one block more
    assert O.final_needed_blocks(_result(1.02, 1.10, 0.025), 8, 0.10) == 9
    # centred on 1 with ±20%: the half-width must halve; 1/sqrt(n) alone says 4 x 8 blocks,
    # fewer as the t quantile of 5 degrees of freedom falls to that of ~14
    wide = _result(0.80, 1.20)
    need = O.final_needed_blocks(wide, 8, 0.10)
    assert 2 * 8 < need < 4 * 8
    # centred on the margin, it only has to be shown either way: fewer blocks than one centred
    # 4% off, which must fall within the margin or clear 4%
    on_margin, off = _result(0.90, 1.30), _result(0.84, 1.24)
    assert O.final_needed_blocks(on_margin, 8, 0.10) < O.final_needed_blocks(off, 8, 0.10)
    assert needed_blocks(on_margin, 8, 0.10) == math.inf  # the rule before the final look: never
    # the final look's own, less strict level (the time ran out) needs fewer blocks
    assert O.final_needed_blocks(wide, 8, 0.10, final_tail=0.0256) < need
    for nothing in ({"ci_low": None, "ci_high": None}, _result(0.5, math.inf)):
        assert O.final_needed_blocks(nothing, 8, 0.10) is None
    assert O.final_needed_blocks(_result(0.5, 1.5), 8, 1e-4) == math.inf  # a margin beyond any budget


def _outlook(points, cell_s, blocks, margin, max_blocks, seconds_left):
    afford, block_s = O.affordable(points, cell_s, blocks, max_blocks, seconds_left)
    return O.outlook(points, blocks, margin, afford, block_s)


def _points(n_wide, n_tight):
    wide = [(f"w{i}", ("v", "b"), _result(0.50, 1.50)) for i in range(n_wide)]
    tight = [(f"t{i}", ("v", "b"), _result(0.97, 1.05)) for i in range(n_tight)]
    return wide + tight


def test_the_outlook_speaks_only_when_most_open_points_are_out_of_reach():
    cell_s = {"v": 1.0, "b": 1.0}
    assert _outlook(_points(4, 6), cell_s, 8, 0.10, 60, 40) is None   # 4 out of reach: fewer than half
    assert _outlook(_points(2, 0), cell_s, 8, 0.10, 60, 40) is None   # all, but too few to be news
    o = _outlook(_points(8, 2), cell_s, 8, 0.10, 60, 40)
    assert o["out"] == 8 and o["measured"] == 10 and o["afford"] == 28      # 40 s left at 2 s a block
    assert o["need_most"] > 100 and round(o["half_pct"]) == 50 and 10 < o["margin_pct"] < 100
    assert _outlook(_points(5, 5), cell_s, 8, 0.10, 60, 40)["out"] == 5      # half: said
    assert _outlook(_points(8, 2), cell_s, 8, 0.10, 60, 10 ** 6)["afford"] == 60  # max_repetitions caps it
    text = O.outlook_text(o, _cfg("margin = 0.10\nmax_time = 480"), 231.0, 8)
    assert text.startswith("After 8 blocks (231 s of runs), 8 of the 10 points still open then cannot be decided "
                           "at the ±10% margin within the budget")
    for bit in ("±50% wide", "the budget allows about 28", "expect them undecided", "in a new study",
                "quiet = true", "fewer variants", "a margin of ±", "max_time = "):
        assert bit in text, (bit, text)


def test_the_advice_leaves_out_a_margin_that_would_not_help():
    cfg = _cfg("margin = 0.10\nmax_time = 480")
    o = _outlook(_points(8, 2), {"v": 1.0, "b": 1.0}, 8, 0.10, 60, 40)
    for margin_pct in (9.5, 100.0, math.inf):  # no wider than now, or not a margin a study accepts
        assert "a margin of" not in O.outlook_text(dict(o, margin_pct=margin_pct), cfg, 231.0, 8)


def test_the_runner_says_the_outlook_once_and_the_reports_show_it(tmp_path):
    from nearmetal.study.execute import runner

    cfg = _cfg("margin = 0.10\nmax_time = 480\nmin_repetitions = 5\nmax_repetitions = 60")
    runs = [{"run_key": f"{c}#{i}", "wall_s": 1.0, "warmup": 0} for c in ("v", "b") for i in range(8)]
    said = []
    with Store(tmp_path / "s.db", what="test") as store:
        M.record(store, 1, precheck={"action": "start", "text": "At the start the machine is busy.", "sample": QUIET})
        runner._outlook(cfg, store, 1, runs, 8, 440.0, said.append, _points(8, 2))
        runner._outlook(cfg, store, 1, runs, 12, 460.0, said.append, _points(8, 2))
        kept = M.load(store, 1)
    assert len(said) == 1 and said[0].startswith("⚠ study s: After 8 blocks (440 s of runs), 8 of the 10")
    assert kept["outlook"]["blocks"] == 8 and kept["outlook"]["projection"]["afford"] == 28
    s = M.summary(kept)
    assert s["text"].startswith("At the start the machine is busy. After 8 blocks") and not s["stopped"]
