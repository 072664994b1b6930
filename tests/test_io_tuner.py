"""The I/O tuner: configurations and their labels, I/O study validation, pre-selection,
a real sweep through the study engine, `io best` against the stored numbers, --resume;
and the study engine's workdir and per-benchmark env that the tuner relies on."""

import glob
import itertools
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import time
from pathlib import Path

import pytest

from conftest import NEARMETAL, assert_one_line_error, nearmetal
from io_files import parse_hints_file, parse_namelist
from nearmetal.io import config as io_config
from nearmetal.io import preselect
from nearmetal.io.space import LIBRARIES, PATTERNS, READS, Configuration, format_size, parse_size
from nearmetal.io.sweep import expand

# -- configurations ---------------------------------------------------------------------------


def all_configurations():
    for pattern, library, io_layout, aggr, stripes, buf, chunk, read, mpiio in itertools.product(
            PATTERNS, LIBRARIES, [None, "1x1", "2x1"], [None, 1, 4], [None, 8], [None, 65536, 16 << 20, 1000],
            [None, "default", "3x2"], READS, [None, "romio", "ompio"]):
        try:
            yield Configuration(pattern, library, io_layout, aggr, stripes, buf, chunk, read, mpiio)
        except ValueError:
            assert pattern == "shared" and library == "posix"


def test_labels_round_trip_for_every_normalized_configuration():
    seen = {}
    n = 0
    for raw in all_configurations():
        for mpi in (None, "openmpi", "mpich"):
            cfg = raw.normalize(mpi)
            label = cfg.label()
            back = Configuration.from_label(label)
            assert back == cfg, label
            assert back.label() == label
            assert seen.setdefault(label, cfg) == cfg  # one label, one configuration
            n += 1
    assert n > 10000 and len(seen) > 1000


@pytest.mark.parametrize("label, expect", [
    ("shared/pnetcdf io=2x1 aggr=1 stripes=4 cb=16MiB read=parallel mpiio=romio",
     dict(pattern="shared", library="pnetcdf", io_layout="2x1", aggregators=1, stripes=4, buffer=16 << 20,
          read="parallel", mpiio="romio")),
    ("serial/posix read=serial", dict(pattern="serial", library="posix", read="serial")),
    ("shared/hdf5 io=1x1 cb=64KiB chunk=2x2 read=none", dict(pattern="shared", library="hdf5", io_layout="1x1",
                                                             buffer=65536, chunk="2x2", read="none")),
    ("io-domains/netcdf4 io=2x1 chunk=default read=parallel",
     dict(pattern="io-domains", library="netcdf4", io_layout="2x1", chunk="default", read="parallel")),
])
def test_label_grammar(label, expect):
    cfg = Configuration.from_label(label)
    assert cfg == Configuration(**expect)
    assert cfg.label() == label


@pytest.mark.parametrize("label, words", [
    ("", "not an I/O configuration label"),
    ("shared", "PATTERN/LIBRARY"),
    ("shared/posix io=1x1 read=serial", "posix cannot write one shared file"),
    ("shared/lustre io=1x1 read=serial", "unknown library 'lustre'"),
    ("parallel/mpiio read=serial", "unknown pattern 'parallel'"),
    ("serial/posix io=1x1 read=serial", "io= does not apply to serial/posix"),
    ("shared/mpiio read=serial", "io= is missing"),
    ("shared/mpiio io=1x1", "read= is missing"),
    ("shared/mpiio io=1x1 read=serial read=none", "given twice"),
    ("shared/mpiio io=1x1 cb_nodes=2 read=serial", "unknown part 'cb_nodes=2'"),
    ("shared/mpiio io=1x1 cb=16MB read=serial", "cb="),
    ("shared/mpiio io=1x1 aggr=x read=serial", "aggr= needs a positive integer"),
    ("shared/mpiio io=1x1 aggr=0 read=serial", "aggregators must be a positive integer"),
    ("shared/mpiio io=1x1 chunk=2x2 read=serial", "chunk= does not apply to shared/mpiio"),
    ("file-per-rank/mpiio read=parallel", "read=parallel is the same as read=serial"),
    ("serial/posix read=serial mpiio=romio", "mpiio= does not apply"),
    ("shared/mpiio io=1x1 read=serial mpiio=mvapich", "unknown MPI-IO component"),
    ("file-per-rank/posix aggr=2 read=serial", "aggr= does not apply"),
])
def test_bad_labels_are_refused(label, words):
    with pytest.raises(ValueError) as e:
        Configuration.from_label(label)
    assert words in str(e.value)


