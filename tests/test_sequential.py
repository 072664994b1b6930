"""Adaptive repetitions (study/plan/sequential.py, runner.extend): the looks, the error rates of
the sequential procedure by simulation, the blocks added only for undecided cells, and a
real adaptive study that stops early where the answer is clear."""

import json
import sqlite3
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import assert_runs_ok, nearmetal

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))


@pytest.mark.unit
def test_the_looks_grow_by_half_and_end_at_the_maximum():
    from nearmetal.study.plan.sequential import schedule

    assert schedule(5, 30) == [5, 8, 12, 18, 27, 30]
    assert schedule(5, 5) == [5]
    assert schedule(2, 4) == [2, 3, 4]


@pytest.mark.unit
def test_fixed_repetitions_are_one_look_at_the_usual_level():
    from nearmetal.study.plan.study_file import parse
    from nearmetal.study.plan.sequential import looks_of

    text = '[study]\nname = "s"\n{}\n[[benchmark]]\nkernel = "latency"\n'
    assert looks_of(parse(text.format("repetitions = 7")).study) == ([7], 0.05)
    looks, alpha = looks_of(parse(text.format("")).study)
    assert looks == [5, 8, 12, 18, 27, 41, 62, 93, 120] and alpha == pytest.approx(0.007001)


@pytest.mark.unit
def test_the_level_per_look_is_pococks_for_the_schedule():
    """Pocock's published constant for 5 equally spaced looks at 5% two-sided is 2.413
    (Jennison & Turnbull 2000, table 2.1): nominal 1.58%. For any schedule the level lies
    between Bonferroni's alpha/K and the boundary's 4%, never above the exact one."""
    from scipy.special import ndtr

    from nearmetal.study.plan.sequential import alpha_per_look, schedule

    assert 0.0156 < alpha_per_look((1, 2, 3, 4, 5), 0.05) <= 2 * ndtr(-2.413)
    assert alpha_per_look((5,)) == 0.05  # one look: the classic 5%
    for looks in (tuple(schedule(5, 60)), tuple(schedule(5, 120)), (3, 5, 8, 10)):
        assert 0.05 / len(looks) < alpha_per_look(looks) < 0.04
    assert alpha_per_look((5, 8)) == 0.025  # two looks: Pocock at 4% (2.45%) is below Bonferroni at 5%


@pytest.mark.unit
def test_the_level_per_look_holds_the_overall_error_by_simulation():
    """Sums of independent normal steps (one per block), looked at the quickstart's block
    counts at Pocock's level: some look crosses in 4% of the null paths (the boundary's
    share of the 5%), not more; Bonferroni's alpha/K gives ~3.3%: the room the boundary uses."""
    import numpy as np
    from scipy.special import ndtri

    from nearmetal.study.plan.sequential import alpha_per_look, schedule

    looks = schedule(5, 60)
    c = ndtri(1 - alpha_per_look(tuple(looks)) / 2)
    rng = np.random.default_rng(7)
    steps = rng.standard_normal((200_000, len(looks))) * np.sqrt(np.diff([0] + looks))
    z = np.abs(np.cumsum(steps, axis=1) / np.sqrt(looks))
    crossed = float(np.mean(z.max(axis=1) >= c))
    assert 0.035 < crossed <= 0.0415, crossed
    bonferroni = float(np.mean(z.max(axis=1) >= ndtri(1 - 0.05 / (2 * len(looks)))))
    assert bonferroni < 0.04


@pytest.mark.unit
@pytest.mark.parametrize("line, expect", [
    ("repetitions = 5\nmax_repetitions = 9", "study: repetitions fixes the number of blocks; max_repetitions apply only"),
    ("min_repetitions = 9\nmax_repetitions = 6", "study: min_repetitions (9) is more than max_repetitions (6)"),
    ("max_time = 0", "study.max_time: Input should be greater than 0"),
])
def test_adaptive_settings_are_checked(line, expect):
    from nearmetal.errors import NearmetalError
    from nearmetal.study.plan.study_file import parse

    with pytest.raises(NearmetalError) as e:
        parse(f'[study]\nname = "s"\n{line}\n[[benchmark]]\nkernel = "latency"\n', source="t.toml")
    assert expect in str(e.value).replace("Value error, ", "")


