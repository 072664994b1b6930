"""Studies without running anything: study files parsed and refused (study/config/config.py), cells
and run order (study/plan/plan.py), Slurm options of a study's jobs, and the SQLite store
(study/store/store.py) on files in tmp_path — SQLite is a library: nothing is started."""

import json
import sqlite3

import pytest

from nearmetal.errors import NearmetalError
from nearmetal.study.plan import study_file as config_mod
from nearmetal.study.plan.plan import MAX_CELLS, baseline_of, cells, key_part, make_plan, variant_id
from nearmetal.study.store.codec import planned_row as _row
from nearmetal.study.store.store import SCHEMA_VERSION, Store

pytestmark = pytest.mark.unit


def parse(body, source="s.toml"):
    return config_mod.parse(body, source=source)


BASE = """\
[study]
name = "u"
repetitions = 3
warmup = 1
seed = 7
"""


# -- cells ---------------------------------------------------------------------------------------

def test_default_matrix():
    cfg = parse(BASE + '[[benchmark]]\nkernel = "allgather"\n')
    keys = [c.key for c in cells(cfg)]
    # modes x MPIs; native carries no runtime or image; the first runtime and the default image
    assert keys == ["allgather|n=2|t=1|native/openmpi", "allgather|n=2|t=1|native/mpich",
                    "allgather|n=2|t=1|hybrid/charliecloud/openmpi/default",
                    "allgather|n=2|t=1|hybrid/charliecloud/mpich/default",
                    "allgather|n=2|t=1|bind/charliecloud/openmpi/default",
                    "allgather|n=2|t=1|bind/charliecloud/mpich/default"]


def test_native_collapses_runtimes_and_images():
    cfg = parse(BASE + """
[matrix]
mode = ["native", "hybrid"]
runtime = ["charliecloud", "bwrap", "podman"]
mpi = ["mpich"]
image = ["a", "b"]
[[benchmark]]
kernel = "allgather"
""")
    variants = [variant_id(c.variant) for c in cells(cfg)]
    assert variants.count("native/mpich") == 1
    assert len(variants) == 1 + 3 * 2


@pytest.mark.parametrize("setting", ["skip", "fail"])
def test_missing_runtimes_skip_leaves_out_the_cells_of_a_runtime_not_installed(monkeypatch, setting):
    import shutil

    from nearmetal import runtimes
    from nearmetal.study.plan.plan import missing_runtimes

    installed = {"ch-run", "bwrap"}
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: f"/usr/bin/{name}" if name in installed else None)
    monkeypatch.setattr(type(runtimes.get("apptainer")), "path", lambda self: None)
    cfg = parse(BASE.replace('seed = 7', f'seed = 7\nmissing_runtimes = "{setting}"') + """
[matrix]
mode = ["native", "hybrid"]
runtime = ["charliecloud", "podman", "apptainer"]
mpi = ["mpich"]
[[benchmark]]
kernel = "allgather"
""")
    variants = [variant_id(c.variant) for c in cells(cfg)]
    if setting == "skip":
        assert variants == ["native/mpich", "hybrid/charliecloud/mpich/default"]
    else:
        assert len(variants) == 4
        assert missing_runtimes(cfg, cells(cfg)) == {"podman": 1, "apptainer": 1}


def test_zips_vary_together_and_excludes_remove():
    cfg = parse(BASE + """
[matrix]
mode = ["hybrid", "bind"]
runtime = ["charliecloud", "bwrap"]
mpi = ["openmpi"]
ranks = [1, 2, 4]
threads = [4, 2, 1]
zips = [["ranks", "threads"], ["mode", "runtime"]]
exclude = [{ranks = 1}]
[baseline]
mode = "hybrid"
runtime = "charliecloud"
[[benchmark]]
kernel = "allgather"
""")
    got = {(c.variant["mode"], c.variant["runtime"], c.ranks, c.threads) for c in cells(cfg)}
    assert got == {("hybrid", "charliecloud", 2, 2), ("hybrid", "charliecloud", 4, 1),
                   ("bind", "bwrap", 2, 2), ("bind", "bwrap", 4, 1)}