def test_sizes():
    assert [format_size(x) for x in (1024, 65536, 16 << 20, 1 << 30, 1000, 3 << 19)] == \
        ["1KiB", "64KiB", "16MiB", "1GiB", "1000", "1536KiB"]
    assert parse_size("16MiB") == 16 << 20 and parse_size("4096") == 4096 and parse_size(7) == 7
    for bad in ("16MB", "0", "-1", "x", "1.5MiB"):
        with pytest.raises(ValueError):
            parse_size(bad)


def test_normalize_drops_what_does_not_apply():
    full = dict(io_layout="2x1", aggregators=2, stripes=4, buffer=1 << 20, chunk="2x2", read="parallel", mpiio="romio")
    assert Configuration("serial", "posix", **full).normalize() == Configuration("serial", "posix")
    assert Configuration("file-per-rank", "mpiio", **full).normalize() == \
        Configuration("file-per-rank", "mpiio", read="serial", mpiio="romio")
    assert Configuration("io-domains", "hdf5", **full).normalize() == \
        Configuration("io-domains", "hdf5", io_layout="2x1", chunk="2x2", read="parallel", mpiio="romio")
    assert Configuration("shared", "pnetcdf", **full).normalize("mpich") == \
        Configuration("shared", "pnetcdf", io_layout="2x1", aggregators=2, stripes=4, buffer=1 << 20, read="parallel")
    assert Configuration("shared", "netcdf4").normalize() == \
        Configuration("shared", "netcdf4", io_layout="1x1", chunk="default")


def test_hints_env_and_kernel_arguments():
    cfg = Configuration.from_label("shared/pnetcdf io=2x1 aggr=2 stripes=4 cb=16MiB read=parallel mpiio=romio")
    assert cfg.hints(nodes=3) == {"cb_config_list": "*:2", "cb_nodes": "6", "striping_factor": "4",
                                  "cb_buffer_size": str(16 << 20)}
    assert cfg.env() == {"OMPI_MCA_io": "romio321"}
    assert Configuration.from_label("shared/mpiio io=1x1 read=serial mpiio=ompio").env() == {"OMPI_MCA_io": "ompio"}
    assert Configuration.from_label("serial/posix read=serial").env() == {}
    args = cfg.kernel_args((64, 32, 4), 3, "2x2", ["double"], nodes=3)
    assert args == ["-x", "64", "-y", "32", "-z", "4", "-t", "3", "-l", "2x2", "-p", "shared", "-L", "pnetcdf",
                    "-T", "double", "-i", "2x1", "-H", "cb_config_list=*:2", "-H", "cb_nodes=6",
                    "-H", "striping_factor=4", "-H", f"cb_buffer_size={16 << 20}", "-r", "parallel"]
    assert "-c" in Configuration.from_label("shared/hdf5 io=1x1 chunk=2x2 read=serial").kernel_args((8, 8, 1), 1, "1x1", ["float"])


# -- I/O study files ------------------------------------------------------------------------------

STUDY = """
[study]
name = "{name}"
repetitions = {reps}
warmup = 1
timeout = 120
seed = 3

[io]
grid = [32, 32, 4]
steps = 2
layout = "2x1"
dir = "{dir}"
mpi = {mpi}
{io_extra}

[io.space]
{space}

[io.preselect]
repetitions = 2
"""


def io_study(tmp_path, name="tiny", reps=3, space='pattern = ["serial", "shared"]\nlibrary = ["mpiio"]\n'
             'buffer = ["4MiB", "16MiB"]', mpi='["openmpi"]', io_extra="", target=None):
    target = target or f"/dev/shm/nearmetal-test-io-{os.getpid()}-{name}"
    path = tmp_path / f"{name}.toml"
    path.write_text(STUDY.format(name=name, reps=reps, dir=target, mpi=mpi, io_extra=io_extra, space=space))
    return path, Path(target)