# No unit mark although it starts no process: 1,600 simulated points take ~8 s, a quarter of the
# unit tier, which must stay seconds; it runs in the second tier.
def test_simulated_error_rates_and_power():
    """Many A/A points through the whole procedure (the default looks up to 120 blocks):
    false slower/faster well under 5%; a difference exactly at the margin called equivalent
    under 5%; a 5% slowdown (beyond the 3% margin) found in at least 80%. The same bounds where
    the time runs out early and the final look spends the rest of alpha."""
    from sequential_sim import simulate

    aa, aa_blocks = simulate(300, noise=0.02, block=0.02, effect=0.0, seed=1, max_n=120)
    assert aa["slower"] + aa["faster"] <= 0.05
    assert aa["equivalent"] >= 0.9 and aa_blocks < 30
    edge, _ = simulate(1000, noise=0.02, block=0.02, effect=0.03, seed=2, max_n=120)
    assert edge["equivalent"] <= 0.05 and edge["faster"] == 0
    slow, slow_blocks = simulate(300, noise=0.02, block=0.02, effect=0.05, seed=3, max_n=120)
    assert slow["slower"] >= 0.8 and slow["equivalent"] <= 0.05 and slow_blocks < 60
    # a study whose time runs out after 18 of 60 blocks: its final look spends the rest of alpha
    # and keeps both error rates (4,000 points: 4.6% equivalent at the margin, 4.3% ending at 60)
    aa, _ = simulate(400, noise=0.02, block=0.02, effect=0.0, seed=4, max_n=60, ends_at=18)
    assert aa["slower"] + aa["faster"] <= 0.05 and aa["equivalent"] >= 0.8
    edge, _ = simulate(2000, noise=0.02, block=0.02, effect=0.03, seed=0, max_n=60, ends_at=18)
    assert edge["equivalent"] <= 0.05 and edge["slower"] >= 0.7


@pytest.mark.unit
def test_a_point_keeps_the_verdict_of_the_look_that_decided_it():
    from nearmetal.study.plan.sequential import decide

    rng = np.random.default_rng(5)
    base = {b: 100 * (1 + rng.normal(0, 0.002)) for b in range(12)}
    var = {b: v * 1.001 for b, v in base.items()}   # equivalent from the first look
    first = decide(base, var, [5, 8, 12], 0.05 / 3, 0.03, False)
    assert first["decided"] and first["verdict"] == "equivalent" and first["look"] == 5
    assert first["ci_level"] == pytest.approx(1 - 2 * 0.05 / 3)
    partial = {b: v for b, v in var.items() if b < 10}  # blocks 10-11 not yet run: no look beyond 8
    noisy = {b: v * (1 + (0.3 if b % 2 else -0.3)) for b, v in partial.items()}
    assert decide(base, noisy, [5, 8, 12], 0.05 / 3, 0.03, False)["look"] == 8


def _adaptive_study(tmp_path, min_n=3, max_n=8):
    f = tmp_path / "adaptive.toml"
    f.write_text(f"""
[study]
name = "adaptive"
warmup = 1
timeout = 120
seed = 4
min_repetitions = {min_n}
max_repetitions = {max_n}
[baseline]
variant = "shm"
[[variant]]
name = "shm"
mode = "native"
mpi = "mpich"
[[variant]]
name = "tcp"
mode = "native"
mpi = "mpich"
env = {{ UCX_TLS = "tcp,self" }}  # MPICH's UCX over TCP loopback instead of shared memory
[[benchmark]]
kernel = "latency"
args = ["-m", "65536:65536", "-i", "300"]
""")
    return f


