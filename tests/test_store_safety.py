"""The results store under bad input and concurrency (issue 10): bad databases, read-only
reads, imports that fail, one runner per database, runs never stored twice, the jobs
table and its schema migration. Real SQLite files, real `nearmetal` processes."""

import hashlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from conftest import NEARMETAL, assert_one_line_error, nearmetal
from nearmetal.errors import NearmetalError
from nearmetal.study.store.store import SCHEMA_VERSION, Store

CSV = ("variant,metric,unit,size,value\n"
       + "".join(f"{v},t,s,{s},{1.0 + 0.01 * i + (0.5 if v == 'slow' else 0)}\n"
                 for i in range(4) for v in ("base", "slow") for s in (8, 64)))

STUDY = """
[study]
name = "{name}"
repetitions = {reps}
warmup = 0
timeout = 60
seed = 11

[matrix]
mode = ["native"]
mpi = ["openmpi", "mpich"]
ranks = [1]

[[benchmark]]
kernel = "startup"
"""

IO_STUDY = """
[study]
name = "tio"
repetitions = 1
[io]
grid = [32, 32, 4]
steps = 1
layout = "2x1"
dir = "{dir}"
mpi = ["openmpi"]
[io.space]
pattern = ["serial", "shared"]
library = ["mpiio"]
"""


def snapshot(path):
    """What a reader must never change: the file's bytes, mtime, journal mode (header bytes
    18-19: 1 = rollback journal, 2 = WAL) and the files beside it."""
    data = Path(path).read_bytes()
    return (hashlib.sha256(data).hexdigest(), os.stat(path).st_mtime_ns, data[18:20],
            sorted(p.name for p in Path(path).parent.iterdir()))


def rows(db, sql, args=()):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


@pytest.fixture(scope="module")
def real_store(tmp_path_factory):
    """A nearmetal store made by `nearmetal import` (WAL mode, cleanly closed)."""
    d = tmp_path_factory.mktemp("store")
    (d / "in.csv").write_text(CSV)
    nearmetal("import", d / "in.csv", "--study", "imp", "--baseline", "base", "--db", d / "store.db",
              "--out", d, check=True)
    assert not (d / "store.db-wal").exists()
    return d / "store.db"


def copy_store(real_store, dest):
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(real_store, dest)
    return dest


def _set_version(db, value):
    con = sqlite3.connect(db)
    con.execute("UPDATE meta SET value=? WHERE key='schema_version'", (value,))
    con.commit()
    con.close()


def make_bad(kind, real_store, d):
    d.mkdir(parents=True, exist_ok=True)
    db = d / f"{kind}.db"
    if kind == "random":
        db.write_bytes(os.urandom(8192))
    elif kind == "truncated":
        db.write_bytes(real_store.read_bytes()[:8192])
    elif kind == "corrupt":  # every page after the first overwritten
        data = bytearray(real_store.read_bytes())
        data[4096:] = os.urandom(len(data) - 4096)
        db.write_bytes(bytes(data))
    elif kind in ("version7", "versionabc"):
        copy_store(real_store, db)
        _set_version(db, kind[len("version"):])
    elif kind == "foreign":
        con = sqlite3.connect(db)
        con.execute("CREATE TABLE people (name TEXT)")
        con.execute("INSERT INTO people VALUES ('ada')")
        con.commit()
        con.close()
    return db


BAD = {"random": "not an SQLite file", "truncated": "malformed", "corrupt": "malformed",
       "version7": "schema version '7'", "versionabc": "schema version 'abc'",
       "foreign": "not a nearmetal results database"}


@pytest.mark.parametrize("command", ["report", "study", "io best", "import"])
@pytest.mark.parametrize("kind", list(BAD))
def test_bad_database_is_a_one_line_error_and_is_left_alone(tmp_path, real_store, command, kind):
    db = make_bad(kind, real_store, tmp_path / "bad")
    before = snapshot(db)
    if command == "report":
        argv = ["report", "--db", db, "--out", tmp_path]
    elif command == "io best":
        argv = ["io", "best", "--db", db]
    elif command == "import":
        (tmp_path / "in.csv").write_text(CSV)
        argv = ["import", tmp_path / "in.csv", "--study", "new", "--baseline", "base", "--db", db, "--out", tmp_path]
    else:
        (tmp_path / "s.toml").write_text(STUDY.format(name="s", reps=1))
        argv = ["study", tmp_path / "s.toml", "--db", db, "--no-progress"]
    err = assert_one_line_error(nearmetal(*argv))
    assert str(db) in err and BAD[kind] in err, err
    after = snapshot(db)
    assert after[:3] == before[:3]
    assert [f for f in after[3] if not f.endswith(".lock")] == before[3]  # no -wal/-shm left


