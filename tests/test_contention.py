"""Contention detected and recorded (study/execute/contention.py): /proc parsing and the disturbed
rule on sample text, the store's run_load table (schema 3 and its migration), the analysis
and the reports (unit tier); then real runs while this test keeps the machine busy with
CPU burners of its own, and `quiet = true` (integration)."""

import json
import os
import sqlite3
import subprocess
import sys
import time

import pytest

from nearmetal.study.execute import contention as C
from nearmetal.study.store.store import SCHEMA_VERSION, Store

unit = pytest.mark.unit

STAT = """\
cpu  193242 5287 81876 524782 3693 0 1365 355 0 0
cpu0 77884 2164 33591 287530 843 0 235 179 0 0
cpu1 115358 3123 48284 237251 2850 0 1130 175 0 0
intr 7608298 0 0 0 0
ctxt 18144062
btime 1700000000
"""
LOADAVG = "1.93 1.06 0.83 2/94 918\n"


def snap(t, busy, steal=0, idle=0, load=0.5, self_s=0.0, children_s=0.0, cpus=2):
    return C.Snapshot(t, C.Stat(busy, steal, busy + steal + idle, cpus), load, self_s, children_s)


# -- /proc text and the rule (unit) ---------------------------------------------------------------

@unit
def test_parse_stat_and_loadavg():
    s = C.parse_stat(STAT)
    assert s.busy == 193242 + 5287 + 81876 + 0 + 1365   # user nice system irq softirq (guest is in user)
    assert s.steal == 355
    assert s.total == s.busy + 524782 + 3693 + 355
    assert s.cpus == 2
    assert C.parse_loadavg(LOADAVG) == 1.93


@unit
def test_parse_stat_of_an_old_kernel_and_garbage():
    s = C.parse_stat("cpu  10 0 5 100\ncpu0 10 0 5 100\n")  # 2.4-era: four fields, no steal
    assert (s.busy, s.steal, s.total, s.cpus) == (15, 0, 115, 1)
    with pytest.raises(ValueError):
        C.parse_stat("intr 1 2 3\n")
    assert C.snapshot(read=lambda path: "garbage") is None


@unit
def test_snapshot_reads_proc_text():
    texts = {"/proc/stat": STAT, "/proc/loadavg": LOADAVG}
    s = C.snapshot(read=texts.__getitem__)
    assert s.stat == C.parse_stat(STAT) and s.load == 1.93 and s.self_s >= 0 and s.children_s >= 0


@unit
@pytest.mark.parametrize("others, wall, steal, busy", [
    (0.0, 1.0, 0.0, False),
    (0.32, 1.0, 0.0, False),     # 0.25 CPU-s/s + 0.05 s + 3 sd of 2 CPUs' tick rounding (24.5 ms)
    (0.33, 1.0, 0.0, True),
    (0.08, 0.01, 0.0, True),     # a very short run: the slack decides
    (0.07, 0.01, 0.0, False),
    (2.0, 1.0, 0.0, True),       # two burners on two CPUs
    (0.0, 1.0, 5.0, False),
    (0.0, 1.0, 5.1, True),       # the hypervisor took more than 5% of the machine
])
def test_the_disturbed_rule(others, wall, steal, busy):
    assert C.is_disturbed(others, wall, steal, cpus=2) is busy


@unit
def test_the_slack_grows_with_the_cpus_whose_ticks_round():
    assert C.slack_s(2) == pytest.approx(0.05 + 0.0245, abs=1e-4)
    assert C.slack_s(128) == pytest.approx(0.05 + 0.196, abs=1e-3)
    assert C.slack_s(0) == C.slack_s(1)


@unit
def test_figures_subtract_the_run_and_nearmetal_itself():
    hz = 100
    before = snap(10.0, busy=1000, steal=10, idle=1000, load=0.4, self_s=1.0, children_s=5.0)
    # 2 s on 2 CPUs = 400 ticks: 300 busy (the run 1.8 s, nearmetal 0.2 s, others 1.0 s), 8 steal, 92 idle
    after = snap(12.0, busy=1300, steal=18, idle=1092, load=1.5, self_s=1.2, children_s=6.8)
    f = C.figures(before, after, hz=hz)
    assert f["others_cpu_s"] == pytest.approx(1.0) and f["own_cpu_s"] == pytest.approx(1.8)
    assert f["steal_pct"] == pytest.approx(2.0) and f["wall_s"] == pytest.approx(2.0)
    assert (f["load_start"], f["load_end"], f["cpus"], f["busy"]) == (0.4, 1.5, 2, 1)
    quiet = snap(12.0, busy=1200, steal=10, idle=1200, self_s=1.0, children_s=7.3)
    g = C.figures(before, quiet, hz=hz)  # the run used more than the ticks say: never negative
    assert g["others_cpu_s"] == 0.0 and g["busy"] == 0