def test_expansion_normalizes_dedupes_and_starts_with_the_serial_reference(tmp_path):
    path, _ = io_study(tmp_path, space='pattern = ["serial", "file-per-rank", "io-domains", "shared"]\n'
                       'library = ["mpiio", "posix", "hdf5"]\nio_layout = ["1x1", "2x1"]\naggregators = ["default", 1]\n'
                       'chunk = ["default", "2x1"]\nread = ["serial", "parallel"]\nmpiio = ["default", "romio"]',
                       mpi='["openmpi", "mpich"]')
    s, _ = io_config.load(path)
    configs = expand(s.io.space, s.io.mpi)
    labels = [c.label() for c, _ in configs]
    assert len(labels) == len(set(labels))
    assert labels[0] == "serial/posix read=serial"          # posix is listed: the reference goes through it
    for cfg, mpis in configs:
        assert cfg == Configuration.from_label(cfg.label())
        assert not (cfg.pattern == "shared" and cfg.library == "posix")
        assert (cfg.chunk is not None) == (cfg.library == "hdf5")
        assert (cfg.aggregators is None) or (cfg.pattern == "shared" and cfg.library != "posix")
        if cfg.mpiio is not None:
            assert mpis == ("openmpi",)                      # the component is an Open MPI choice
        if cfg.library == "posix" or cfg.mpiio is None:
            assert "mpich" in mpis or cfg.mpiio is not None
    # counted by hand: serial: posix 1 + mpiio 2 reads x 2 mpiio + hdf5 2 chunks x 2 reads x 2 mpiio = 13
    serial = [c for c, _ in configs if c.pattern == "serial"]
    assert len(serial) == 1 + 4 + 8
    # under MPICH the mpiio=romio configurations collapse into the default ones
    assert sum(1 for _, m in configs if "mpich" in m) == sum(1 for c, _ in configs if c.mpiio is None)


def test_reference_without_posix_is_the_first_library(tmp_path):
    path, _ = io_study(tmp_path, space='pattern = ["shared"]\nlibrary = ["hdf5", "mpiio"]\nread = ["parallel"]')
    s, _ = io_config.load(path)
    configs = expand(s.io.space, s.io.mpi)
    assert configs[0][0].label() == "serial/hdf5 chunk=default read=parallel"
    assert {c.pattern for c, _ in configs[1:]} == {"shared"}


def test_preselection_varies_one_parameter_at_a_time(tmp_path):
    path, _ = io_study(tmp_path, space='pattern = ["serial", "shared"]\nlibrary = ["mpiio", "netcdf4"]\n'
                       'buffer = ["default", "4MiB"]\nchunk = ["default", "2x1"]')
    s, _ = io_config.load(path)
    base, tests, raws = preselect.plan(s.io.space)
    assert base.label() == "shared/mpiio io=1x1 read=serial"
    by = {t["param"]: t for t in tests}
    assert by["io_layout"]["anchor"] is None                # one value: not tested
    assert by["pattern"]["anchor"] is None and by["library"]["anchor"] is None   # always swept
    assert by["buffer"]["anchor"] == base
    # chunk cannot matter around raw MPI-IO: measured around netcdf4 instead
    assert by["chunk"]["anchor"].library == "netcdf4"
    labels = {c.normalize().label() for c in raws}
    assert labels == {"shared/mpiio io=1x1 read=serial",
                      "shared/netcdf4 io=1x1 chunk=default read=serial", "shared/mpiio io=1x1 cb=4MiB read=serial",
                      "shared/netcdf4 io=1x1 chunk=2x1 read=serial"}


BAD_SPACES = [
    ('io_layout = ["1x1", "3x1"]', "io.space.io_layout[1]: 3x1 does not divide the domain layout 2x1"),
    ('library = ["mpiio", "lustre"]', "io.space.library[1]: Input should be"),
    ('pattern = ["shared", "collective"]', "io.space.pattern[1]: Input should be"),
    ('cb_nodes = [2]', "io.space.cb_nodes: an MPI-IO hint, not a tuning parameter: the tuner sets it from io.space.aggregators"),
    ('romio_cb_write = ["enable"]', "io.space.romio_cb_write: an MPI-IO hint, not a tuning parameter"),
    ('stripe = [4]', "io.space.stripe: unknown parameter"),
    ('aggregators = [0]', "io.space.aggregators: expected positive integers"),
    ('aggregators = ["two"]', 'io.space.aggregators[0]: expected a positive integer or "default"'),
    ('buffer = ["16MB"]', "io.space.buffer: a size must be"),
    ('chunk = ["64x1"]', "io.space.chunk[0]: 64x1 splits the 32x32 grid"),
    ('pattern = ["shared"]\nlibrary = ["posix"]', "posix cannot write one shared file"),
    ('read = ["serial", "serial"]', "io.space.read: 'serial' is listed twice"),
]