def test_benchmark_overrides_the_matrix():
    cfg = parse(BASE + """
[matrix]
mode = ["native"]
mpi = ["openmpi"]
ranks = [2]
[[benchmark]]
kernel = "allgather"
[[benchmark]]
kernel = "allgather"
name = "wide"
ranks = [2, 4]
mpi = ["mpich", "openmpi"]
""")
    keys = [c.key for c in cells(cfg)]
    assert keys == ["allgather|n=2|t=1|native/openmpi", "wide|n=2|t=1|native/mpich", "wide|n=4|t=1|native/mpich",
                    "wide|n=2|t=1|native/openmpi", "wide|n=4|t=1|native/openmpi"]


# -- the run order --------------------------------------------------------------------------------------

def _cfg(order="blocks", reps=4, warmup=2):
    return parse(f"""\
[study]
name = "order"
repetitions = {reps}
warmup = {warmup}
order = "{order}"
[matrix]
mode = ["native", "hybrid", "bind"]
mpi = ["openmpi", "mpich"]
[[benchmark]]
kernel = "allgather"
""")


def test_warmups_first_then_complete_randomized_blocks():
    cfg = _cfg()
    cs = [c.key for c in cells(cfg)]
    runs = make_plan(cfg, seed=11)
    assert len(runs) == len(cs) * (2 + 4)
    assert [r.position for r in runs] == list(range(len(runs)))
    warm, timed = runs[:2 * len(cs)], runs[2 * len(cs):]
    assert all(r.warmup and r.block == -1 for r in warm) and not any(r.warmup for r in timed)
    assert [r.cell.key for r in warm] == cs * 2                      # warm-up in matrix order
    assert [r.key for r in warm[:2]] == [f"{cs[0]}#warmup0", f"{cs[1]}#warmup0"]
    blocks = [[r.cell.key for r in timed if r.block == b] for b in range(4)]
    assert all(sorted(b) == sorted(cs) for b in blocks)              # every cell once per block
    assert len({tuple(b) for b in blocks}) > 1                       # shuffled
    assert all(r.repetition == r.block for r in timed)
    assert len({r.key for r in runs}) == len(runs)                    # keys are unique


def test_plan_is_reproducible_from_the_seed_only():
    cfg = _cfg()
    assert [r.key for r in make_plan(cfg, 11)] == [r.key for r in make_plan(cfg, 11)]
    assert [r.key for r in make_plan(cfg, 11)] != [r.key for r in make_plan(cfg, 12)]


def test_sequential_order_is_not_shuffled():
    cfg = _cfg(order="sequential", warmup=0, reps=3)
    cs = [c.key for c in cells(cfg)]
    assert [r.cell.key for r in make_plan(cfg, 5)] == cs * 3


@pytest.mark.parametrize("text, encoded", [
    ("plain-name_1.x", "plain-name_1.x"), ("a|b", "a%7Cb"), ("a#b", "a%23b"), ("100%", "100%25"),
    ("%7C|", "%257C%7C"),
])
def test_key_part_percent_encodes_separators(text, encoded):
    assert key_part(text) == encoded


def test_variant_ids():
    assert variant_id({"mode": "native", "mpi": "mpich", "runtime": None, "image": None}) == "native/mpich"
    # an image given by path: a short, stable label (issue 14), not the path itself
    import hashlib

    assert variant_id({"mode": "bind", "runtime": "bwrap", "mpi": "openmpi", "image": "/x/y.sqfs"}) == \
        f"bind/bwrap/openmpi/y.sqfs-{hashlib.sha256(b'/x/y.sqfs').hexdigest()[:8]}"
    assert variant_id({"name": "tcp", "mode": "hybrid", "runtime": "podman", "mpi": "mpich", "image": "i"}) == "tcp"