@unit
def test_wait_quiet_is_bounded():
    clock = [0.0]

    def sleep(s):
        clock[0] += s

    busy_machine = iter(range(0, 10**9, 100))   # every window: 100 busy ticks = 1 CPU-s in 0.5 s
    quiet, waited = C.wait_quiet(3.0, take=lambda: snap(clock[0], next(busy_machine)), sleep=sleep,
                                 clock=lambda: clock[0])
    assert quiet is False and 2.5 <= waited <= 3.0
    quiet, waited = C.wait_quiet(3.0, take=lambda: snap(clock[0], 7), sleep=sleep, clock=lambda: clock[0])
    assert quiet is True and waited == 0.5
    assert C.wait_quiet(3.0, take=lambda: None) == (None, 0.0)


@unit
def test_summary_and_sentence():
    row = {"run_key": "k", "variant": "native/mpich", "busy": 0, "cpus": 2, "load_start": 0.5, "load_end": 0.7,
           "steal_pct": 0.0, "others_cpu_s": 0.1, "wall_s": 1.0, "quiet": None}
    assert C.summary([]) is None
    clean = C.summary([row])
    assert clean["disturbed"] == 0 and clean["text"] == ""
    bad = dict(row, run_key="k2", busy=1, load_start=7.2, others_cpu_s=3.6, wall_s=2.0, quiet=0)
    s = C.summary([row, bad, dict(bad, run_key="k3", variant="bind/mpich", others_cpu_s=1.0)])
    assert (s["runs"], s["disturbed"], s["max_load"], s["max_others_pct"], s["not_quiet"]) == (3, 2, 7.2, 180.0, 2)
    assert s["by_variant"] == {"native/mpich": 1, "bind/mpich": 1} and s["disturbed_runs"] == ["k2", "k3"]
    assert s["text"] == ("2 of 3 measured runs were taken on a busy machine (load up to 7.2 on 2 CPUs, other processes used "
                         "up to 180% CPU): their points are marked ⚠; 2 started before the machine was quiet "
                         "(quiet_wait ran out).")
    assert "left out of the statistics" in C.summary([bad], excluded=True)["text"]


# -- the store: run_load, schema 3 (unit: SQLite is a library) -----------------------------------------

PLANNED = [{"run_key": f"b|n=2|t=1|native/mpich#rep{i}", "position": i, "block": i, "repetition": i, "warmup": False,
            "benchmark": "b", "kernel": "latency", "variant": "native/mpich",
            "variant_json": {"mode": "native", "mpi": "mpich"}, "ranks": 2, "threads": 1} for i in range(3)]
LOAD = {"load_start": 7.2, "load_end": 6.9, "steal_pct": 0.4, "others_cpu_s": 1.8, "own_cpu_s": 0.9, "cpus": 2,
        "busy": 1, "quiet": 0, "quiet_wait_s": 1.5, "wall_s": 1.0}


@unit
def test_finish_run_stores_the_load_in_the_same_transaction(tmp_path):
    with Store(tmp_path / "s.db", what="test") as store:
        sid = store.create_study("s", "", 1, 0.03, {}, "0", "now", planned=PLANNED)
        first, second, third = store.pending(sid)
        assert store.finish_run(first["id"], "ok", 0, [], {}, None, "t", 1.0, None, [], load=LOAD)
        assert not store.finish_run(first["id"], "ok", 0, [], {}, None, "t", 1.0, None, [], load=LOAD)  # once
        assert store.finish_run(second["id"], "ok", 0, [], {}, None, "t", 2.0, None, [])  # not measured: no row
        (row,) = store.run_load(sid)
        assert {k: row[k] for k in LOAD if k != "wall_s"} == {k: v for k, v in LOAD.items() if k != "wall_s"}
        assert (row["run_key"], row["variant"], row["wall_s"]) == (first["run_key"], "native/mpich", 1.0)
        with pytest.raises(Exception):  # a failing insert rolls the run back too: it stays planned
            store.finish_run(third["id"], "ok", 0, [], {}, None, "t", 1.0, None, [], load={"busy": None})
        assert store.counts(sid) == {"ok": 2, "planned": 1}