@pytest.mark.parametrize("command", ["report", "io best"])
def test_read_commands_refuse_a_foreign_sqlite_file_without_touching_it(tmp_path, real_store, command):
    db = make_bad("foreign", real_store, tmp_path / "f")
    before = snapshot(db)
    argv = ["report", "--db", db, "--out", tmp_path] if command == "report" else ["io", "best", "--db", db]
    err = assert_one_line_error(nearmetal(*argv))
    assert "not a nearmetal results database" in err and "people" in err
    assert snapshot(db) == before
    assert rows(db, "SELECT name FROM sqlite_master") == [("people",)]


def test_report_and_io_best_never_write_a_real_store(tmp_path, real_store):
    db = copy_store(real_store, tmp_path / "r" / "store.db")
    before = snapshot(db)
    assert before[2] == b"\x02\x02"  # WAL, as every store
    out = nearmetal("report", "--db", db, "--format", "json", "--out", tmp_path)
    assert out.returncode == 0, out.stderr
    assert json.loads((tmp_path / "analysis.json").read_text())["points"]
    assert assert_one_line_error(nearmetal("io", "best", "--db", db)).endswith("holds no I/O sweep (run: nearmetal io sweep FILE)")
    assert snapshot(db) == before


def test_report_reads_a_live_wal_database_being_written(tmp_path, real_store):
    """A running writer keeps its commits in the -wal file: a report must see them, and
    leave the database as the writer has it."""
    db = copy_store(real_store, tmp_path / "live" / "store.db")
    writer = Store(db, what="test writer")
    try:
        sid = writer.import_study("live", "", None, 0.03, {"variant": "base"}, "test", "2025-01-01T00:00:00+00:00",
                                  *_imported_runs(("base", "other")))
        assert Path(str(db) + "-wal").exists()
        main_before = hashlib.sha256(db.read_bytes()).hexdigest()
        out = nearmetal("report", "--db", db, "--study", "live", "--format", "json", "--out", tmp_path)
        assert out.returncode == 0, out.stderr
        points = json.loads((tmp_path / "analysis.json").read_text())["points"]
        assert {p["variant"] for p in points} == {"base", "other"}
        assert hashlib.sha256(db.read_bytes()).hexdigest() == main_before
        assert writer.runs(sid)  # the writer goes on undisturbed
        writer.record_job(sid, None, "123")
    finally:
        writer.close()


def _imported_runs(variants, n=3, values=None):
    runs, recs = [], []
    for v in variants:
        for b in range(n):
            runs.append({"run_key": f"{v}|{b}", "position": len(runs), "block": b, "repetition": b, "warmup": False,
                         "benchmark": "live", "kernel": "imported", "variant": v,
                         "variant_json": {"mode": v, "runtime": None, "mpi": None, "image": None},
                         "ranks": 0, "threads": 0, "started": "2025-01-01T00:00:00+00:00"})
            value = 1.0 + b / 100 if values is None else values
            recs.append([{"metric": "t", "unit": "s", "value": value, "point": {"size": 8}}])
    return runs, recs


# -- import ---------------------------------------------------------------------------------