def test_baseline_selector_takes_the_rest_from_the_variant():
    cfg = parse(BASE + """
[baseline]
mode = "hybrid"
runtime = "charliecloud"
[matrix]
mode = ["hybrid"]
runtime = ["charliecloud", "bwrap"]
mpi = ["mpich"]
image = ["img"]
[[benchmark]]
kernel = "allgather"
""")
    v = {"mode": "hybrid", "runtime": "bwrap", "mpi": "mpich", "image": "img"}
    assert baseline_of(cfg, v) == {"mode": "hybrid", "runtime": "charliecloud", "mpi": "mpich", "image": "img"}
    native = parse(BASE + '[[benchmark]]\nkernel = "allgather"\n')
    assert baseline_of(native, v) == {"mode": "native", "runtime": None, "mpi": "mpich", "image": None}


# -- refusals, each naming the file and the key -----------------------------------------------------------

@pytest.mark.parametrize("body, message", [
    ('[[benchmark]]\nkernel = "allgather"\n[[benchmark]]\nkernel = "allgather"\n',
     "s.toml: benchmark[1]: 'allgather' is also the name of benchmark[0]: benchmark names must be unique "
     "(give `name =`)"),
    ('[matrix]\nranks = [1, 2]\nthreads = [1]\nzips = [["ranks", "threads"]]\n[[benchmark]]\nkernel = "allgather"\n',
     "s.toml: matrix: zips[0]: zipped dimensions must have equal lengths, found {'ranks': 2, 'threads': 1}"),
    ('[matrix]\nzips = [["ranks", "threads"]]\n[[benchmark]]\nkernel = "allgather"\nranks = [1, 2]\n',
     "s.toml: matrix.zips[0]: zipped dimensions must have equal lengths, found {'ranks': 2, 'threads': 1} for "
     "benchmark[0] (give it its own zips)"),
    ('[matrix]\nmode = ["hybrid"]\n[[benchmark]]\nkernel = "allgather"\n',
     "s.toml: baseline: 'native/openmpi', the baseline of variant 'hybrid/charliecloud/openmpi/default', is not "
     "in the study's matrix: add it, or change [baseline]"),
    ('[matrix]\nmode = ["native"]\nexclude = [{mode = "native"}]\n[[benchmark]]\nkernel = "allgather"\n',
     "s.toml: matrix.exclude: the study's matrix is empty after exclusions"),
    ('[baseline]\nvariant = "nope"\n[[benchmark]]\nkernel = "allgather"\n',
     "s.toml: baseline.variant: no [[variant]] is named 'nope' (named variants: none)"),
    (f'[matrix]\nranks = {list(range(1, 501))}\nthreads = {list(range(1, 301))}\n[[benchmark]]\nkernel = "allgather"\n',
     f"s.toml: benchmark[0]: the study has more than {MAX_CELLS} cells (variants x placements); split it"),
])
def test_study_refusals(body, message):
    with pytest.raises(NearmetalError) as e:
        parse(BASE + body)
    assert str(e.value) == message


def test_too_many_runs():
    body = BASE.replace("repetitions = 3", "repetitions = 10000") + \
        f'[matrix]\nranks = {list(range(1, 21))}\n[[benchmark]]\nkernel = "allgather"\n'
    with pytest.raises(NearmetalError) as e:
        parse(body)
    assert str(e.value) == ("s.toml: study.repetitions: 120 cells x (10000 repetitions + 1 warm-up) = 1200120 runs; "
                            "at most 1000000")