def test_an_adaptive_study_adds_blocks_only_while_points_are_open(tmp_path, host_mpis):
    f, db = _adaptive_study(tmp_path), tmp_path / "a.db"
    dry = nearmetal("study", f, "--dry-run")
    assert dry.returncode == 0 and "adaptive repetitions: these 3 blocks first" in dry.stdout
    assert "looks at 3, 5, 8" in dry.stdout
    assert "# at 3 blocks the rank test cannot give a p below the level" in dry.stdout  # 3 a side: p >= 0.1
    out = nearmetal("study", f, "--db", db, "--no-progress", "--out", tmp_path, timeout=600)
    assert out.returncode == 0, out.stderr
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT variant, block, status FROM runs WHERE warmup = 0").fetchall()
        warmups = [s for (s,) in c.execute("SELECT status FROM runs WHERE warmup = 1")]
    blocks = max(b for _, b, _ in rows) + 1
    # One run may hang (MPICH over UCX's TCP, conftest.assert_runs_ok). After each cell's
    # warm-up, a measured run is ended at 10x its cell's median (at least 30 s: the runs take
    # ~0.4 s), stored hung and run once more; a warm-up has only the 120 s timeout.
    keys = assert_runs_ok(db)
    assert blocks in (3, 5, 8), keys
    assert len(warmups) == 2 and set(warmups) <= {"ok", "timeout"}, warmups
    rows = [r for r in rows if r[2] == "ok"]
    per_variant = {v: sorted(b for w, b, _ in rows if w == v) for v in ("shm", "tcp")}
    assert per_variant["shm"] == per_variant["tcp"] == list(range(blocks))  # the baseline stays paired
    analysis = json.loads(nearmetal("report", "--db", db, "--format", "json", "--out", tmp_path).returncode
                          and "{}" or (tmp_path / "analysis.json").read_text())
    seq = analysis["sequential"]
    assert seq["adaptive"] and seq["looks"] == [3, 5, 8] and seq["blocks"] == blocks
    [tcp] = [p for p in analysis["points"] if p["variant"] == "tcp"]
    decided = tcp["comparison"]["decided"]
    if blocks < 8:  # it stopped early: because the point was decided at the last look
        assert decided and tcp["comparison"]["look"] == blocks
    said = " ".join(out.stderr.split())
    assert ("every compared point is decided" in said) or ("max_repetitions (8 blocks) reached" in said)


@pytest.mark.unit
def test_extend_plans_the_next_look_for_open_cells_only(tmp_path):
    """With a store holding 5 blocks in which one variant is clearly decided and another is
    pure noise, extend() adds blocks 6-8 for the noisy variant and its baseline only, and
    the same again when asked twice (the plan is derived from the stored runs)."""
    from nearmetal.study.execute import runner
    from nearmetal.study.plan.study_file import parse
    from nearmetal.study.store.store import Store

    cfg = parse("""
[study]
name = "x"
warmup = 0
seed = 1
min_repetitions = 5
max_repetitions = 8
[baseline]
variant = "base"
[[variant]]
name = "base"
mode = "native"
mpi = "mpich"
[[variant]]
name = "same"
mode = "native"
mpi = "mpich"
[[variant]]
name = "noisy"
mode = "native"
mpi = "mpich"
[[benchmark]]
kernel = "latency"
""")
    store, study_id, _ = runner.open_study(cfg, "text", tmp_path / "x.db", resume=False)
    rng = np.random.default_rng(0)
    for row in store.pending(study_id):
        base = 10.0 * (1 + rng.normal(0, 0.001))
        value = {"base": base, "same": base * 1.0005, "noisy": base * rng.uniform(0.5, 1.5)}[row["variant"]]
        store.finish_run(row["id"], "ok", 0, [], {}, None, "t", 0.1, None,
                         [{"metric": "latency", "unit": "us", "value": value, "point": {"size": 8}}])
    said = []
    added = runner.extend(cfg, store, study_id, say=said.append)
    pending = store.pending(study_id)
    assert added == len(pending) == 6 and {r["variant"] for r in pending} == {"base", "noisy"}
    assert sorted({r["block"] for r in pending}) == [5, 6, 7]
    assert said == ["after 5 blocks: 2 cells still open; blocks 6-8 for them (6 runs)"]
    assert runner.extend(cfg, store, study_id, say=said.append) == 0  # runs still planned: nothing more
    store.close()