@pytest.mark.parametrize("space, expect", BAD_SPACES)
def test_bad_io_studies_fail_in_one_line_before_anything_runs(tmp_path, space, expect):
    path, target = io_study(tmp_path, name="bad", space=space)
    out = nearmetal("io", "sweep", path, "--db", tmp_path / "r" / "study.db")
    err = assert_one_line_error(out)
    assert str(path) in err and expect in err, err
    assert not target.exists() and not (tmp_path / "r").exists()


@pytest.mark.parametrize("target, expect", [("/proc", "io.dir: /proc: not writable"),
                                            ("/proc/nearmetal-io", "io.dir: /proc/nearmetal-io: cannot be created"),
                                            ("/etc/passwd", "io.dir: /etc/passwd: not a directory")])
def test_unusable_target_directory(tmp_path, target, expect):
    path, _ = io_study(tmp_path, name="baddir", target=target)
    err = assert_one_line_error(nearmetal("io", "sweep", path, "--db", tmp_path / "r" / "study.db"))
    assert expect in err
    assert not (tmp_path / "r").exists()


def test_library_unavailable_for_the_mpi_is_refused(tmp_path):
    # Debian packages PnetCDF for Open MPI only: nm-iobench -A of the MPICH build says so
    path, target = io_study(tmp_path, name="nopnetcdf", mpi='["mpich"]',
                            space='pattern = ["shared"]\nlibrary = ["mpiio", "pnetcdf"]')
    err = assert_one_line_error(nearmetal("io", "sweep", path, "--db", tmp_path / "r" / "study.db"))
    assert "io.space.library[1]: pnetcdf is unavailable for mpich (native):" in err, err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("extra, expect", [
    ('nodes = 0', "io.nodes: Input should be greater than or equal to 1"),
    ('metric = "read"', "io.metric: Input should be 'total' or 'write'"),
    ('types = ["double", "int"]', "io.types[1]: Input should be 'double' or 'float'"),
    ('striping = 4', "io.striping: unknown key"),
])
def test_bad_io_keys(tmp_path, extra, expect):
    path, _ = io_study(tmp_path, name="badkey", io_extra=extra)
    err = assert_one_line_error(nearmetal("io", "sweep", path))
    assert str(path) in err and expect in err, err


def test_workdir_in_an_io_study_and_long_names_are_refused(tmp_path):
    path, _ = io_study(tmp_path, name="x" * 55)
    assert "study.name: at most 54 characters" in assert_one_line_error(nearmetal("io", "sweep", path))
    text = STUDY.format(name="w", reps=2, dir="/tmp", mpi='["openmpi"]', io_extra="", space="")
    path = tmp_path / "w.toml"
    path.write_text(text.replace('timeout = 120', 'timeout = 120\nworkdir = "/tmp"'))
    assert "study.workdir: I/O studies run in io.dir" in assert_one_line_error(nearmetal("io", "sweep", path))


def test_io_best_without_a_database(tmp_path):
    err = assert_one_line_error(nearmetal("io", "best", "--db", tmp_path / "none.db"))
    assert "no results database" in err


# -- real sweeps -------------------------------------------------------------------------------


def sweep_medians(db, study, metric="total_s"):
    """Median of the max-over-ranks metric per configuration, straight from SQLite."""
    con = sqlite3.connect(db)
    rows = con.execute(
        "SELECT r.benchmark, c.value FROM records c JOIN runs r ON r.id = c.run_id JOIN studies s ON s.id = r.study_id "
        "WHERE s.name = ? AND r.status = 'ok' AND r.warmup = 0 AND c.metric = ? AND c.point_json = ?",
        (study, metric, json.dumps({"rank": "max"}))).fetchall()
    con.close()
    values = {}
    for bench, value in rows:
        values.setdefault(bench, []).append(value)
    return {b: statistics.median(v) for b, v in values.items()}, values


