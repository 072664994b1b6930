"""The results store: SQLite on disk, one file per study directory by default.

Schema version 3 (documented in docs/store.md):
  meta(key, value)                      schema_version
  studies(id, name, config_toml, seed, margin, baseline_json, created, nearmetal_version)
  runs(id, study_id, run_key, position, block, repetition, warmup, benchmark, kernel,
       variant, variant_json, ranks, threads, status, exit_status, argv_json, env_json,
       context_id, started, wall_s, stderr_tail)          status: planned | ok | failed | timeout
  records(id, run_id, metric, unit, value, point_json, n, std)
                                        one row per measured point; n/std only for imported
                                        summary rows (value is then their mean)
  contexts(id, digest, context_json)                      host, kernel, CPU, MPI, runtime, image, ...
  jobs(id, study_id, run_id, job_id, submitted, state)    batch jobs submitted for runs (v2)
  run_load(run_id, load_start, load_end, steal_pct, others_cpu_s, own_cpu_s, cpus, busy, quiet, quiet_wait_s)
                                        how busy the machine was during a run (v3, contention.py)

Every finished run is committed at once (its status, records and context in one
transaction), so a study killed at any moment — even SIGKILL — loses nothing finished,
and `--resume` runs exactly the runs still `planned`.

Writers (`Store(path)`) hold the database's writer lock (lock.py: `<db>.lock`) for as
long as they are open, create or migrate the schema, and refuse a file that is not a
nearmetal store. Readers (`Store(path, readonly=True)`) never write: not the file, not
its journal mode. Every SQLite error becomes a one-line NearmetalError.
"""

import atexit
import functools
import hashlib
import json
import os
import sqlite3
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote

from ...errors import NearmetalError
from ...safe_read import read_head
from ...safe_write import refuse_links
from . import shared_fs
from .lock import lock_for_writing
from .schema import (_LOAD_COLUMNS, _TABLES_V1, _TABLES_V2, _TABLES_V3, _TABLES_V4, READABLE_VERSIONS,
                     SCHEMA_VERSION)

BUSY_TIMEOUT_S = 30
_SQLITE_MAGIC = b"SQLite format 3\x00"


def _now():
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _header(path):
    """(exists, first 100 bytes) of the file; NearmetalError when it cannot be read."""
    try:
        head = read_head(path, 100, "results database")  # a FIFO there refused, never waited on
    except OSError as e:
        raise NearmetalError(f"cannot read results database {path}: {e.strerror}")
    return head is not None, head or b""