@pytest.mark.parametrize("body, where", [
    ('[matrix]\nmode = ["teleport"]\n', "matrix.mode[0]"),
    ('[matrix]\nruntime = ["singularity"]\n', "matrix.runtime[0]"),
    ('[matrix]\nmpi = ["lam"]\n', "matrix.mpi[0]"),
    ('[matrix]\nranks = [0]\n', "matrix.ranks[0]"),
    ('[matrix]\nthreads = [1025]\n', "matrix.threads[0]"),
    ('[matrix]\nranks = []\n', "matrix.ranks"),
    ('[study.extra]\n', "study.extra"),
])
def test_matrix_values_are_checked_with_their_key_path(body, where):
    with pytest.raises(NearmetalError) as e:
        parse(BASE + body + '[[benchmark]]\nkernel = "allgather"\n')
    assert str(e.value).startswith(f"s.toml: {where}"), str(e.value)
    assert "\n" not in str(e.value)


def test_kernel_rank_counts_are_checked_before_running():
    cfg = parse(BASE + '[matrix]\nranks = [2, 3]\n[[benchmark]]\nkernel = "latency"\n')
    with pytest.raises(NearmetalError) as e:
        config_mod.check_runnable(cfg, "s.toml")
    assert str(e.value) == ("s.toml: matrix.ranks[1]: kernel 'latency' needs exactly 2 ranks, found 3 "
                            "(benchmark[0] uses the matrix's ranks: give it its own ranks)")


def test_builtin_quickstart_parses_and_plans():
    cfg, text = config_mod.builtin_quickstart()
    assert cfg.study.name == "quickstart" and text.startswith("#")
    cs = cells(cfg)
    runs = make_plan(cfg, seed=1)
    assert len(runs) == len(cs) * (cfg.study.first_blocks + cfg.study.warmup)  # adaptive: the first blocks
    ids = {variant_id(c.variant) for c in cs}
    assert all(variant_id(baseline_of(cfg, c.variant)) in ids for c in cs)


# -- Slurm options of a study's jobs ------------------------------------------------------------------------

def test_slurm_job_time_follows_the_study_timeout():
    from nearmetal import schedulers

    slurm = schedulers.get("slurm")
    assert slurm.options({}, timeout=61) == {"time": "2"}
    assert slurm.options({}, timeout=1) == {"time": "1"}
    assert slurm.options({"time": "5:00", "partition": "debug"}, timeout=600) == {"time": "5:00", "partition": "debug"}
    assert schedulers.get("local").options({"partition": "a"}, timeout=5) == {}  # a [slurm] table, run locally
    with pytest.raises(NearmetalError, match="partition"):
        slurm.options({"partition": "a;rm -rf /"})


def test_slurm_section_values_are_checked():
    with pytest.raises(NearmetalError) as e:
        parse(BASE + '[slurm]\ntime = "1 hour"\n[[benchmark]]\nkernel = "allgather"\n')
    assert str(e.value).startswith("s.toml: slurm.time: ")


# -- the store ----------------------------------------------------------------------------------------------

def _planned(cfg, seed=3):
    return [_row(r) for r in make_plan(cfg, seed)]


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "r" / "study.db", what="study 'order'")
    yield s
    s.close()


def _record(metric="latency", value=1.5, **point):
    return {"metric": metric, "unit": "us", "value": value, "point": point or {"size": 8}}


def test_new_store_schema_and_planned_runs(store, tmp_path):
    cfg = _cfg(reps=2, warmup=1)
    rows = _planned(cfg)
    sid = store.create_study("order", "toml", 3, 0.03, {"mode": "native"}, "0.0", "2024-01-01T00:00:00+00:00",
                             planned=rows)
    assert store.study("order")["seed"] == 3 and [s["name"] for s in store.studies()] == ["order"]
    assert json.loads(store.study("order")["baseline_json"]) == {"mode": "native"}
    assert store.counts(sid) == {"planned": len(rows)}
    assert [r["run_key"] for r in store.pending(sid)] == [r["run_key"] for r in rows]
    store.add_planned(sid, rows)  # idempotent by run key
    assert store.counts(sid) == {"planned": len(rows)}
    db = sqlite3.connect(tmp_path / "r" / "study.db")
    assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.close()