@unit
@pytest.mark.parametrize("old", [1, 2, 3])
def test_older_stores_are_read_as_they_are_and_migrated_by_writers(tmp_path, old):
    p = tmp_path / f"v{old}.db"
    with Store(p, what="test") as store:
        store.create_study("s", "", 1, 0.03, {}, "0", "now", planned=PLANNED)
    db = sqlite3.connect(p)
    db.executescript("DROP TABLE run_evidence;" + ("DROP TABLE run_load;" if old <= 2 else "")
                     + ("DROP TABLE jobs;" if old == 1 else "")
                     + f"UPDATE meta SET value='{old}' WHERE key='schema_version';")
    db.close()
    before = p.read_bytes()
    with Store(p, readonly=True) as reader:
        assert reader.evidence(1) == [] and (old == 3 or reader.run_load(1) == [])
    assert p.read_bytes() == before
    with Store(p, what="test") as writer:  # one step from 1, 2 or 3 to 4, in place
        assert writer.finish_run(writer.pending(1)[0]["id"], "ok", 0, [], {}, None, "t", 1.0, None, [], load=LOAD)
        assert len(writer.run_load(1)) == 1
    db = sqlite3.connect(p)
    assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION) == "4"
    assert {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")} >= {"jobs", "run_load",
                                                                                             "run_evidence"}
    db.close()


# -- analysis and reports (unit) --------------------------------------------------------------------

STUDY = """\
[study]
name = "s"
repetitions = 3
warmup = 0
seed = 1
{extra}
[matrix]
mode = ["native"]
mpi = ["mpich"]

[[benchmark]]
kernel = "latency"
name = "b"
"""


def _analysed(tmp_path, extra=""):
    from nearmetal.study.plan import study_file as config_mod
    from nearmetal.analysis.analyze import analyze
    from nearmetal.study.plan.plan import make_plan
    from nearmetal.study.store.codec import planned_row as _row

    text = STUDY.format(extra=extra)
    planned = [_row(r) for r in make_plan(config_mod.parse(text), 1)]
    with Store(tmp_path / f"a{len(extra)}.db", what="test") as store:
        sid = store.create_study("s", text, 1, 0.03, {"mode": "native"}, "0", "now", planned=planned)
        for i, run in enumerate(store.pending(sid)):
            rec = [{"metric": "latency", "unit": "us", "value": 1.0 + i, "point": {"size": 8}}]
            store.finish_run(run["id"], "ok", 0, [], {}, None, "t", 1.0, None, rec,
                             load=dict(LOAD, busy=int(i == 2), others_cpu_s=1.8 if i == 2 else 0.0))
        return analyze(store, n_boot=50)


@unit
def test_analysis_marks_disturbed_runs_and_keeps_them_by_default(tmp_path):
    a = _analysed(tmp_path)
    (p,) = a["points"]
    assert p["values"] == [1.0, 2.0, 3.0] and p["disturbed"] == 1
    c = a["contention"]
    assert (c["runs"], c["disturbed"], c["excluded"], c["by_variant"]) == (3, 1, False, {"native/mpich": 1})
    assert c["text"].startswith("1 of 3 measured runs were taken on a busy machine (load up to 7.2 on 2 CPUs")


@unit
def test_exclude_disturbed_leaves_them_out_of_the_statistics(tmp_path):
    a = _analysed(tmp_path, extra="exclude_disturbed = true")
    (p,) = a["points"]
    assert p["values"] == [1.0, 2.0] and p["stats"]["n"] == 2 and p["disturbed"] == 1
    assert a["contention"]["excluded"] is True and "left out of the statistics" in a["contention"]["text"]


@unit
def test_reports_print_the_sentence_and_mark_the_rows(tmp_path):
    import io

    from rich.console import Console

    from nearmetal.report.html import _full_tables, _template
    from nearmetal.report import points as PT
    from nearmetal.report.terminal import render_terminal

    a = _analysed(tmp_path)
    buf = io.StringIO()
    render_terminal(a, Console(file=buf, width=200, color_system=None))
    text = buf.getvalue()
    lines = text.splitlines()
    where = next(i for i, line in enumerate(lines) if "⚠ 1 of 3 measured runs were taken on a busy machine" in line)
    assert where < next(i for i, line in enumerate(lines) if "lower is better" in line)  # before the tables
    assert "native/mpich ⚠" in text
    (table,) = _full_tables(PT.group_points(a["points"]), a)
    assert table["rows"][0]["disturbed"] == 1
    html = _template().render(study=a["study"], runs=a["runs"], contention_text=a["contention"]["text"],
                              tables=[table], summaries=[], variants=[], verdicts=PT.VERDICTS, colors={}, labels={})
    assert '<p class="busy">⚠ 1 of 3 measured runs' in html and "of its runs were taken on a busy machine\">⚠" in html


