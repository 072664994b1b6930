"""nm-startup and nm-metadata: real MPI ranks, natively and in containers (hybrid and bind).

nm-startup: with NM_LAUNCH_NS (given with --env, so it must reach every rank, also inside
the container, and win over the stamp nearmetal itself puts on the launcher) the wall time
is measured from that timestamp (source=launch_env) and must lie between 0 and the time the
whole command took; with an empty NM_LAUNCH_NS, from the process start in /proc/self/stat
(source=proc_stat). Nonsense timestamps are refused.
nm-metadata: the counts are those asked for; a changed file, a library that is not its own
object, NM_CORRUPT=1 and -C all fail verification; a missing tree is a clear exit-2 error.
Timings are never asserted (2 shared cores), only their consistency.
"""

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from conftest import REPO, nearmetal

FAMILIES = ("openmpi", "mpich")
SCHEMA = json.loads((REPO / "src/nearmetal/schemas/bench-record.schema.json").read_text())
STARTUP_METRICS = {"wall_to_main", "cpu_to_main", "idle", "mpi_init", "to_after_init", "proc_wall_to_main"}
TICK = 0.011  # /proc/self/stat resolution (1/CLK_TCK = 10 ms) plus slack


@pytest.fixture(autouse=True)
def _no_inherited_launch_ns(monkeypatch):
    monkeypatch.delenv("NM_LAUNCH_NS", raising=False)
    monkeypatch.delenv("NM_CORRUPT", raising=False)


def _records(out):
    from jsonschema import Draft202012Validator

    assert out.returncode == 0, f"exit {out.returncode}\nstdout:\n{out.stdout}\nstderr:\n{out.stderr}"
    validator = Draft202012Validator(SCHEMA)
    recs = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    for r in recs:
        validator.validate(r)
    return recs


def _table(recs):
    """{(rank, metric): record}"""
    return {(r["params"]["rank"], r["metric"]): r for r in recs}


def _bench(kernel, *args, ranks=2, env=None):
    return nearmetal("bench", kernel, "--json", "-n", ranks, *args, env=env, timeout=300)


def _container(mode, image):
    return ("--mode", mode, "--runtime", "charliecloud", "--image", image.name)


# ---------------------------------------------------------------- nm-startup

def _startup_with_launch_ns(*args, ranks=2, back=0.0):
    """nm-startup with NM_LAUNCH_NS = now - back seconds; also returns the elapsed time from it."""
    launch = time.time_ns() - int(back * 1e9)
    out = _bench("startup", *args, "--env", f"NM_LAUNCH_NS={launch}", ranks=ranks)
    elapsed = (time.time_ns() - launch) * 1e-9
    return _records(out), elapsed


def _check_startup(recs, ranks, source, elapsed):
    t = _table(recs)
    assert {r["metric"] for r in recs} == STARTUP_METRICS
    assert {r["params"]["rank"] for r in recs} == set(range(ranks)) | {"max", "mean"}
    for r in recs:
        assert r["unit"] == "s"
        assert r["params"]["source"] == ("proc_stat" if r["metric"] == "proc_wall_to_main" else source), r
    for rank in range(ranks):
        v = {m: t[rank, m]["value"] for m in STARTUP_METRICS}
        assert 0 <= v["cpu_to_main"] and 0 <= v["mpi_init"], v
        assert v["cpu_to_main"] <= v["wall_to_main"] + TICK, v
        assert v["wall_to_main"] <= elapsed, f"wall to main {v['wall_to_main']} s > whole command {elapsed} s"
        assert v["idle"] == pytest.approx(v["wall_to_main"] - v["cpu_to_main"], abs=2e-6)
        assert v["to_after_init"] == pytest.approx(v["wall_to_main"] + v["mpi_init"], abs=2e-6)
        assert v["to_after_init"] <= elapsed
        # the process was forked after the launch timestamp: its own age is no longer
        if source == "launch_env":
            assert v["proc_wall_to_main"] <= v["wall_to_main"] + TICK, v
        else:
            assert v["proc_wall_to_main"] == v["wall_to_main"]
    for m in STARTUP_METRICS:
        vals = [t[rank, m]["value"] for rank in range(ranks)]
        assert t["max", m]["value"] == pytest.approx(max(vals), abs=2e-6)
        assert t["mean", m]["value"] == pytest.approx(sum(vals) / ranks, abs=2e-6)


@pytest.mark.parametrize("family", FAMILIES)
def test_startup_native_launch_env(family):
    recs, elapsed = _startup_with_launch_ns("--mpi", family)
    _check_startup(recs, 2, "launch_env", elapsed)
    assert all(r["params"]["mode"] == "native" and r["params"]["mpi"] == family for r in recs)


def test_startup_native_proc_stat_one_rank():
    start = time.time()
    recs = _records(_bench("startup", "--mpi", "mpich", "--env", "NM_LAUNCH_NS=", ranks=1))
    _check_startup(recs, 1, "proc_stat", time.time() - start)