def test_a_run_is_stored_once_with_its_records_and_context(store):
    cfg = _cfg(reps=1, warmup=1)
    sid = store.create_study("order", "toml", 3, 0.03, {}, "0.0", "now", planned=_planned(cfg))
    pending = store.pending(sid)
    warm, timed = pending[0], [r for r in pending if not r["warmup"]][0]
    ctx = store.context_id({"host": "h", "cpu": "x"})
    assert store.context_id({"cpu": "x", "host": "h"}) == ctx  # one row per distinct context
    args = ("ok", 0, ["mpirun", "-np", "2"], {"A": "1"}, ctx, "t0", 0.5, "")
    assert store.finish_run(timed["id"], *args, [_record(value=1.0), _record(value=2.0, size=16)])
    assert not store.finish_run(timed["id"], *args, [_record(value=9.0)])  # never twice
    assert store.finish_run(warm["id"], *args, [_record(value=7.0)])
    records = store.records(sid)  # analysed: ok and not warm-up
    assert sorted(r["value"] for r in records) == [1.0, 2.0]
    assert {json.loads(r["point_json"])["size"] for r in records} == {8, 16}
    assert store.counts(sid) == {"planned": len(pending) - 2, "ok": 2}
    assert [json.loads(c["context_json"]) for c in store.contexts(sid)] == [{"cpu": "x", "host": "h"}]
    run = next(r for r in store.runs(sid) if r["id"] == timed["id"])
    assert json.loads(run["argv_json"]) == ["mpirun", "-np", "2"] and run["wall_s"] == 0.5


def test_failed_runs_keep_no_records(store):
    sid = store.create_study("order", "toml", 3, 0.03, {}, "0.0", "now", planned=_planned(_cfg(reps=1, warmup=0)))
    run = store.pending(sid)[0]
    assert store.finish_run(run["id"], "failed", 1, [], {}, None, "t", 0.1, "boom", [])
    assert store.records(sid) == [] and store.counts(sid)["failed"] == 1


def test_batch_jobs(store):
    sid = store.create_study("order", "toml", 3, 0.03, {}, "0.0", "now", planned=_planned(_cfg(reps=1, warmup=0)))
    first, second = store.pending(sid)[:2]
    store.record_job(sid, first["id"], 101)
    store.record_job(sid, second["id"], "102")
    assert [j["job_id"] for j in store.open_jobs(sid)] == ["101", "102"]
    assert store.finish_job(101, "CANCELLED") and not store.finish_job(101, "CANCELLED")
    assert store.finish_run(second["id"], "ok", 0, [], {}, None, "t", 1.0, "", [], job_id=102)
    assert store.open_jobs(sid) == []


def test_import_study_is_one_transaction(store):
    runs = [{"run_key": "k1", "position": 0, "block": 0, "repetition": 0, "warmup": False, "benchmark": "b",
             "kernel": "import", "variant": "native", "variant_json": {"name": "native"}, "ranks": 1, "threads": 1}]
    sid = store.import_study("imp", "csv", None, 0.03, {"variant": "native"}, "0.0", "now", runs, [[_record()]])
    assert [r["value"] for r in store.records(sid)] == [1.5]
    with pytest.raises(NearmetalError):  # the same run key twice: nothing of the second study is kept
        store.import_study("imp2", "csv", None, 0.03, {}, "0.0", "now", runs * 2, [[_record()], [_record()]])
    assert store.study("imp2") is None


def test_readonly_store(store, tmp_path):
    sid = store.create_study("order", "toml", 3, 0.03, {}, "0.0", "now", planned=_planned(_cfg(reps=1, warmup=0)))
    reader = Store(tmp_path / "r" / "study.db", readonly=True)
    try:
        assert reader.counts(sid) == store.counts(sid)
        with pytest.raises(NearmetalError, match="was opened read-only"):
            reader.add_planned(sid, [])
    finally:
        reader.close()


