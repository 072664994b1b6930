"""The store's tables, as SQL, by schema version (docs/store.md): what a new store creates and
what each migration adds. study/store/store.py runs them."""

SCHEMA_VERSION = 4
READABLE_VERSIONS = (1, 2, 3, 4)

_TABLES_V1 = """
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

# Version 1 -> 2: the batch jobs submitted for runs (Slurm job ids), so a resumed study
# can find jobs a killed runner left behind.
_TABLES_V2 = """
CREATE TABLE IF NOT EXISTS jobs (
  id INTEGER PRIMARY KEY, study_id INTEGER NOT NULL REFERENCES studies(id), run_id INTEGER REFERENCES runs(id),
  job_id TEXT NOT NULL, submitted TEXT NOT NULL, state TEXT NOT NULL DEFAULT 'submitted');
CREATE INDEX IF NOT EXISTS jobs_open ON jobs(study_id, state);
CREATE INDEX IF NOT EXISTS jobs_job ON jobs(job_id);
"""

# Version 2 -> 3: how busy the machine was during each run (study/execute/contention.py): busy = 1
# for a disturbed run; quiet = 1/0 whether `quiet = true` found the machine quiet (NULL: not asked).
_TABLES_V3 = """
CREATE TABLE IF NOT EXISTS run_load (
  run_id INTEGER PRIMARY KEY REFERENCES runs(id), load_start REAL, load_end REAL, steal_pct REAL,
  others_cpu_s REAL, own_cpu_s REAL, cpus INTEGER, busy INTEGER NOT NULL, quiet INTEGER, quiet_wait_s REAL);
"""
_LOAD_COLUMNS = ("load_start", "load_end", "steal_pct", "others_cpu_s", "own_cpu_s", "cpus", "busy", "quiet",
                 "quiet_wait_s")

# Version 3 -> 4: what each rank of a run saw (nearmetal.evidence): one JSON object per rank,
# rank -1 the launching side's own facts (its namespaces, the launch time).
_TABLES_V4 = """
CREATE TABLE IF NOT EXISTS run_evidence (
  run_id INTEGER NOT NULL REFERENCES runs(id), rank INTEGER NOT NULL, evidence_json TEXT NOT NULL,
  PRIMARY KEY(run_id, rank));
"""
