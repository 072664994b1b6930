"""Before spending the budget (study/execute/machine_check.py, study/execute/budget_check.py): the busiest
processes from /proc text, the pre-check's three outcomes (start, waited, stop) with their
sentences, the record kept with the study, and the projection that stops a study whose
margin its budget cannot reach — with the advice it gives. Real runs with a CPU hog are in
test_busy_machine.py."""

import math

import pytest

from nearmetal.study.execute import budget_check as B
from nearmetal.study.execute import machine_check as M
from nearmetal.study.store.store import Store

pytestmark = pytest.mark.unit

STUDY = """
[study]
name = "s"
{extra}
[matrix]
mode = ["native"]
mpi = ["mpich"]
[[benchmark]]
kernel = "latency"
"""


def _cfg(extra=""):
    from nearmetal.study.plan import study_file as config_mod

    return config_mod.parse(STUDY.format(extra=extra))


def _stat(pid, comm, utime, stime):
    return f"{pid} ({comm}) R 1 1 1 0 -1 4194304 10 0 0 0 {utime} {stime} 0 0 20 0 1 0 100 0 0\n"


def test_process_cpu_is_read_past_a_comm_with_spaces_and_parentheses(tmp_path):
    for pid, comm, u, s in ((12, "stress", 500, 20), (34, "a) (b c", 7, 3)):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(_stat(pid, comm, u, s))
    (tmp_path / "56").mkdir()          # a process gone meanwhile: no stat
    (tmp_path / "self").mkdir()        # not a PID
    assert M._proc_cpu(str(tmp_path)) == {12: ("stress", 520), 34: ("a) (b c", 10)}


def test_the_busiest_processes_first_and_the_idle_and_excluded_left_out():
    before = {1: ("init", 0), 99: ("stress", 1000), 7: ("nearmetal", 0), 8: ("sshd", 100)}
    after = {1: ("init", 1), 99: ("stress", 1200), 7: ("nearmetal", 150), 8: ("sshd", 130), 5: ("new", 50)}
    rows = M.busiest(before, after, seconds=2.0, hz=100, exclude={7})
    assert rows == [{"pid": 99, "name": "stress", "cpus": 1.0}, {"pid": 8, "name": "sshd", "cpus": 0.15}]


BUSY = {"window_s": 2.0, "cpus": 2, "others_cpus": 1.02, "steal_pct": 0.0, "load": 1.4, "busy": True,
        "top": [{"pid": 1234, "name": "stress", "cpus": 0.99}]}
QUIET = dict(BUSY, others_cpus=0.01, busy=False, top=[])


def test_the_busy_sentence_names_the_processes():
    assert M.busy_sentence(BUSY) == ("the machine is busy: 1.0 of 2 CPUs used by other processes "
                                     "(pid 1234 'stress' 0.99)")
    assert "steal" in M.busy_sentence(dict(BUSY, steal_pct=12.0))


def test_a_quiet_machine_starts_at_once_and_says_nothing():
    said = []
    rec = M.precheck(_cfg(), said.append, take=lambda: QUIET)
    assert rec == {"sample": QUIET, "action": "start", "waited_s": 0.0, "text": ""} and said == []


def test_a_busy_machine_is_said_at_once_with_the_advice_and_the_study_starts():
    said = []
    rec = M.precheck(_cfg(), said.append, take=lambda: BUSY)
    assert rec["action"] == "start" and len(said) == 1
    assert "pid 1234 'stress'" in said[0] and "quiet = true" in said[0] and "first look" in said[0]


def test_quiet_true_waits_bounded_then_starts_or_stops_with_the_reason():
    clock = iter([0.0, 7.0, 0.0, 30.0])
    said = []
    rec = M.precheck(_cfg("quiet = true\nquiet_wait = 30"), said.append, take=lambda: BUSY,
                     wait=lambda limit: (True, 7.0), clock=lambda: next(clock))
    assert rec["action"] == "waited" and rec["waited_s"] == 7.0
    assert said[-1] == "⚠ study s: quiet after 7 s; starting"
    asked = []
    rec = M.precheck(_cfg("quiet = true\nquiet_wait = 30"), said.append, take=lambda: BUSY,
                     wait=lambda limit: (asked.append(limit), (False, 30.0))[1], clock=lambda: next(clock))
    assert asked == [30.0] and rec["action"] == "stop"
    assert rec["text"].startswith("Stopped before the first run: the machine is busy")
    assert "still after waiting 30 s (quiet_wait)" in rec["text"] and "--resume" in rec["text"]