# -- real runs (integration) --------------------------------------------------------------------------

BURN = "import time\nwhile True: pass\n"


class Burners:
    """n CPU-burning processes of the test's own, ended (and reaped) however the test ends."""

    def __init__(self, n):
        self.n, self.procs = n, []

    def __enter__(self):
        self.procs = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(self.n)]
        time.sleep(0.3)
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()


def _study(tmp_path, name, reps, extra=""):
    """A tiny real study (native latency, 8 B), planned and run in this process as
    `nearmetal study` does (without its report); its run_load rows joined with the runs."""
    from nearmetal.study.plan import study_file as config_mod
    from nearmetal.study.execute import runner
    from nearmetal.study.execute.executor import Executor

    text = (STUDY.replace('name = "s"', f'name = "{name}"').replace("repetitions = 3", f"repetitions = {reps}")
            .format(extra=extra).replace('name = "b"', 'name = "b"\nargs = ["-m", "8:8", "-i", "200"]'))
    cfg = config_mod.parse(text, source=f"{name}.toml")
    store, sid, _ = runner.open_study(cfg, text, tmp_path / f"{name}.db", resume=False, say=lambda m: None)
    with store:
        ex = Executor(cfg, store, sid, progress=False)
        assert [ex.execute(row) for row in store.pending(sid)] == ["ok"] * reps
        con = store.db
        return con.execute("SELECT l.*, r.wall_s, r.status FROM run_load l JOIN runs r ON r.id = l.run_id").fetchall()


def test_the_run_tree_is_measured_with_its_orphans(tmp_path):
    """The job's CPU time reaches this process through nm-supervise's subreaper even for a
    process orphaned by the launcher (the double fork of a daemon): it is the run's, not others'."""
    from nearmetal import supervise

    orphan = ("import os, time\n"
              "if os.fork() == 0:\n"
              "    if os.fork() == 0:\n"
              "        while time.process_time() < 0.3: pass\n"
              "    os._exit(0)\n"
              "os.wait()\n")  # the launcher waits for its child only; the grandchild is orphaned
    before = C.snapshot()
    proc = subprocess.Popen(supervise.wrap([sys.executable, "-c", orphan]), start_new_session=True)
    proc.wait()
    after = C.snapshot()
    f = C.figures(before, after)
    assert f["own_cpu_s"] >= 0.3, f


def test_runs_next_to_cpu_burners_are_recorded_and_flagged(tmp_path):
    with Burners(2):
        rows = _study(tmp_path, "burnt", reps=2)
    assert len(rows) == 2 and all(r["status"] == "ok" for r in rows)
    # 2 burners on this machine: ~1 CPU-second per second besides the run's 2 ranks on 2 cores;
    # at least 0.5 on a host that steals some of it (measured 0.71 with 3% steal), twice the busy rule's 0.25
    for r in rows:
        assert r["others_cpu_s"] / r["wall_s"] >= 0.5, dict(r)
        assert r["busy"] == 1 and r["cpus"] == (os.cpu_count() or 1) and r["quiet"] is None
        assert r["own_cpu_s"] > 0 and r["load_end"] > 0


def test_a_run_on_a_quiet_machine_is_not_flagged(tmp_path):
    quiet, waited = C.wait_quiet(15)
    if not quiet:
        pytest.skip(f"the machine was busy without this test's burners for {waited:.0f} s (other work running)")
    rows = _study(tmp_path, "calm", reps=1)
    (r,) = rows
    if r["busy"] and not C.wait_quiet(0)[0]:
        pytest.skip("other work started during the run")
    assert r["busy"] == 0, dict(r)


def test_quiet_waits_at_most_quiet_wait_and_records_it(tmp_path):
    with Burners(2):
        rows = _study(tmp_path, "hush", reps=1, extra="quiet = true\nquiet_wait = 1")
    (r,) = rows
    assert r["quiet"] == 0 and r["busy"] == 1
    assert 0.4 <= r["quiet_wait_s"] <= 1 + C.QUIET_WINDOW_S + 0.5, dict(r)