@pytest.mark.parametrize("content, where", [
    ("variant,metric,value\nbase,t,1\nbase,t,nan\n", "line 3, column 'value': 'nan' is not a finite number"),
    ("variant,metric,value\nbase,t,1\nslow,t,inf\n", "line 3, column 'value': 'inf' is not a finite number"),
    ("variant,metric,value\nbase,t,1\nslow,t,2,3\n", "line 3: 4 fields, but the header (line 1) has 3"),
    ("variant,metric,value\nbase,t,1\nslow,t\n", "line 3: 2 fields, but the header (line 1) has 3"),
    (b"variant,metric,value\nbase,t,1\nslow,t\xe9,2\n", "line 3: not UTF-8 text (byte 0xe9)"),
    ("variant,metric,ranks,value\nbase,t,4,1\nslow,t,abc,2\n", "line 3, column 'ranks': 'abc' is not an integer"),
    ("variant,metric,ranks,value\nbase,t,1e400,1\nslow,t,4,2\n", "line 2, column 'ranks': '1e400' is not an integer"),
    ("variant,metric,block,value\nbase,t,0,1\nslow,t,1e300,2\n", "line 3, column 'block': 1e300 is out of range"),
    ("variant,metric,value\nbase,t,1\nslow,t,-2\n", "line 3, column 'value': -2 is negative"),
    # finite but past what the analysis can divide and square: the study could never be reported
    ("variant,metric,value\nbase,t,5e-324\nslow,t,1\n", "line 2, column 'value': 4.94066e-324 is outside the range"),
    ("variant,metric,mean,n,std\nbase,t,1,3,1\nslow,t,1e200,3,1\n", "line 3, column 'mean': 1e+200 is outside the range"),
    ("variant,metric,mean,n,std\nbase,t,1,5,0.1\nslow,t,2,0,0.1\n", "line 3, column 'n': 0 is out of range"),
    ("variant,metric,mean,n,std\nbase,t,1,5,-0.1\nslow,t,2,5,0.1\n", "line 2, column 'std': -0.1 is negative"),
    ("variant,metric,mean,n,std\nbase,t,1,5,0.1\nslow,t,2,5,0.1\nbase,t,1.1,5,0.1\n",
     "line 4, column 'variant': a second summary row for variant 'base' at this point and metric 't' (the first is line 2)"),
    ("variant,metric,unit,value\nbase,t,s,1\nslow,t,ms,2\n",
     "line 3, column 'unit': metric 't' is in 'ms' here but in 's' on line 2"),
    ("variant,metric,value,value\nbase,t,1,1\n", "line 1: column 'value' appears twice"),
])
def test_import_refuses_bad_rows_naming_file_line_and_column(tmp_path, content, where):
    p = tmp_path / "bad.csv"
    p.write_bytes(content if isinstance(content, bytes) else content.encode())
    db = tmp_path / "i.db"
    err = assert_one_line_error(nearmetal("import", p, "--study", "x", "--baseline", "base", "--db", db))
    assert f"{p}: {where}" in err, err
    assert not db.exists()  # checked before the database is opened


def test_failed_import_leaves_no_study_and_a_retry_works(tmp_path):
    db = tmp_path / "i.db"
    good, bad = tmp_path / "good.csv", tmp_path / "bad.csv"
    good.write_text(CSV)
    bad.write_text(CSV + "slow,t,s,8,nan\n")
    nearmetal("import", good, "--study", "first", "--baseline", "base", "--db", db, "--out", tmp_path, check=True)
    assert_one_line_error(nearmetal("import", bad, "--study", "second", "--baseline", "base", "--db", db))
    assert rows(db, "SELECT name FROM studies") == [("first",)]
    bad.write_text(CSV)
    out = nearmetal("import", bad, "--study", "second", "--baseline", "base", "--db", db, "--out", tmp_path)
    assert out.returncode == 0, out.stderr
    assert rows(db, "SELECT s.name, COUNT(r.id) FROM studies s JOIN runs r ON r.study_id = s.id GROUP BY s.id") == \
        [("first", 16), ("second", 16)]


def test_import_study_is_one_transaction(tmp_path):
    """A failure inside the database write (here: a record SQLite refuses) rolls back the
    study row too."""
    db = tmp_path / "t.db"
    with Store(db, what="test") as store:
        runs, recs = _imported_runs(("base", "other"))
        recs[-1][0]["value"] = None  # NOT NULL
        with pytest.raises(NearmetalError) as e:
            store.import_study("half", "", None, 0.03, {"variant": "base"}, "test", "2025-01-01", runs, recs)
        assert "NOT NULL" in str(e.value) and "\n" not in str(e.value)
        assert store.studies() == []
        assert rows(db, "SELECT COUNT(*) FROM runs") == [(0,)]


# -- one writer per database ------------------------------------------------------------------