class Store:
    def __init__(self, path, create=True, readonly=False, what=None):
        """readonly: open for reading only (the file must exist and be a nearmetal store of
        a readable schema version; nothing is written). Otherwise a writer: takes the
        writer lock (`what` names the writer in the lock file, e.g. "study 'x'"), creates
        the file when `create`, creates or migrates the schema."""
        self.path = Path(path)
        self.readonly = readonly
        self.db = None
        self._lock = None
        self._copy = None  # on a cluster file system: the runner-local copy written to (shared_fs.py)
        refuse_links(self.path, ("", "-journal", "-wal", "-shm", ".lock"), "results database")  # SQLite follows them
        exists, head = _header(self.path)
        if not exists and (readonly or not create):
            raise NearmetalError(f"no results database at {self.path}")
        if head and not head.startswith(_SQLITE_MAGIC):
            raise NearmetalError(f"{self.path} is not a nearmetal results database (not an SQLite file)")
        if not readonly:
            self._lock = lock_for_writing(self.path, what or "a nearmetal writer")
        try:
            if not readonly and shared_fs.copy_mode(self.path):
                self._copy = shared_fs.local_copy(self.path)
                self._drop = functools.partial(shared_fs.drop_copy, self._copy)
                atexit.register(self._drop)  # also when interrupted before close()
            self._open(head)
        except BaseException:
            self.close()
            raise

    def _open(self, head):
        try:
            if self.readonly:
                self.db = sqlite3.connect(self._readonly_uri(head), uri=True, timeout=BUSY_TIMEOUT_S)
            else:
                self.db = sqlite3.connect(self._copy or self.path, timeout=BUSY_TIMEOUT_S)
        except sqlite3.Error as e:
            raise NearmetalError(f"cannot open results database {self.path}: {e}")
        self.db.row_factory = sqlite3.Row
        with self._guard():
            version = self._version()
            if self.readonly:
                if version is None:
                    raise NearmetalError(f"{self.path} is not a nearmetal results database (no schema_version)")
                return
            if version is None:
                self._create()
            elif version < SCHEMA_VERSION:
                self._migrate(version)
            # WAL: readers (report) never block the running study; every commit is durable.
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.execute("PRAGMA foreign_keys=ON")
        self._write_back()

    def _readonly_uri(self, head):
        """`mode=ro`; for a WAL database no writer has open (no -wal file), `immutable=1`
        too: a read-only connection would otherwise create -wal and -shm files beside it
        and leave them behind. A live database (a study running) is read through its WAL."""
        uri = "file:" + quote(str(self.path.resolve())) + "?mode=ro"
        wal = len(head) >= 20 and head[18] == 2 and head[19] == 2
        if wal and not os.path.exists(str(self.path) + "-wal"):
            uri += "&immutable=1"
        return uri

    def _version(self):
        """The store's schema version; None for an empty database (writers create the
        schema there); NearmetalError for any other database."""
        tables = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not tables and not self.readonly:
            return None
        if "meta" not in tables:
            what = f"its tables: {', '.join(sorted(tables)[:5])}" if tables else "it is empty"
            raise NearmetalError(f"{self.path} is not a nearmetal results database ({what})")
        row = self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is None:
            raise NearmetalError(f"{self.path} is not a nearmetal results database (no schema_version)")
        try:
            version = int(row[0])
        except (TypeError, ValueError):
            version = None
        if version not in READABLE_VERSIONS:
            raise NearmetalError(f"{self.path} has store schema version {row[0]!r}; this nearmetal reads versions "
                                 f"{', '.join(map(str, READABLE_VERSIONS))}")
        return version

    def _script(self, sql):
        """One transaction for several DDL/DML statements (sqlite3 would commit DDL at once)."""
        try:
            self.db.executescript("BEGIN IMMEDIATE;\n" + sql + "\nCOMMIT;")
        except BaseException:
            if self.db.in_transaction:
                self.db.rollback()
            raise

    def _create(self):
        self._script(_TABLES_V1 + _TABLES_V2 + _TABLES_V3 + _TABLES_V4
                     + f"INSERT INTO meta VALUES ('schema_version', '{SCHEMA_VERSION}');")

    def _migrate(self, version):
        """In place, in one transaction: 1 -> 2 (jobs) -> 3 (run_load) -> 4 (run_evidence)."""
        steps = {1: _TABLES_V2, 2: _TABLES_V3, 3: _TABLES_V4}
        self._script("".join(steps[v] for v in range(version, SCHEMA_VERSION))
                     + f"UPDATE meta SET value='{SCHEMA_VERSION}' WHERE key='schema_version';")

    @contextmanager
    def _guard(self):
        """SQLite errors as one-line NearmetalErrors naming the database."""
        try:
            yield
        except sqlite3.Error as e:
            text = str(e)
            if "locked" in text or "busy" in text:
                raise NearmetalError(f"results database {self.path} is locked by another process "
                                     f"(waited {BUSY_TIMEOUT_S} s): try again when it has finished") from None
            if isinstance(e, sqlite3.OperationalError) and "readonly" in text.replace(" ", ""):
                raise NearmetalError(f"cannot write results database {self.path}: {text}") from None
            raise NearmetalError(f"{self.path} is not a usable nearmetal results database: {text}") from None

    @contextmanager
    def _tx(self):
        """One write transaction (committed on success, rolled back on any exception)."""
        if self.readonly:
            raise NearmetalError(f"{self.path} was opened read-only")
        with self._guard(), self.db:
            yield self.db
        self._write_back()

    def _write_back(self):
        if self._copy is not None:
            shared_fs.write_back(self.db, self.path)

    def _all(self, sql, args=()):
        with self._guard():
            return self.db.execute(sql, args).fetchall()

    def _one(self, sql, args=()):
        with self._guard():
            return self.db.execute(sql, args).fetchone()

    def close(self):
        try:
            if self.db is not None:
                self.db.close()
                self.db = None
            if self._copy is not None:
                shared_fs.drop_copy(self._copy)
                atexit.unregister(self._drop)
                self._copy = None
        finally:
            if self._lock is not None:
                self._lock.release()
                self._lock = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- the key-value table (meta): the schema version, and entries codec.py keeps ----------
    def meta(self, key):
        row = self._one("SELECT value FROM meta WHERE key=?", (key,))
        return None if row is None else row[0]

    def set_meta(self, key, value):
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?,?)", (key, value))

    # -- studies -------------------------------------------------------------------------
    def study(self, name):
        return self._one("SELECT * FROM studies WHERE name=?", (name,))

    def studies(self):
        return self._all("SELECT * FROM studies ORDER BY id")

    def create_study(self, name, config_toml, seed, margin, baseline, version, created, planned=()):
        """The study row and its planned runs, in one transaction; returns the study id."""
        with self._tx() as db:
            cur = db.execute(
                "INSERT INTO studies (name, config_toml, seed, margin, baseline_json, created, nearmetal_version) "
                "VALUES (?,?,?,?,?,?,?)", (name, config_toml, seed, margin, json.dumps(baseline), created, version))
            self._insert_planned(db, cur.lastrowid, planned)
        return cur.lastrowid

    def add_planned(self, study_id, runs):
        """Insert planned runs (idempotent by run_key)."""
        with self._tx() as db:
            self._insert_planned(db, study_id, runs)

    @staticmethod
    def _insert_planned(db, study_id, runs):
        db.executemany(
            "INSERT OR IGNORE INTO runs (study_id, run_key, position, block, repetition, warmup, benchmark, kernel,"
            " variant, variant_json, ranks, threads) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            [(study_id, r["run_key"], r["position"], r["block"], r["repetition"], int(r["warmup"]), r["benchmark"],
              r["kernel"], r["variant"], json.dumps(r["variant_json"]), r["ranks"], r["threads"]) for r in runs])

    def pending(self, study_id):
        return self._all("SELECT * FROM runs WHERE study_id=? AND status='planned' ORDER BY position", (study_id,))

    def counts(self, study_id):
        rows = self._all("SELECT status, COUNT(*) FROM runs WHERE study_id=? GROUP BY status", (study_id,))
        return {r[0]: r[1] for r in rows}

    def context_id(self, context):
        text = json.dumps(context, sort_keys=True)
        digest = hashlib.sha256(text.encode()).hexdigest()
        with self._tx() as db:
            row = db.execute("SELECT id FROM contexts WHERE digest=?", (digest,)).fetchone()
            if row:
                return row[0]
            return db.execute("INSERT INTO contexts (digest, context_json) VALUES (?,?)", (digest, text)).lastrowid

    def finish_run(self, run_id, status, exit_status, argv, env, context_id, started, wall_s, stderr_tail, records,
                   job_id=None, job_state=None, load=None):
        """One transaction: the run's outcome and all its records — the records only when
        this call moved the run out of 'planned' (a run is never stored twice). With
        `job_id`, that batch job is closed in the same transaction (state `job_state`, or
        the run's status); with `load` (a dict of run_load's columns, contention.figures),
        how busy the machine was. Returns True when the run was stored, False when it had
        already been finished."""
        with self._tx() as db:
            cur = db.execute(
                "UPDATE runs SET status=?, exit_status=?, argv_json=?, env_json=?, context_id=?, started=?, wall_s=?,"
                " stderr_tail=? WHERE id=? AND status='planned'",
                (status, exit_status, json.dumps(argv), json.dumps(env), context_id, started, wall_s, stderr_tail, run_id))
            if cur.rowcount != 1:
                return False
            db.executemany(
                "INSERT INTO records (run_id, metric, unit, value, point_json, n, std) VALUES (?,?,?,?,?,?,?)",
                [(run_id, r["metric"], r["unit"], r["value"], json.dumps(r["point"], sort_keys=True),
                  r.get("n"), r.get("std")) for r in records])
            if job_id is not None:
                self._close_job(db, job_id, job_state or status)
            if load is not None:
                db.execute(f"INSERT INTO run_load (run_id, {', '.join(_LOAD_COLUMNS)}) "
                           f"VALUES (?{',?' * len(_LOAD_COLUMNS)})", (run_id, *(load.get(k) for k in _LOAD_COLUMNS)))
        return True

    def import_study(self, name, config_toml, seed, margin, baseline, version, created, runs, records_per_run):
        """An imported study: its row, its finished runs and their records, in one
        transaction (a failure leaves nothing behind). Returns the study id."""
        with self._tx() as db:
            study_id = db.execute(
                "INSERT INTO studies (name, config_toml, seed, margin, baseline_json, created, nearmetal_version) "
                "VALUES (?,?,?,?,?,?,?)", (name, config_toml, seed, margin, json.dumps(baseline), created, version)
            ).lastrowid
            self._insert_finished(db, study_id, runs, records_per_run)
        return study_id

    def add_finished(self, study_id, runs, records_per_run):
        """Bulk-insert runs that are already finished (imports): one transaction for all."""
        with self._tx() as db:
            self._insert_finished(db, study_id, runs, records_per_run)

    @staticmethod
    def _insert_finished(db, study_id, runs, records_per_run):
        for r, recs in zip(runs, records_per_run):
            cur = db.execute(
                "INSERT INTO runs (study_id, run_key, position, block, repetition, warmup, benchmark, kernel,"
                " variant, variant_json, ranks, threads, status, exit_status, argv_json, env_json, started, wall_s)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,'ok',0,'[]','{}',?,0.0)",
                (study_id, r["run_key"], r["position"], r["block"], r["repetition"], int(r["warmup"]),
                 r["benchmark"], r["kernel"], r["variant"], r.get("variant_text") or json.dumps(r["variant_json"]),
                 r["ranks"], r["threads"], r.get("started")))
            db.executemany(
                "INSERT INTO records (run_id, metric, unit, value, point_json, n, std) VALUES (?,?,?,?,?,?,?)",
                [(cur.lastrowid, x["metric"], x["unit"], x["value"],
                  x.get("point_json") or json.dumps(x["point"], sort_keys=True), x.get("n"), x.get("std"))
                 for x in recs])

    # -- batch jobs (schema 2) -----------------------------------------------------------
    def record_job(self, study_id, run_id, job_id):
        """A batch job submitted for a run (committed at once); returns its row id."""
        with self._tx() as db:
            return db.execute("INSERT INTO jobs (study_id, run_id, job_id, submitted, state) VALUES (?,?,?,?,?)",
                              (study_id, run_id, str(job_id), _now(), "submitted")).lastrowid

    def finish_job(self, job_id, state):
        """Close a submitted job with its final state; True when a submitted job was closed."""
        with self._tx() as db:
            return self._close_job(db, job_id, state)

    @staticmethod
    def _close_job(db, job_id, state):
        cur = db.execute("UPDATE jobs SET state=? WHERE job_id=? AND state='submitted'", (state, str(job_id)))
        return cur.rowcount > 0

    def open_jobs(self, study_id):
        """The study's jobs still 'submitted' (none on a read-only schema-1 store)."""
        if not self._one("SELECT 1 FROM sqlite_master WHERE type='table' AND name='jobs'"):
            return []
        return self._all("SELECT * FROM jobs WHERE study_id=? AND state='submitted' ORDER BY id", (study_id,))

    # The study runner's own batch jobs (study/execute/submit.py): run_id NULL, state 'runner' while
    # queued, 'runner started LEFT' once running (LEFT: the runs then still planned), then
    # 'runner ended' or 'runner cancelled'. Never 'submitted': a resumed runner does not
    # cancel its own chain as leftovers.
    def record_runner_job(self, study_id, job_id):
        with self._tx() as db:
            db.execute("INSERT INTO jobs (study_id, run_id, job_id, submitted, state) VALUES (?,NULL,?,?,?)",
                       (study_id, str(job_id), _now(), "runner"))

    def runner_jobs(self, study_id):
        return self._all("SELECT * FROM jobs WHERE study_id=? AND run_id IS NULL AND state LIKE 'runner%' "
                         "ORDER BY id", (study_id,))

    def set_runner_state(self, study_id, job_id, state):
        with self._tx() as db:
            db.execute("UPDATE jobs SET state=? WHERE study_id=? AND job_id=? AND run_id IS NULL",
                       (state, study_id, str(job_id)))

    # -- reading -------------------------------------------------------------------------
    def runs(self, study_id):
        return self._all("SELECT * FROM runs WHERE study_id=? ORDER BY position", (study_id,))

    def records(self, study_id):
        return self._all(
            "SELECT r.id AS run_id, r.block, r.benchmark, r.kernel, r.variant, r.ranks, r.threads, "
            "c.metric, c.unit, c.value, c.point_json, c.n, c.std FROM records c JOIN runs r ON r.id = c.run_id "
            "WHERE r.study_id=? AND r.status='ok' AND r.warmup=0", (study_id,))

    def run_load(self, study_id):
        """The study's measured runs (not warm-ups) with how busy the machine was: run_load's
        columns and the run's run_key, variant, benchmark, ranks, threads, wall_s ([] before v3)."""
        if not self._one("SELECT 1 FROM sqlite_master WHERE type='table' AND name='run_load'"):
            return []
        return self._all(
            "SELECT l.*, r.run_key, r.variant, r.benchmark, r.ranks, r.threads, r.wall_s FROM run_load l "
            "JOIN runs r ON r.id = l.run_id WHERE r.study_id=? AND r.warmup=0 ORDER BY r.position", (study_id,))

    def set_evidence(self, run_id, rows):
        """A run's evidence (nearmetal.evidence): rows [(rank, json text)], replacing what an
        earlier attempt at the same run stored."""
        with self._tx() as db:
            db.execute("DELETE FROM run_evidence WHERE run_id=?", (run_id,))
            db.executemany("INSERT INTO run_evidence (run_id, rank, evidence_json) VALUES (?, ?, ?)",
                           [(run_id, rank, text) for rank, text in rows])

    def evidence(self, study_id):
        """The study's run_evidence rows (run_id, rank, evidence_json), by run and rank ([] before v4)."""
        if not self._one("SELECT 1 FROM sqlite_master WHERE type='table' AND name='run_evidence'"):
            return []
        return self._all(
            "SELECT e.run_id, e.rank, e.evidence_json FROM run_evidence e JOIN runs r ON r.id = e.run_id "
            "WHERE r.study_id=? ORDER BY r.position, e.rank", (study_id,))

    def contexts(self, study_id, context_ids=None):
        """The distinct contexts of the study's runs (of those context_ids only, when given)."""
        rows = self._all(
            "SELECT DISTINCT x.context_json, x.id FROM contexts x JOIN runs r ON r.context_id = x.id WHERE r.study_id=?",
            (study_id,))
        seen, out = set(), []
        for r in rows:
            if (context_ids is None or r["id"] in context_ids) and r["context_json"] not in seen:
                seen.add(r["context_json"])
                out.append(r)
        return out