@pytest.mark.parametrize("family", FAMILIES)
def test_startup_native_nearmetal_stamp(family):
    """Without --env, nearmetal stamps NM_LAUNCH_NS itself when it starts the launcher."""
    start = time.time()
    recs = _records(_bench("startup", "--mpi", family))
    _check_startup(recs, 2, "launch_env", time.time() - start)


@pytest.mark.parametrize("mode", ["native", "hybrid", "bind"])
def test_startup_given_launch_ns_wins(mode, request):
    """A timestamp 30 s back must show as a wall of at least 30 s: the rank used the value
    given with --env, not nearmetal's own stamp."""
    args = _container(mode, request.getfixturevalue("default_image")) if mode != "native" else ()
    recs, elapsed = _startup_with_launch_ns("--mpi", "mpich", *args, back=30.0)
    _check_startup(recs, 2, "launch_env", elapsed)
    assert all(r["value"] >= 30.0 for r in recs if r["metric"] in ("wall_to_main", "idle", "to_after_init"))
    assert all(r["value"] < 30.0 for r in recs if r["metric"] == "proc_wall_to_main")


@pytest.mark.parametrize("mode", ["hybrid", "bind"])
@pytest.mark.parametrize("family", FAMILIES)
def test_startup_container_launch_env(family, mode, default_image):
    recs, elapsed = _startup_with_launch_ns("--mpi", family, *_container(mode, default_image))
    _check_startup(recs, 2, "launch_env", elapsed)
    assert all(r["params"]["mode"] == mode and r["params"]["image"] == default_image.name for r in recs)


def test_startup_container_proc_stat(default_image):
    start = time.time()
    recs = _records(_bench("startup", "--mpi", "mpich", *_container("hybrid", default_image), "--env", "NM_LAUNCH_NS="))
    _check_startup(recs, 2, "proc_stat", time.time() - start)


@pytest.mark.parametrize("value, message", [
    (str(time.time_ns() + 3600 * 10**9), "wall_to_main_s = -"),  # an hour in the future: negative wall
    ("12abc", "NM_LAUNCH_NS must be CLOCK_REALTIME nanoseconds"),
])
def test_startup_refuses_bad_launch_timestamp(value, message):
    out = _bench("startup", "--mpi", "mpich", "--env", f"NM_LAUNCH_NS={value}")
    assert out.returncode != 0, out.stdout
    assert message in out.stderr, out.stderr


# ---------------------------------------------------------------- nm-metadata

def _check_metadata(recs, ranks, files, libs):
    t = _table(recs)
    assert {r["params"]["rank"] for r in recs} == set(range(ranks)) | {"max"}
    for rank in list(range(ranks)) + ["max"]:
        assert t[rank, "files"]["value"] == files and t[rank, "files"]["unit"] == "count"
        assert t[rank, "libraries"]["value"] == libs and t[rank, "libraries"]["unit"] == "count"
        # files are 200..3999 bytes of body plus a 64-byte header
        assert 264 * files <= t[rank, "bytes"]["value"] <= 4063 * files
        for m in ("files_s", "dlopen_s", "total_s"):
            assert t[rank, m]["unit"] == "s" and t[rank, m]["value"] >= 0
        if rank != "max":  # the max row holds each column's own max
            assert t[rank, "total_s"]["value"] == pytest.approx(
                t[rank, "files_s"]["value"] + t[rank, "dlopen_s"]["value"], abs=3e-6)
    for m in ("files_s", "dlopen_s", "total_s", "bytes"):
        assert t["max", m]["value"] == pytest.approx(max(t[r, m]["value"] for r in range(ranks)), abs=2e-6)


@pytest.mark.parametrize("family", FAMILIES)
def test_metadata_native_counts(family):
    recs = _records(_bench("metadata", "--mpi", family, "--", "-n", "137", "-m", "7"))
    _check_metadata(recs, 2, 137, 7)


def test_metadata_native_whole_tree_one_rank():
    recs = _records(_bench("metadata", "--mpi", "mpich", ranks=1))
    _check_metadata(recs, 1, 1000, 100)


@pytest.mark.parametrize("mode", ["hybrid", "bind"])
@pytest.mark.parametrize("family", FAMILIES)
def test_metadata_container_counts(family, mode, default_image):
    recs = _records(_bench("metadata", "--mpi", family, *_container(mode, default_image), "--", "-n", "250", "-m", "20"))
    _check_metadata(recs, 2, 250, 20)


@pytest.mark.parametrize("how", ["env", "option"])
def test_metadata_corruption_is_detected(how):
    args = ("--env", "NM_CORRUPT=1", "--", "-n", "20", "-m", "3") if how == "env" else ("--", "-n", "20", "-m", "3", "-C")
    out = _bench("metadata", "--mpi", "mpich", *args)
    assert out.returncode != 0, out.stdout
    assert "checksum mismatch" in out.stderr and "nm_md_lib_index() returned 0, expected 1" in out.stderr
    assert "verification failed" in out.stderr


def test_metadata_corruption_is_detected_in_container(default_image):
    out = _bench("metadata", "--mpi", "mpich", *_container("bind", default_image), "--env", "NM_CORRUPT=1",
                 "--", "-n", "5", "-m", "0")
    assert out.returncode != 0, out.stdout
    assert "checksum mismatch" in out.stderr