@pytest.mark.unit
def test_a_resumed_study_keeps_the_level_it_was_planned_with(tmp_path, monkeypatch):
    """A study planned with Bonferroni's alpha/K (stored in its analysis spec before Pocock's
    level came in) is extended at that level, as its report analyses it, not at this version's."""
    from dataclasses import replace

    from nearmetal.study.execute import runner
    from nearmetal.study.plan import sequential
    from nearmetal.study.plan.study_file import parse
    from nearmetal.study.store import codec

    cfg = parse('[study]\nname = "x"\nwarmup = 0\nseed = 1\nmin_repetitions = 5\nmax_repetitions = 8\n'
                '[[benchmark]]\nkernel = "latency"\n[matrix]\nmode = ["native", "hybrid"]\n'
                'runtime = ["charliecloud"]\nmpi = ["mpich"]\n')
    store, study_id, _ = runner.open_study(cfg, "text", tmp_path / "x.db", resume=False)
    spec = codec.stored_analysis_spec(store, study_id)
    assert spec.alpha_per_look == sequential.alpha_per_look((5, 8))
    codec.store_analysis_spec(store, study_id, replace(spec, alpha_per_look=0.05 / 7))
    for row in store.pending(study_id):
        store.finish_run(row["id"], "ok", 0, [], {}, None, "t", 0.1, None,
                         [{"metric": "latency", "unit": "us", "value": 10.0 + row["block"], "point": {"size": 8}}])
    levels = []
    real = sequential.decide
    monkeypatch.setattr(sequential, "decide", lambda *a, **k: levels.append(a[3]) or real(*a, **k))
    runner.extend(cfg, store, study_id, say=lambda line: None)
    assert levels and set(levels) == {0.05 / 7}
    store.close()


@pytest.mark.unit
@pytest.mark.parametrize("max_time, outcome", [(10.0, "look"), (2.0, "shortened"), (1.6, "ends")])
def test_max_time_is_checked_against_what_the_next_look_will_take(tmp_path, max_time, outcome):
    """5 blocks of 3 cells at 0.1 s each have spent 1.5 s; the next look (blocks 6-8 of the 3
    open cells: 9 runs, 0.1 s each by the cells' mean so far) would bring it to 2.4 s. A 10 s
    budget takes it; a 2 s budget has time for one block of it (0.3 s): that is the final look,
    shortened; a 1.6 s budget has time for none and stops the study now, with the reason,
    instead of one look past it."""
    from nearmetal.analysis.analyze import analyze
    from nearmetal.study.execute import runner
    from nearmetal.study.plan.sequential import final_alpha
    from nearmetal.study.plan.study_file import parse
    from nearmetal.study.store.store import Store

    cfg = parse(f"""
[study]
name = "x"
warmup = 0
seed = 1
min_repetitions = 5
max_repetitions = 8
max_time = {max_time}
[baseline]
variant = "base"
[[variant]]
name = "base"
mode = "native"
mpi = "mpich"
[[variant]]
name = "noisy"
mode = "native"
mpi = "mpich"
[[variant]]
name = "other"
mode = "native"
mpi = "mpich"
[[benchmark]]
kernel = "latency"
""")
    store, study_id, _ = runner.open_study(cfg, "text", tmp_path / "x.db", resume=False)
    rng = np.random.default_rng(0)

    def run_pending():
        for row in store.pending(study_id):
            value = 10.0 * rng.uniform(0.5, 1.5) if row["variant"] != "base" else 10.0
            store.finish_run(row["id"], "ok", 0, [], {}, None, "t", 0.1, None,
                             [{"metric": "latency", "unit": "us", "value": value, "point": {"size": 8}}])

    run_pending()
    said = []
    added = runner.extend(cfg, store, study_id, say=said.append)
    final = analyze(store)["sequential"]["final"]
    if outcome == "look":
        assert added == 9 and said == ["after 5 blocks: 3 cells still open; blocks 6-8 for them (9 runs)"]
        assert final is None  # the study goes on: no look is final yet
    elif outcome == "ends":
        assert added == 0 and not store.pending(study_id)
        assert said == ["max_time (1.6 s of runs): 2 s spent after 5 blocks; the next look (blocks 6-8, about 1 s) "
                        "would pass it; 3 cells still open"], said
        # where it ended is kept: its one look is final, at what the look not taken would have spent
        assert final == {"blocks": 5, "alpha": final_alpha((5,), (5, 8)), "reason": "max_time",
                         "ci_level": pytest.approx(1 - 2 * final_alpha((5,), (5, 8)))}
        assert final["alpha"] > 0.025
        # resumed with more time (an earlier version ended studies so, with time left): it stays ended
        raised = cfg.model_copy(update={"study": cfg.study.model_copy(update={"max_time": 10.0})})
        assert runner.extend(raised, store, study_id, say=said.append) == 0 and not store.pending(study_id)
        assert analyze(store)["sequential"]["final"] == final
    else:
        assert added == 3 and said == [
            "max_time (2 s of runs): 2 s spent after 5 blocks; the next look (blocks 6-8, about 1 s) would pass "
            "it: a shortened final look instead, block 6 for the 3 cells still open (3 runs, about 0 s)"], said
        assert final is None  # its blocks are still to run
        run_pending()
        said.clear()
        assert runner.extend(cfg, store, study_id, say=said.append) == 0 and not store.pending(study_id)
        assert said == ["max_time (2 s of runs): 2 s spent; the study ended after 6 blocks, its shortened final "
                        "look"], said
        a = analyze(store)
        # the shortened look is the final one, at the level that keeps the planned looks' false alarms
        assert a["sequential"]["final"] == {"blocks": 6, "alpha": final_alpha((5, 6), (5, 8)), "reason": "max_time",
                                            "ci_level": pytest.approx(1 - 2 * final_alpha((5, 6), (5, 8)))}
        assert final_alpha((5,), (5, 8)) > final_alpha((5, 6), (5, 8)) > final_alpha((5, 8), (5, 8))
        compared = [p["comparison"] for p in a["points"] if p["comparison"]]
        assert compared and all(c["look"] in (5, 6) for c in compared)
        assert any(c["look"] == 6 and c["final"] for c in compared)  # an open point is decided at it
        # resumed, even with more time: it stays ended where it ended, its final look the same
        raised = cfg.model_copy(update={"study": cfg.study.model_copy(update={"max_time": 10.0})})
        assert runner.extend(raised, store, study_id, say=said.append) == 0 and not store.pending(study_id)
        assert analyze(store)["sequential"]["final"] == a["sequential"]["final"]
    store.close()