def run_statuses(db, study):
    con = sqlite3.connect(db)
    rows = con.execute("SELECT r.run_key, r.status, r.started, r.argv_json, r.benchmark FROM runs r JOIN studies s "
                       "ON s.id = r.study_id WHERE s.name = ?", (study,)).fetchall()
    con.close()
    return {r[0]: {"status": r[1], "started": r[2], "argv": json.loads(r[3]) if r[3] else None, "benchmark": r[4]}
            for r in rows}


@pytest.fixture
def cleanup_dirs():
    made = []
    yield made
    import shutil

    for d in made:
        shutil.rmtree(d, ignore_errors=True)


def test_tiny_sweep_and_io_best_pick_the_stored_fastest(tmp_path, cleanup_dirs):
    path, target = io_study(tmp_path)
    cleanup_dirs.append(target)
    db = tmp_path / "res" / "study.db"
    stages = set(glob.glob(f"/tmp/nearmetal-{os.getuid()}/evidence-*"))
    out = nearmetal("io", "sweep", path, "--db", db, "--no-progress", timeout=900)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "pre-selection" in out.stderr and "fastest:" in out.stdout
    assert target.is_dir() and not any(target.iterdir())     # the kernel removes its files
    # the cells' staging directories go with the sweep, as with a study (one per configuration was left)
    assert set(glob.glob(f"/tmp/nearmetal-{os.getuid()}/evidence-*")) <= stages
    # both studies complete, every run ok
    for name, configs in (("tiny-preselect", 2), ("tiny", None)):
        runs = run_statuses(db, name)
        assert runs and all(r["status"] == "ok" for r in runs.values()), runs
        if configs:
            assert len({r["benchmark"] for r in runs.values()}) == configs
            assert len(runs) == configs * (1 + 2)
    decision = json.loads((db.parent / "tiny-preselect.json").read_text())
    # the base named as the runs name configurations (canonical: normalized)
    assert decision["base"] == Configuration.from_label(decision["base"]).normalize().label()
    status = {d["parameter"]: d["status"] for d in decision["parameters"]}
    assert status["pattern"] == "always swept" and status["buffer"] in ("kept", "fixed")
    assert {status[p] for p in status if p not in ("pattern", "buffer")} == {"single value"}
    sweep_labels = {r["benchmark"] for r in run_statuses(db, "tiny").values()}
    assert "serial/mpiio read=serial" in sweep_labels        # the serial reference, always
    buffer = next(d for d in decision["parameters"] if d["parameter"] == "buffer")
    swept_buffers = {l.split("cb=")[1].split()[0] for l in sweep_labels if "cb=" in l}
    assert swept_buffers == set(buffer["sweep"])

    for metric in ("total", "write"):
        out = nearmetal("io", "best", "--db", db, "--metric", metric, "--json")
        assert out.returncode == 0, out.stderr
        # the sweep's own io best answered total: the write answer replaces it, and says so
        assert ("replacing" in out.stderr) == (metric == "write"), out.stderr
        if metric == "write":
            assert "the answer of study 'tiny' (metric total), with that of study 'tiny' (metric write)" in out.stderr
        result = json.loads(out.stdout)
        medians, values = sweep_medians(db, "tiny", f"{metric}_s")
        fastest = min(medians, key=lambda name: (medians[name], name))  # ties by name, as io best breaks them
        assert result["best"] == fastest and result["median_s"] == pytest.approx(medians[fastest])
        assert {r["configuration"] for r in result["rows"]} == sweep_labels
        lo, hi = result["ci"]
        assert min(values[fastest]) <= lo <= result["median_s"] <= hi <= max(values[fastest])
        assert result["reference"] == "serial/mpiio read=serial"
        if fastest != result["reference"]:  # compare()'s paired ratio: the trimmed mean of the block ratios
            from test_io_report import paired_speedup

            expect = paired_speedup(db, f"{metric}_s", "max", result["reference"], fastest)
            assert result["speedup"] == pytest.approx(expect, rel=1e-9)
    # hints file: exactly the -H hints the fastest configuration's runs were given
    argv = next(r["argv"] for r in run_statuses(db, "tiny").values() if r["benchmark"] == result["best"])
    given = dict(a.split("=", 1) for f, a in zip(argv, argv[1:]) if f == "-H")
    hints = parse_hints_file(Path(result["hints_file"]).read_text())
    assert hints == given
    nml = parse_namelist(Path(result["namelist_file"]).read_text())
    cfg = Configuration.from_label(result["best"])
    assert nml[("mpp_io_nml", "parallel_netcdf")] == (".true." if cfg.pattern == "shared" else ".false.")
    assert nml[("mpp_io_nml", "pnetcdf")] == ".false."
    assert nml[("mpp_io_nml", "parallel_read")] == ".false."
    assert nml[("ocean_model_nml", "io_layout")] == "1, 1"


