"""The results store: SQLite on disk, one file per study directory by default.

Schema version 1 (documented in docs/store.md):
  meta(key, value)                      schema_version, created_by
  studies(id, name, config_toml, seed, margin, baseline_json, created, nearmetal_version)
  runs(id, study_id, run_key, position, block, repetition, warmup, benchmark, kernel,
       variant, variant_json, ranks, threads, status, exit_status, argv_json, env_json,
       context_id, started, wall_s, stderr_tail)          status: planned | ok | failed | timeout
  records(id, run_id, metric, unit, value, point_json, n, std)
                                        one row per measured point; n/std only for imported
                                        summary rows (value is then their mean)
  contexts(id, digest, context_json)                      host, kernel, CPU, MPI, runtime, image, ...

Every finished run is committed at once (its status, records and context in one
transaction), so a study killed at any moment — even SIGKILL — loses nothing finished,
and `--resume` runs exactly the runs still `planned`.
"""

import hashlib
import json
import sqlite3
from pathlib import Path

from ..errors import NearmetalError

SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS studies (
  id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, config_toml TEXT NOT NULL, seed INTEGER,
  margin REAL NOT NULL, baseline_json TEXT NOT NULL, created TEXT NOT NULL, nearmetal_version TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS contexts (id INTEGER PRIMARY KEY, digest TEXT NOT NULL UNIQUE, context_json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
  id INTEGER PRIMARY KEY, study_id INTEGER NOT NULL REFERENCES studies(id), run_key TEXT NOT NULL,
  position INTEGER NOT NULL, block INTEGER NOT NULL, repetition INTEGER NOT NULL, warmup INTEGER NOT NULL,
  benchmark TEXT NOT NULL, kernel TEXT NOT NULL, variant TEXT NOT NULL, variant_json TEXT NOT NULL,
  ranks INTEGER NOT NULL, threads INTEGER NOT NULL, status TEXT NOT NULL DEFAULT 'planned',
  exit_status INTEGER, argv_json TEXT, env_json TEXT, context_id INTEGER REFERENCES contexts(id),
  started TEXT, wall_s REAL, stderr_tail TEXT, UNIQUE(study_id, run_key));
CREATE TABLE IF NOT EXISTS records (
  id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id), metric TEXT NOT NULL,
  unit TEXT NOT NULL, value REAL NOT NULL, point_json TEXT NOT NULL, n INTEGER, std REAL);