def test_exclude_disturbed_on_a_busy_machine_stops_before_the_first_run():
    rec = M.precheck(_cfg("exclude_disturbed = true"), lambda m: None, take=lambda: BUSY)
    assert rec["action"] == "stop" and "leave every run taken now out" in rec["text"]


def test_no_proc_no_check():
    assert M.precheck(_cfg(), lambda m: None, take=lambda: None) is None


def test_the_record_is_kept_with_the_study_and_summarised(tmp_path):
    with Store(tmp_path / "s.db", what="test") as store:
        assert M.load(store, 1) is None and M.summary(None) is None
        M.record(store, 1, precheck={"action": "start", "text": "", "sample": QUIET})
        assert M.summary(M.load(store, 1)) is None  # nothing to say
        M.record(store, 1, stop={"text": "Stopped after 3 blocks", "elapsed_s": 12.5, "blocks": 3})
        s = M.summary(M.load(store, 1))
        assert s["text"] == "Stopped after 3 blocks" and s["stopped"] and s["precheck"]["action"] == "start"


# -- the projection --------------------------------------------------------------------------------

def _result(lo, hi, look=4):
    return {"ci_low": lo, "ci_high": hi, "look": look, "ratio": (lo + hi) / 2}


@pytest.mark.parametrize("lo, hi, n, margin, need", [
    (0.90, 1.10, 4, 0.03, 45),      # ±10% around 1: (0.10 / 0.03)^2 x 4 = 44.4
    (0.98, 1.02, 4, 0.03, 5),       # nearly there: one block more at least
    (1.10, 1.30, 4, 0.03, 5),       # a difference: ±10% around 1.20, 17% beyond the margin: (0.1/0.17)^2 x 4 < 5
    (1.00, 1.06, 4, 0.03, math.inf),  # centred on the margin
])
def test_blocks_needed_scale_with_the_square_of_the_interval(lo, hi, n, margin, need):
    got = B.needed_blocks(_result(lo, hi, n), n, margin)
    assert got == need


def test_a_point_without_an_interval_is_never_projected():
    assert B.needed_blocks({"ci_low": None, "ci_high": None}, 4, 0.03) is None
    p = B.project([("k", ("c1", "c0"), {"ci_low": None, "ci_high": None})], {}, 4, 0.03, 100, 1000)
    assert p["reachable"] and p["measured"] == 0


def test_reachable_while_one_point_fits_the_budget_unreachable_when_none_does():
    cell_s = {"v": 1.0, "b": 1.0}
    tight = ("k1", ("v", "b"), _result(0.99, 1.01))          # a few blocks more
    wide = ("k2", ("v", "b"), _result(0.60, 1.40))           # ±40%: ~710 blocks at ±3%
    assert B.project([tight, wide], cell_s, 4, 0.03, 120, 3000)["reachable"]
    p = B.project([wide, wide], cell_s, 4, 0.03, 120, 3000)
    assert not p["reachable"] and p["need_blocks"] > 240 and round(p["half_pct"]) == 40
    # the budget alone: 1000 blocks allowed, but only 100 s left for ~1400 s of runs
    assert not B.project([wide], cell_s, 4, 0.03, 1000, 100)["reachable"]
    assert B.project([wide], cell_s, 4, 0.03, 1000, 3000)["reachable"]
    # what is left would spend under MIN_STAKE_S: spent, not argued over
    small = B.project([wide], cell_s, 4, 0.03, 8, 3000)
    assert small["reachable"] and small["at_stake_s"] == 8.0 < B.MIN_STAKE_S


def test_the_stop_paragraph_gives_the_reason_and_what_would_help():
    cfg = _cfg("margin = 0.03\nmax_time = 600")
    p = B.project([("k", ("v", "b"), _result(0.75, 1.25))], {"v": 1.0, "b": 1.0}, 4, 0.03, 120, 560)
    text = B.stop_text(p, cfg, 40.0, 4, machine="the machine is busy: 1.0 of 2 CPUs used by other processes")
    assert text.startswith("Stopped after 4 blocks (40 s of runs): the machine is busy")
    for bit in ("±25% wide after 4 blocks", "±3% margin needs", "the budget allows 120 blocks and 560 s more",
                "quiet = true", "fewer variants", "widen the margin to ±", "raise max_time to"):
        assert bit in text, (bit, text)
    far = B.project([("k", ("v", "b"), _result(0.2, 1.8))], {"v": 1.0, "b": 1.0}, 4, 0.03, 120, 560)
    text = B.stop_text(far, cfg, 40.0, 4)
    assert "more than 1200 blocks" in text and "more time would not do it" in text and "raise max_time" not in text