def test_interrupted_sweep_resumes_exactly_the_missing_runs(tmp_path, cleanup_dirs):
    path, target = io_study(tmp_path, name="resume", reps=4)
    cleanup_dirs.append(target)
    db = tmp_path / "res" / "study.db"
    argv = [str(NEARMETAL), "io", "sweep", str(path), "--db", str(db), "--no-progress"]
    # SIGINT back to its default in the child: a shell without job control starts background
    # commands (CI under `cmd &`) with SIGINT ignored, and Python then never raises
    # KeyboardInterrupt, so the Ctrl-C this test sends would be lost.
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 300
    try:
        while time.time() < deadline:  # interrupt inside the sweep proper, after pre-selection
            if db.exists():
                try:
                    runs = run_statuses(db, "resume")
                except sqlite3.OperationalError:
                    runs = {}
                if sum(r["status"] == "ok" for r in runs.values()) >= 2:
                    break
            if proc.poll() is not None:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the sweep ended before it could be interrupted:\n" + proc.stderr.read()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "resume with: nearmetal io sweep" in err and "--resume" in err, err
    before = run_statuses(db, "resume")
    done = {k: r for k, r in before.items() if r["status"] != "planned"}
    missing = {k for k, r in before.items() if r["status"] == "planned"}
    assert done and missing
    # without --resume: refused, nothing runs
    again = nearmetal("io", "sweep", path, "--db", db)
    assert "already exists" in assert_one_line_error(again)
    assert run_statuses(db, "resume") == before
    out = nearmetal("io", "sweep", path, "--db", db, "--resume", "--no-progress", timeout=900)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"{len(missing)} to run" in out.stderr
    after = run_statuses(db, "resume")
    assert set(after) == set(before)
    assert all(r["status"] == "ok" for r in after.values())
    for k, r in done.items():   # finished runs were not run again
        assert after[k]["started"] == r["started"]
    pre = run_statuses(db, "resume-preselect")
    assert all(r["status"] == "ok" for r in pre.values())
    # a changed I/O study cannot resume this database
    path.write_text(path.read_text().replace("repetitions = 4", "repetitions = 5"))
    err = assert_one_line_error(nearmetal("io", "sweep", path, "--db", db, "--resume"))
    assert "was planned from a different study file" in err


# -- the study engine pieces the tuner uses ----------------------------------------------------


def test_study_workdir_and_benchmark_env_reach_the_ranks(tmp_path, cleanup_dirs):
    work = tmp_path / "work" / "here"          # created on first use
    study = tmp_path / "s.toml"
    args = '["-x", "16", "-y", "16", "-z", "2", "-l", "2x1", "-p", "shared", "-L", "mpiio", "-k", ' \
           '"-H", "cb_config_list=*:1"]'
    study.write_text(f"""
[study]
name = "wd"
repetitions = 1
warmup = 0
seed = 1
workdir = "{work}"

[matrix]
mode = ["native"]
mpi = ["openmpi"]

[[benchmark]]
kernel = "iobench"
name = "romio"
args = {args}
env = {{OMPI_MCA_io = "romio321"}}

[[benchmark]]
kernel = "iobench"
name = "ompio"
args = {args}
env = {{OMPI_MCA_io = "ompio"}}
""")
    out = nearmetal("study", study, "--db", tmp_path / "r" / "study.db", "--no-progress")
    assert out.returncode == 0, out.stdout + out.stderr
    con = sqlite3.connect(tmp_path / "r" / "study.db")
    rows = dict(con.execute("SELECT r.benchmark, c.value FROM records c JOIN runs r ON r.id = c.run_id "
                            "WHERE c.metric = 'hint.cb_config_list'").fetchall())
    envs = dict(con.execute("SELECT benchmark, env_json FROM runs").fetchall())
    con.close()
    # ROMIO takes cb_config_list; OMPIO ignores ROMIO hints: the component came from env
    assert rows == {"romio": 1.0, "ompio": 0.0}, (rows, envs)
    kept = sorted(p.name for p in work.iterdir())     # -k kept the files in the working directory
    assert len(kept) == 2 and all(n.endswith(".bin") for n in kept), kept