def test_piped_output_shows_progress_lines(tmp_path, host_mpis):
    """A study whose output is not a terminal (CI logs) prints plain progress lines now and
    then — runs done, failures, time — instead of a bar nobody sees."""
    f = tmp_path / "p.toml"
    f.write_text('[study]\nname = "piped"\nrepetitions = 3\nwarmup = 0\n[matrix]\nmode = ["native"]\n'
                 'mpi = ["mpich"]\n[[benchmark]]\nkernel = "mpi-info"\n')
    out = nearmetal("study", f, "--db", tmp_path / "p.db", "--out", tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = [l for l in out.stderr.splitlines() if l.startswith("piped: ")]
    assert lines[-1].startswith("piped: 3/3 runs, 0 failed, ") and len(lines) == 3, out.stderr
    assert "about" in lines[0] and "to go" in lines[0]


@pytest.mark.unit
@pytest.mark.parametrize("rows, allowed", [
    ([("c#rep0", "ok", 0), ("c#rep1", "hung", 0), ("c#rep1~again", "ok", 0)], True),
    ([("c#warmup0", "timeout", 1), ("c#rep0", "ok", 0)], True),
    ([("c#rep0", "ok", 0), ("c#rep1", "hung", 0), ("c#rep1~again", "hung", 0)], False),  # the repeat too
    ([("c#rep0", "hung", 0), ("c#rep0~again", "ok", 0), ("c#warmup0", "timeout", 1)], False),  # two mishaps
    ([("c#rep0", "failed", 0)], False),
    ([("c#rep0", "timeout", 0)], False),  # a measured run's time-out is not a handled hang
])
def test_the_suites_tolerance_of_a_hung_run_is_one_handled_mishap(tmp_path, rows, allowed):
    db = tmp_path / "s.db"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE runs (run_key TEXT, status TEXT, warmup INTEGER, stderr_tail TEXT)")
        c.executemany("INSERT INTO runs VALUES (?, ?, ?, '')", rows)
    if allowed:
        assert assert_runs_ok(db) == {k: s for k, s, _ in rows}
    else:
        with pytest.raises(AssertionError):
            assert_runs_ok(db)