@pytest.fixture()
def tree_copy(tmp_path):
    from nearmetal.kernels import host_bin

    tree = Path(host_bin("mpich")).parent / "share" / "metadata"
    assert (tree / "MANIFEST").is_file(), f"host build made no tree at {tree}"
    dst = tmp_path / "metadata"
    shutil.copytree(tree, dst)
    return dst


def test_metadata_detects_a_changed_file(tree_copy):
    victim = tree_copy / "py/p00/s1/mod_000013.py"
    data = bytearray(victim.read_bytes())
    data[-5] ^= 0x20  # flip the case of one letter near the end
    victim.write_bytes(bytes(data))
    out = _bench("metadata", "--mpi", "mpich", "--", "-d", tree_copy, "-n", "20", "-m", "0")
    assert out.returncode != 0 and "exit status 1" in out.stderr, out.stdout + out.stderr
    assert f"{victim}: checksum mismatch" in out.stderr
    ok = _records(_bench("metadata", "--mpi", "mpich", "--", "-d", tree_copy, "-n", "13", "-m", "2"))
    _check_metadata(ok, 2, 13, 2)  # the files before it are fine


def test_metadata_detects_a_library_that_is_not_its_own_object(tree_copy):
    # the same inode under two names: the loader hands back the object it already has
    lib3 = tree_copy / "lib/d00/libnmmd_0003.so"
    lib3.unlink()
    os.link(tree_copy / "lib/d00/libnmmd_0002.so", lib3)
    out = _bench("metadata", "--mpi", "openmpi", "--", "-d", tree_copy, "-n", "0", "-m", "5")
    assert out.returncode != 0 and "exit status 1" in out.stderr, out.stdout + out.stderr
    assert "libnmmd_0003.so: nm_md_lib_index() returned 2, expected 3" in out.stderr


@pytest.mark.parametrize("where", ["native", "hybrid"])
def test_metadata_missing_tree(where, request):
    args = _container("hybrid", request.getfixturevalue("default_image")) if where == "hybrid" else ()
    out = _bench("metadata", "--mpi", "mpich", *args, "--", "-d", "/nonexistent")
    assert out.returncode != 0
    assert "no metadata tree at /nonexistent (/nonexistent/MANIFEST: No such file or directory)" in out.stderr
    assert "exit status 2" in out.stderr


def test_metadata_refuses_more_than_the_tree_holds():
    out = _bench("metadata", "--mpi", "mpich", "--", "-n", "1001")
    assert out.returncode != 0
    assert "asked for 1001 files" in out.stderr and "has 1000 and 100" in out.stderr


def test_metadata_finds_its_tree_when_started_through_ld_so():
    """`ld.so PROGRAM` (how bind mode runs programs whose RPATH pins the image's MPI) makes
    /proc/self/exe the loader: the default tree is then found from argv[0]."""
    from nearmetal.kernels import host_bin

    loader = "/lib64/ld-linux-x86-64.so.2"
    assert os.path.exists(loader), f"no {loader} on this x86-64 host"
    prog = os.path.join(host_bin("mpich"), "nm-metadata")
    out = nearmetal("run", "--mpi", "mpich", "-n", "1", "--", loader, prog, "-n", "3", "-m", "2", timeout=120)
    assert out.returncode == 0, out.stderr
    from nearmetal.kernels.parsers import metadata

    recs = metadata.parse(out.stdout, "metadata", {})
    _check_metadata(recs, 1, 3, 2)
    assert f"dir={Path(prog).resolve().parent.parent / 'share' / 'metadata'} " in out.stdout


# ---------------------------------------------------------------- parsers

def test_parsers_skip_headers_and_keep_summary_rows():
    from nearmetal.kernels.parsers import metadata, startup

    text = ("# rank  source wall_to_main_s cpu_to_main_s idle_s mpi_init_s to_after_init_s proc_wall_s\n"
            "  0 launch_env 1.5 0.25 1.25 0.5 2.0 0.01\n"
            "  mean mixed 1.5 0.25 1.25 0.5 2.0 0.01\n"
            "  1 garbage 1 2 3 4 5 6\n")
    recs = startup.parse(text, "startup", {"mode": "native"})
    assert len(recs) == 12
    t = _table(recs)
    assert t[0, "idle"]["value"] == 1.25 and t[0, "idle"]["params"] == {"mode": "native", "rank": 0, "source": "launch_env"}
    assert t["mean", "to_after_init"]["params"]["source"] == "mixed"
    assert t[0, "proc_wall_to_main"]["params"]["source"] == "proc_stat"
    recs = metadata.parse("# rank files libraries bytes files_s dlopen_s total_s\n  max 3 2 900 0.1 0.2 0.3\n",
                          "metadata", {})
    assert {(r["metric"], r["value"]) for r in recs} == {("files", 3), ("libraries", 2), ("bytes", 900),
                                                        ("files_s", 0.1), ("dlopen_s", 0.2), ("total_s", 0.3)}