@pytest.mark.parametrize("workdir, expect", [("/proc/nope", "study.workdir: /proc/nope: cannot be created"),
                                             ("/etc/passwd", "study.workdir: /etc/passwd: not a directory")])
def test_study_workdir_checked_before_any_run(tmp_path, workdir, expect):
    study = tmp_path / "s.toml"
    study.write_text(f'[study]\nname = "wd"\nworkdir = "{workdir}"\n[matrix]\nmode = ["native"]\n'
                     f'mpi = ["openmpi"]\n[[benchmark]]\nkernel = "pingpong"\n')
    err = assert_one_line_error(nearmetal("study", study, "--db", tmp_path / "r" / "study.db"))
    assert expect in err and str(study) in err
    assert not (tmp_path / "r").exists()


def test_bad_benchmark_env_name(tmp_path):
    study = tmp_path / "s.toml"
    study.write_text('[study]\nname = "e"\n[[benchmark]]\nkernel = "pingpong"\nenv = {"1X" = "y"}\n')
    err = assert_one_line_error(nearmetal("study", study, "--dry-run"))
    assert "benchmark[0].env: '1X' is not an environment variable name" in err


def test_sweep_in_containers_writes_into_the_bind_mounted_directory(tmp_path, cleanup_dirs):
    # the same space natively and in containers (hybrid and bind on Charliecloud): io.dir is
    # the ranks' working directory, mounted read-write at /nm/work inside
    path, target = io_study(tmp_path, name="ct", reps=2, space='pattern = ["serial", "shared"]\nlibrary = ["mpiio", "posix"]',
                            io_extra='mode = ["native", "hybrid", "bind"]\nruntime = ["charliecloud"]')
    cleanup_dirs.append(target)
    db = tmp_path / "res" / "study.db"
    out = nearmetal("io", "sweep", path, "--db", db, "--no-progress", timeout=1200)
    assert out.returncode == 0, out.stdout + out.stderr
    runs = run_statuses(db, "ct")
    con = sqlite3.connect(db)
    variants = {r[0] for r in con.execute("SELECT DISTINCT variant FROM runs")}
    argvs = [json.loads(r[0]) for r in con.execute("SELECT argv_json FROM runs WHERE variant NOT LIKE 'native%'")]
    con.close()
    assert variants == {"native/openmpi", "hybrid/charliecloud/openmpi/default", "bind/charliecloud/openmpi/default"}
    assert all(r["status"] == "ok" for r in runs.values()), runs
    assert {r["benchmark"] for r in runs.values()} == {"serial/posix read=serial", "serial/mpiio read=serial",
                                                       "shared/mpiio io=1x1 read=serial"}
    assert argvs and all(f"--bind={target}:/nm/work" in a and "--cd=/nm/work" in a for a in argvs), argvs[0]
    result = json.loads(nearmetal("io", "best", "--db", db, "--json", check=True).stdout)
    assert {r["variant"] for r in result["rows"]} == variants


def test_dry_run_lists_configurations_and_touches_nothing(tmp_path):
    path, target = io_study(tmp_path, name="dry", space='pattern = ["serial", "shared"]\nlibrary = ["mpiio", "posix"]\n'
                            'buffer = ["default", "1MiB"]\nmpiio = ["default", "romio"]')
    out = nearmetal("io", "sweep", path, "--dry-run", "--db", tmp_path / "r" / "study.db")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "# pre-selection 'dry-preselect': 3 configurations, 9 runs"
    assert "OMPI_MCA_io=romio321 nm-iobench -x 32 -y 32 -z 4" in out.stdout
    assert "# sweep 'dry': at most 7 configurations, 28 runs (fewer when pre-selection fixes parameters)" in lines
    assert lines[-7] == "serial/posix read=serial  [openmpi]"
    assert not target.exists() and not (tmp_path / "r").exists()
