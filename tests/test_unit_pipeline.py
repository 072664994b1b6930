"""The study pipeline's stages and the records that cross them (study/records.py): the one
codec between records and the store (study/store/codec.py), the store status decided once, the
analysis spec decided at plan time and stored (the analysis never parses the study file
again), and further variants planned into an existing study (a stage after the analysis).
SQLite files in tmp_path; nothing is started."""

import json
import sqlite3

import pytest

from nearmetal.errors import NearmetalError
from nearmetal.study.plan import study_file as config_mod
from nearmetal.study.execute import runner
from nearmetal.study.store import codec
from nearmetal.analysis.analyze import analyze
from nearmetal.study.plan.plan import cells, make_plan
from nearmetal.study.records import FAILED, OK, TIMEOUT, Launched, RunResult, stored_status

pytestmark = pytest.mark.unit

STUDY = """\
[study]
name = "p"
repetitions = 2
warmup = 1
seed = 5
[matrix]
mode = ["native", "hybrid"]
mpi = ["mpich"]
ranks = [2]
[[benchmark]]
kernel = "latency"
name = "b|odd#name"
"""


def _prepared(tmp_path, text=STUDY):
    cfg = config_mod.parse(text, source="p.toml")
    store, sid, new = runner.open_study(cfg, text, tmp_path / "p.db", resume=False, say=lambda m: None)
    assert new
    return cfg, store, sid


def _finish_all(store, sid, value_of=lambda run: 1.0):
    for run in store.pending(sid):
        records = [{"metric": "latency", "unit": "us", "value": value_of(run), "point": {"size": 8}}]
        codec.store_result(store, run["id"], RunResult(OK, 0, ["x"], {}, None, "t", 0.5, None, records))


def test_planned_runs_go_through_the_store_and_come_back_as_the_same_records(tmp_path):
    cfg, store, sid = _prepared(tmp_path)
    with store:
        planned = make_plan(cfg, 5)
        benchmarks = {b.label: b for b in cfg.benchmark}
        back = [codec.run_spec(row, benchmarks) for row in store.pending(sid)]
        assert [(r.key, r.cell.key, r.block, r.position, r.repetition, r.warmup) for r in back] == \
               [(r.key, r.cell.key, r.block, r.position, r.repetition, r.warmup) for r in planned]
        assert all(r.run_id is not None and r.cell.benchmark is cfg.benchmark[0] for r in back)
        assert back[0].cell.variant == planned[0].cell.variant and "%7C" in back[0].key  # '|' in a name: encoded
        with pytest.raises(AttributeError) as e:  # dataclasses.FrozenInstanceError
            back[0].block = 3  # records are frozen
        assert "cannot assign" in str(e.value)


def test_a_run_of_a_benchmark_the_file_no_longer_has_is_a_one_line_error(tmp_path):
    cfg, store, sid = _prepared(tmp_path)
    with store:
        row = store.pending(sid)[0]
        with pytest.raises(NearmetalError) as e:
            codec.run_spec(row, {})
        assert "is not in the study file" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("status, exit_status, measured, stored", [
    ("ok", 0, True, OK), ("ok", 0, False, FAILED), ("failed", 3, False, FAILED), ("cancelled", -1, False, FAILED),
    ("timeout", None, False, TIMEOUT), ("timeout", None, True, TIMEOUT)])
def test_the_stored_status_is_decided_in_one_place(status, exit_status, measured, stored):
    assert stored_status(Launched(status, exit_status, "", "", 1.0), measured) == stored


def test_a_run_that_did_not_start_is_stored_failed_with_the_reason(tmp_path):
    cfg, store, sid = _prepared(tmp_path)
    with store:
        run = store.pending(sid)[0]
        assert codec.store_result(store, run["id"], RunResult.not_started("t", "no such image"))
        row = next(r for r in store.runs(sid) if r["id"] == run["id"])
        assert (row["status"], row["stderr_tail"], row["wall_s"]) == ("failed", "not started: no such image", 0.0)


def test_baselines_are_decided_at_plan_time_and_the_analysis_does_not_read_the_file_again(tmp_path):
    cfg, store, sid = _prepared(tmp_path)
    with store:
        decided = codec.stored_analysis_spec(store, sid)
        assert decided.baselines == {"native/mpich": "native/mpich",
                                     "hybrid/charliecloud/mpich/default": "native/mpich"}
        assert decided.looks == [2] and not decided.adaptive
        _finish_all(store, sid, lambda run: 2.0 if run["variant"].startswith("hybrid") else 1.0)
        before = analyze(store, n_boot=20)
        # the stored study file made unreadable: the analysis does not need it
        store.db.execute("UPDATE studies SET config_toml='[not toml' WHERE id=?", (sid,))
        store.db.commit()
        after = analyze(store, n_boot=20)
    assert [v["baseline"] for v in after["variants"]] == [v["baseline"] for v in before["variants"]] == \
           ["native/mpich", "native/mpich"]
    hybrid = [p for p in after["points"] if p["variant"].startswith("hybrid")]
    assert hybrid and all(p["baseline"] == "native/mpich" and p["comparison"] for p in hybrid)
    assert after["sequential"]["looks"] == [2]


def test_a_study_stored_before_analysis_specs_is_analysed_from_its_file(tmp_path):
    cfg, store, sid = _prepared(tmp_path)
    with store:
        _finish_all(store, sid)
        planned = analyze(store, n_boot=20)
        store.db.execute("DELETE FROM meta WHERE key != 'schema_version'")  # as an older nearmetal stored it
        store.db.commit()
        assert codec.stored_analysis_spec(store, sid) is None
        old = analyze(store, n_boot=20)
    assert [v["baseline"] for v in old["variants"]] == [v["baseline"] for v in planned["variants"]]
    assert old["sequential"] == planned["sequential"]
    with sqlite3.connect(tmp_path / "p.db") as db:
        assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == ("4",)


def test_further_variants_are_planned_into_a_study_once_with_their_baselines(tmp_path):
    cfg, store, sid = _prepared(tmp_path)
    with store:
        before = {r["run_key"] for r in store.runs(sid)}
        ablation = {"mode": "hybrid", "runtime": "charliecloud", "mpi": "mpich", "image": "default", "cold": True}
        added = runner.add_variants(cfg, store, sid, [ablation], say=lambda m: None)
        runs = store.runs(sid)
        new = [r for r in runs if r["run_key"] not in before]
        assert added == len(new) == 3  # one warm-up and two blocks of the one new cell
        assert {r["variant"] for r in new} == {"hybrid/charliecloud/mpich/default+cold"}
        assert min(r["position"] for r in new) > max(r["position"] for r in runs if r["run_key"] in before)
        assert json.loads(new[0]["variant_json"]) == ablation
        assert codec.stored_analysis_spec(store, sid).baselines["hybrid/charliecloud/mpich/default+cold"] == \
               "native/mpich"
        assert runner.add_variants(cfg, store, sid, [ablation], say=lambda m: None) == 0  # again: nothing added
        assert len(store.runs(sid)) == len(runs)
        assert len(cells(cfg)) == 2  # the study's own cells are unchanged


def test_an_unreadable_stored_analysis_spec_is_a_one_line_error(tmp_path):
    cfg, store, sid = _prepared(tmp_path)
    with store:
        store.set_meta(f"analysis spec of study {sid}", '{"baselines": {}, "unknown": 1}')
        with pytest.raises(NearmetalError) as e:
            analyze(store, n_boot=20)
    assert "stored analysis spec of study" in str(e.value) and "\n" not in str(e.value)