@pytest.mark.parametrize("content, message", [
    (None, "no results database at {p}"),
    (b"hello, not a database" * 10, "{p} is not a nearmetal results database (not an SQLite file)"),
])
def test_readonly_refusals(tmp_path, content, message):
    p = tmp_path / "x.db"
    if content is not None:
        p.write_bytes(content)
    with pytest.raises(NearmetalError) as e:
        Store(p, readonly=True)
    assert str(e.value) == message.format(p=p)


def test_a_foreign_sqlite_file_is_refused_and_left_alone(tmp_path):
    p = tmp_path / "other.db"
    db = sqlite3.connect(p)
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()
    before = p.read_bytes()
    for readonly in (True, False):
        with pytest.raises(NearmetalError) as e:
            Store(p, readonly=readonly)
        assert str(e.value) == f"{p} is not a nearmetal results database (its tables: t)"
    assert p.read_bytes() == before


def test_a_newer_schema_is_refused(tmp_path):
    p = tmp_path / "new.db"
    Store(p).close()
    db = sqlite3.connect(p)
    db.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    db.commit()
    db.close()
    with pytest.raises(NearmetalError) as e:
        Store(p, readonly=True)
    assert str(e.value) == f"{p} has store schema version '99'; this nearmetal reads versions 1, 2, 3, 4"


def test_version_1_store_is_migrated(tmp_path):
    p = tmp_path / "v1.db"
    Store(p).close()
    db = sqlite3.connect(p)
    db.executescript("DROP TABLE jobs; UPDATE meta SET value='1' WHERE key='schema_version';")
    db.close()
    reader = Store(p, readonly=True)
    assert reader.open_jobs(1) == []  # schema 1 read as is: no jobs table
    reader.close()
    Store(p).close()  # a writer migrates
    db = sqlite3.connect(p)
    assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    assert db.execute("SELECT name FROM sqlite_master WHERE name='jobs'").fetchone() is not None
    db.close()


def test_writer_lock_is_reentrant_in_one_process_and_released(tmp_path):
    from nearmetal.study.store.lock import holder, lock_path

    p = tmp_path / "l.db"
    a = Store(p, what="study 'a'")
    b = Store(p, what="study 'b'")  # the same process: re-entrant (io sweep opens the store twice)
    assert holder(p)[1] == "study 'a'"
    b.close()
    assert holder(p)[1] == "study 'a'"
    a.close()
    assert holder(p) is None and lock_path(p).read_text() == ""