def _start(*args):
    return subprocess.Popen([str(NEARMETAL), *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True, start_new_session=True)


def _wait_for(cond, what, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _stored_once(db, expected):
    """Every planned run finished once: all ok, and no (run, metric, point) recorded twice."""
    assert rows(db, "SELECT status, COUNT(*) FROM runs GROUP BY status") == [("ok", expected)]
    dup = rows(db, "SELECT run_id, metric, point_json, COUNT(*) c FROM records GROUP BY run_id, metric, point_json "
                   "HAVING c > 1")
    assert dup == []
    per_run = {n for (n,) in rows(db, "SELECT COUNT(*) FROM records GROUP BY run_id")}
    assert len(per_run) == 1 and rows(db, "SELECT COUNT(DISTINCT run_id) FROM records") == [(expected,)]


def _ok_count(db):
    if not Path(str(db) + "-wal").exists():  # the runner has not made its store yet
        return 0
    try:
        with Store(db, readonly=True) as s:
            row = s.study("w")
            return s.counts(row["id"]).get("ok", 0) if row else 0
    except NearmetalError:
        return 0


def test_second_runner_is_refused_with_the_holders_pid_and_runs_are_stored_once(tmp_path):
    path = tmp_path / "w.toml"
    path.write_text(STUDY.format(name="w", reps=20))   # 40 tiny native runs, a few seconds
    db = tmp_path / "w.db"
    first = _start("study", path, "--db", db, "--resume", "--no-progress")
    try:
        _wait_for(lambda: _ok_count(db) >= 1 or first.poll() is not None, "the first runner's first run")
        assert first.poll() is None, first.communicate()
        second = nearmetal("study", path, "--db", db, "--resume", "--no-progress")
        assert first.poll() is None, "the first runner ended before the second one tried: make the study longer"
        err = assert_one_line_error(second)
        assert f"study 'w' in {db} is being run by PID {first.pid}" in err
        imp = tmp_path / "in.csv"
        imp.write_text(CSV)
        err = assert_one_line_error(nearmetal("import", imp, "--study", "other", "--baseline", "base", "--db", db))
        assert f"being written by PID {first.pid} (study 'w')" in err
        sweep = tmp_path / "io.toml"
        sweep.write_text(IO_STUDY.format(dir=tmp_path / "io"))
        err = assert_one_line_error(nearmetal("io", "sweep", sweep, "--db", db, "--no-progress"))
        assert f"I/O sweep 'tio' in {db}: the database is being written by PID {first.pid} (study 'w')" in err
        _, stderr = first.communicate(timeout=300)
        assert first.returncode == 0, stderr
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
    _stored_once(db, 40)
    again = nearmetal("study", path, "--db", db, "--resume", "--no-progress")
    assert again.returncode == 0 and "0 to run" in again.stderr, again.stderr


def test_two_fresh_runners_race_for_one_database(tmp_path):
    path = tmp_path / "w.toml"
    path.write_text(STUDY.format(name="w", reps=10))
    db = tmp_path / "w.db"
    procs = [_start("study", path, "--db", db, "--resume", "--no-progress") for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    codes = [p.returncode for p in procs]
    assert 0 in codes, outs
    for p, (_, err) in zip(procs, outs):
        assert "Traceback" not in err and "locked" not in err, err
        if p.returncode != 0:
            other = procs[1 - procs.index(p)]
            assert p.returncode == 2 and f"is being run by PID {other.pid}" in err, err
    _stored_once(db, 20)
    assert rows(db, "SELECT COUNT(*) FROM studies") == [(1,)]


def test_the_lock_dies_with_a_sigkilled_runner(tmp_path):
    path = tmp_path / "w.toml"
    path.write_text(STUDY.format(name="w", reps=10))
    db = tmp_path / "w.db"
    first = _start("study", path, "--db", db, "--no-progress")
    _wait_for(lambda: _ok_count(db) >= 1 or first.poll() is not None, "the first runner's first run")
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    assert (tmp_path / "w.db.lock").read_text().split()[0] == str(first.pid)  # a dead holder's PID: no stale lock
    out = nearmetal("study", path, "--db", db, "--resume", "--no-progress", timeout=300)
    assert out.returncode == 0, out.stderr
    _stored_once(db, 20)


# -- finish_run, jobs, schema migration, busy database ------------------------------------------

def _planned_study(store, n=2):
    runs = [{"run_key": f"b|{i}", "position": i, "block": i, "repetition": i, "warmup": False, "benchmark": "b",
             "kernel": "startup", "variant": "native", "variant_json": {"mode": "native"}, "ranks": 1, "threads": 1}
            for i in range(n)]
    sid = store.create_study("p", "", 1, 0.03, {"mode": "native"}, "test", "2025-01-01", planned=runs)
    return sid, [r["id"] for r in store.pending(sid)]


def test_a_run_is_never_stored_twice(tmp_path):
    db = tmp_path / "f.db"
    recs = [{"metric": "t", "unit": "s", "value": 1.0, "point": {"rank": 0}}]
    with Store(db, what="test") as one, Store(db, what="test") as two:   # two connections
        sid, (run, _) = _planned_study(one)
        assert one.finish_run(run, "ok", 0, ["x"], {}, None, "t0", 0.1, None, recs) is True
        assert two.finish_run(run, "failed", 1, ["x"], {}, None, "t1", 0.1, "late", recs + recs) is False
        assert rows(db, "SELECT status, started FROM runs WHERE id=?", (run,)) == [("ok", "t0")]
        assert rows(db, "SELECT COUNT(*) FROM records WHERE run_id=?", (run,)) == [(1,)]


def test_jobs_table_and_finish_run_closing_its_job(tmp_path):
    db = tmp_path / "j.db"
    with Store(db, what="test") as store:
        sid, (r1, r2) = _planned_study(store)
        store.record_job(sid, r1, "4711")
        store.record_job(sid, r2, 4712)
        assert [(j["run_id"], j["job_id"], j["state"]) for j in store.open_jobs(sid)] == \
            [(r1, "4711", "submitted"), (r2, "4712", "submitted")]
        assert store.finish_job("4711", "CANCELLED") is True
        assert store.finish_job("4711", "COMPLETED") is False   # already closed
        assert store.finish_run(r2, "ok", 0, [], {}, None, "t", 1.0, None, [], job_id="4712") is True
        assert store.open_jobs(sid) == []
        assert rows(db, "SELECT job_id, state FROM jobs ORDER BY id") == [("4711", "CANCELLED"), ("4712", "ok")]
        assert all(j[0] for j in rows(db, "SELECT submitted FROM jobs"))


def test_schema_1_is_read_without_writing_and_migrated_by_writers(tmp_path, real_store):
    db = copy_store(real_store, tmp_path / "v1" / "store.db")
    con = sqlite3.connect(db)
    con.executescript("DROP TABLE jobs; UPDATE meta SET value='1' WHERE key='schema_version';")
    con.close()
    before = snapshot(db)
    out = nearmetal("report", "--db", db, "--format", "json", "--out", tmp_path)
    assert out.returncode == 0, out.stderr
    assert snapshot(db) == before
    with Store(db, readonly=True) as r:
        assert r.open_jobs(r.study("imp")["id"]) == []
    assert snapshot(db) == before
    with Store(db, what="test") as w:   # a writer migrates in place
        sid = w.study("imp")["id"]
        assert len(w.runs(sid)) == 16
        w.record_job(sid, None, "1")
    assert rows(db, "SELECT value FROM meta WHERE key='schema_version'") == [(str(SCHEMA_VERSION),)]
    assert rows(db, "SELECT COUNT(*) FROM jobs") == [(1,)]


def test_a_locked_database_is_a_one_line_error(tmp_path):
    db = tmp_path / "l.db"
    store = Store(db, what="test")
    other = sqlite3.connect(db)
    try:
        sid, (run, _) = _planned_study(store)
        store.db.execute("PRAGMA busy_timeout=200")
        other.execute("BEGIN IMMEDIATE")   # another process's write transaction
        with pytest.raises(NearmetalError) as e:
            store.finish_run(run, "ok", 0, [], {}, None, "t", 1.0, None, [])
        assert "is locked by another process" in str(e.value) and "\n" not in str(e.value)
        other.rollback()
        assert store.finish_run(run, "ok", 0, [], {}, None, "t", 1.0, None, []) is True  # nothing was half-done
    finally:
        other.close()
        store.close()


def test_writers_refuse_a_foreign_database_and_readers_a_missing_one(tmp_path, real_store):
    db = make_bad("foreign", real_store, tmp_path)
    before = snapshot(db)
    with pytest.raises(NearmetalError, match="not a nearmetal results database"):
        Store(db, what="test")
    assert snapshot(db)[:3] == before[:3]
    with pytest.raises(NearmetalError, match="no results database at"):
        Store(tmp_path / "none.db", readonly=True)
    assert not (tmp_path / "none.db").exists()