CREATE INDEX IF NOT EXISTS runs_status ON runs(study_id, status, position);
CREATE INDEX IF NOT EXISTS records_run ON records(run_id);
"""


class Store:
    def __init__(self, path, create=True):
        self.path = Path(path)
        if not create and not self.path.exists():
            raise NearmetalError(f"no results database at {self.path}")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(self.path, timeout=30)
        except (OSError, sqlite3.Error) as e:
            raise NearmetalError(f"cannot open results database {self.path}: {e}")
        self.db.row_factory = sqlite3.Row
        # WAL: readers (report) never block the running study; every commit is durable.
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("PRAGMA foreign_keys=ON")
        try:
            self.db.executescript(SCHEMA)
            row = self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        except sqlite3.DatabaseError as e:
            raise NearmetalError(f"{self.path} is not a nearmetal results database: {e}")
        if row is None:
            with self.db:
                self.db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        elif int(row[0]) != SCHEMA_VERSION:
            raise NearmetalError(f"{self.path} has store schema {row[0]}; this nearmetal reads schema {SCHEMA_VERSION}")

    def close(self):
        self.db.close()

    # -- studies -------------------------------------------------------------------------
    def study(self, name):
        return self.db.execute("SELECT * FROM studies WHERE name=?", (name,)).fetchone()

    def studies(self):
        return self.db.execute("SELECT * FROM studies ORDER BY id").fetchall()

    def create_study(self, name, config_toml, seed, margin, baseline, version, created):
        with self.db:
            cur = self.db.execute(
                "INSERT INTO studies (name, config_toml, seed, margin, baseline_json, created, nearmetal_version) "
                "VALUES (?,?,?,?,?,?,?)", (name, config_toml, seed, margin, json.dumps(baseline), created, version))
        return cur.lastrowid

    def add_planned(self, study_id, runs):
        """Insert planned runs (idempotent by run_key)."""
        with self.db:
            self.db.executemany(
                "INSERT OR IGNORE INTO runs (study_id, run_key, position, block, repetition, warmup, benchmark, kernel,"
                " variant, variant_json, ranks, threads) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                [(study_id, r["run_key"], r["position"], r["block"], r["repetition"], int(r["warmup"]), r["benchmark"],
                  r["kernel"], r["variant"], json.dumps(r["variant_json"]), r["ranks"], r["threads"]) for r in runs])

    def pending(self, study_id):
        return self.db.execute("SELECT * FROM runs WHERE study_id=? AND status='planned' ORDER BY position",
                               (study_id,)).fetchall()

    def counts(self, study_id):
        rows = self.db.execute("SELECT status, COUNT(*) FROM runs WHERE study_id=? GROUP BY status", (study_id,))
        return {r[0]: r[1] for r in rows}

    def context_id(self, context):
        text = json.dumps(context, sort_keys=True)
        digest = hashlib.sha256(text.encode()).hexdigest()
        row = self.db.execute("SELECT id FROM contexts WHERE digest=?", (digest,)).fetchone()
        if row:
            return row[0]
        with self.db:
            return self.db.execute("INSERT INTO contexts (digest, context_json) VALUES (?,?)", (digest, text)).lastrowid

    def finish_run(self, run_id, status, exit_status, argv, env, context_id, started, wall_s, stderr_tail, records):
        """One transaction: the run's outcome and all its records."""
        with self.db:
            self.db.execute(
                "UPDATE runs SET status=?, exit_status=?, argv_json=?, env_json=?, context_id=?, started=?, wall_s=?,"
                " stderr_tail=? WHERE id=? AND status='planned'",
                (status, exit_status, json.dumps(argv), json.dumps(env), context_id, started, wall_s, stderr_tail, run_id))
            self.db.executemany(
                "INSERT INTO records (run_id, metric, unit, value, point_json, n, std) VALUES (?,?,?,?,?,?,?)",
                [(run_id, r["metric"], r["unit"], r["value"], json.dumps(r["point"], sort_keys=True),
                  r.get("n"), r.get("std")) for r in records])

    def add_finished(self, study_id, runs, records_per_run):
        """Bulk-insert runs that are already finished (imports): one transaction for all."""
        with self.db:
            for r, recs in zip(runs, records_per_run):
                cur = self.db.execute(
                    "INSERT INTO runs (study_id, run_key, position, block, repetition, warmup, benchmark, kernel,"
                    " variant, variant_json, ranks, threads, status, exit_status, argv_json, env_json, started, wall_s)"
                    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,'ok',0,'[]','{}',?,0.0)",
                    (study_id, r["run_key"], r["position"], r["block"], r["repetition"], int(r["warmup"]),
                     r["benchmark"], r["kernel"], r["variant"], r.get("variant_text") or json.dumps(r["variant_json"]), r["ranks"],
                     r["threads"], r.get("started")))
                self.db.executemany(
                    "INSERT INTO records (run_id, metric, unit, value, point_json, n, std) VALUES (?,?,?,?,?,?,?)",
                    [(cur.lastrowid, x["metric"], x["unit"], x["value"],
                      x.get("point_json") or json.dumps(x["point"], sort_keys=True), x.get("n"), x.get("std"))
                     for x in recs])

    # -- reading -------------------------------------------------------------------------
    def runs(self, study_id):
        return self.db.execute("SELECT * FROM runs WHERE study_id=? ORDER BY position", (study_id,)).fetchall()

    def records(self, study_id):
        return self.db.execute(
            "SELECT r.id AS run_id, r.block, r.benchmark, r.kernel, r.variant, r.ranks, r.threads, "
            "c.metric, c.unit, c.value, c.point_json, c.n, c.std FROM records c JOIN runs r ON r.id = c.run_id "
            "WHERE r.study_id=? AND r.status='ok' AND r.warmup=0", (study_id,)).fetchall()

    def contexts(self, study_id):
        return self.db.execute(
            "SELECT DISTINCT x.context_json FROM contexts x JOIN runs r ON r.context_id = x.id WHERE r.study_id=?",
            (study_id,)).fetchall()