def test_the_reference_study_file_in_the_docs_parses_as_written(tmp_path, monkeypatch):
    """docs/study-files.md's reference block, every key at once, is a study file users copy:
    it parses verbatim (its one input, topol.tpr, made where it is read)."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "study-files.md").read_text()
    block = text.split("```toml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "topol.tpr").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    cfg = config_mod.parse(block, source="study-files.md")
    assert [b.label for b in cfg.benchmark] == ["latency", "coupled-mpmd", "gmx_mpi"]
    assert [f.id for f in cfg.finding] == ["bind-matches-native"] and len(cfg.variant) == 1
    assert len(cells(cfg)) > 0


def test_resume_of_a_study_not_there_yet_says_it_starts_it(tmp_path):
    """--resume completes an interrupted study; on a database without it, the study starts, and
    says so (a new user's mistyped --db silently ran a whole study into a new database)."""
    from nearmetal.study.execute import runner

    said = []
    cfg = _cfg(reps=2, warmup=0)
    store, _, new = runner.open_study(cfg, "text", tmp_path / "new.db", resume=True, say=said.append)
    store.close()
    assert new and said[-1] == f"--resume: study 'order' is not in {tmp_path / 'new.db'} yet: starting it"
    said.clear()
    store, _, new = runner.open_study(cfg, "text", tmp_path / "new.db", resume=True, say=said.append)
    store.close()
    assert not new and not any("starting it" in s for s in said)
    store, _, _ = runner.open_study(cfg, "text", tmp_path / "q.db", resume=True, builtin=True, say=said.append)
    store.close()
    assert not any("starting it" in s for s in said)  # the quickstart's script resumes on every run


def test_an_unknown_key_names_the_closest_key_of_its_own_table():
    """A misspelt key is named with the key of the same table it is closest to, at any depth
    (tables, arrays of tables); a key like none says only that it is unknown."""
    text = ('[study]\nname = "s"\nrepetitons = 3\n[matrix]\nmpii = ["openmpi"]\n[[benchmark]]\nkernel = "latency"\n'
            'rankz = [2]\n[[variant]]\nmode = "native"\nmpi = "openmpi"\nenvv = {}\n[baseline]\nmode = "native"\n'
            'colour = 1\n')
    with pytest.raises(NearmetalError) as e:
        config_mod.parse(text, source="f.toml")
    assert str(e.value) == ("f.toml: study.repetitons: unknown key; the closest is 'repetitions'; also "
                            "baseline.colour: unknown key; also matrix.mpii: unknown key; the closest is 'mpi'; also "
                            "variant[0].name: required key is missing; also variant[0].envv: unknown key; the closest "
                            "is 'env'; also benchmark[0].rankz: unknown key; the closest is 'ranks'")


def test_resume_on_a_database_of_other_studies_is_refused_not_the_built_in_started(tmp_path):
    """`study --resume --db theirs.db` without the study's file means the quickstart, which is not
    in it: refused naming the studies it holds (a new user's resume ran the built-in study into
    another study's database); a new database, or one holding the study, goes on."""
    from nearmetal.study.execute import runner
    from nearmetal.study.execute.runner import check_resume

    text = '[study]\nname = "mine"\n[matrix]\nmode = ["native"]\n[[benchmark]]\nkernel = "latency"\n'
    cfg = config_mod.parse(text)
    store, _, _ = runner.open_study(cfg, text, tmp_path / "theirs.db", resume=False, say=lambda m: None)
    store.close()
    with pytest.raises(NearmetalError) as e:
        check_resume(tmp_path / "theirs.db", ["quickstart"])
    assert str(e.value) == (f"--resume: study 'quickstart' is not in {tmp_path / 'theirs.db'}, which holds 'mine': "
                            "give that study's file to resume it, or leave out --resume to add 'quickstart' to it")
    check_resume(tmp_path / "theirs.db", ["x-preselect", "mine"])  # one of them is there
    check_resume(tmp_path / "new.db", ["quickstart"])  # nothing there yet: the quickstart's script starts it so


def test_a_baseline_selector_matching_a_named_variant_names_it_in_the_refusal():
    """[baseline] mode = "native" beside a variant named "native": the selector's id is
    'native/openmpi', which no cell has; the refusal says which key would name it."""
    with pytest.raises(NearmetalError) as e:
        config_mod.parse('[study]\nname = "nb"\n[[variant]]\nname = "native"\nmode = "native"\nmpi = "openmpi"\n'
                         '[[variant]]\nname = "hy"\nmode = "hybrid"\nmpi = "openmpi"\n[baseline]\nmode = "native"\n'
                         '[[benchmark]]\nkernel = "latency"\n')
    assert str(e.value).endswith("is not in the study's matrix: write [baseline] variant = \"native\" (the named "
                                 "variant launched so)"), e.value
    with pytest.raises(NearmetalError) as e:  # a named variant launched otherwise (TCP only) is not offered
        config_mod.parse('[study]\nname = "nb"\n[[variant]]\nname = "nat"\nmode = "native"\nmpi = "openmpi"\n'
                         'env = { OMPI_MCA_btl = "self,tcp" }\n[[variant]]\nname = "hy"\nmode = "hybrid"\n'
                         'mpi = "openmpi"\n[baseline]\nmode = "native"\n[[benchmark]]\nkernel = "latency"\n')
    assert str(e.value).endswith("is not in the study's matrix: add it, or change [baseline]"), e.value
