"""`trace = true` for a study benchmark (study/config/traced.py): the tracer in every run's ranks,
one trace directory per run beside the database with its own report, linked from the
study's report; nothing left in the staging area."""

import json
import os

import pytest

from conftest import nearmetal

STUDY = """
[study]
name = "traced"
repetitions = 2
warmup = 0
[matrix]
mode = ["native", "hybrid"]
mpi = ["mpich"]
[baseline]
mode = "native"
[[benchmark]]
kernel = "iobench"
args = ["-p", "shared", "-L", "mpiio", "-x", "64", "-y", "64", "-z", "4", "-t", "2", "-i", "2x1"]
workdir = "/dev/shm"
metrics = ["write_s"]
trace = {trace}
"""


@pytest.mark.unit
def test_trace_takes_true_or_layers_and_refuses_others():
    from nearmetal.errors import NearmetalError
    from nearmetal.study.plan.study_file import parse

    def bench(value):
        return parse(STUDY.format(trace=value), source="t.toml").benchmark[0]

    assert bench("true").trace_layers() == ()
    assert bench("false").trace_layers() is None
    assert bench('["netcdf", "hdf5"]').trace_layers() == ("netcdf", "hdf5")
    for bad in ('["nfs"]', '"yes"', "1"):
        with pytest.raises(NearmetalError) as e:
            bench(bad)
        assert "benchmark[0].trace" in str(e.value)


def test_a_traced_benchmark_keeps_one_trace_per_run_linked_from_the_report(tmp_path, default_image):
    study = tmp_path / "s.toml"
    study.write_text(STUDY.format(trace="true"))
    staged_before = _staging()
    out = nearmetal("study", study, "--db", tmp_path / "r" / "study.db", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    traces = tmp_path / "r" / "traces"
    dirs = sorted(p.name for p in traces.iterdir())
    assert len(dirs) == 4 and all(d.startswith("traced.iobench") for d in dirs), dirs
    for d in traces.iterdir():
        meta = json.loads((d / "meta.json").read_text())
        assert meta["status"] == "ok" and meta["trace_files"] == 2 and meta["study"] == "traced"
        assert "<svg" in (d / "report.html").read_text()
        a = json.loads(nearmetal("trace", "report", d, "--format", "json", check=True).stdout)
        calls = {(n["layer"], n["function"]): n["calls"] for n in a["nodes"]}
        assert calls[("mpiio", "MPI_File_write_at_all")] == 2 * 2 * 2  # 2 ranks x 2 records x 2 variables
    html = (tmp_path / "r" / "report.html").read_text()
    assert html.count('href="traces/traced.iobench') == 4 and 'id="traces"' in html
    j = nearmetal("report", "--db", tmp_path / "r" / "study.db", "--format", "json", "--out", tmp_path / "j",
                  check=True)
    analysis = json.loads((tmp_path / "j" / "analysis.json").read_text())
    assert {(t["variant"], t["block"]) for t in analysis["traces"]} == {
        ("native/mpich", 0), ("native/mpich", 1),
        ("hybrid/charliecloud/mpich/default", 0), ("hybrid/charliecloud/mpich/default", 1)}, j.stdout
    assert _staging() == staged_before  # the cells' staging directories are gone


def test_a_dry_run_of_a_traced_study_shows_the_preload_and_creates_nothing(tmp_path):
    study = tmp_path / "s.toml"
    study.write_text(STUDY.format(trace='["mpiio", "posix"]'))
    staged_before = _staging()
    out = nearmetal("study", study, "--dry-run", cwd=tmp_path, check=True)
    assert "NM_TRACE_LAYERS=mpiio,posix" in out.stdout and "nm-trace-" in out.stdout
    assert sorted(os.listdir(tmp_path)) == ["s.toml"] and _staging() == staged_before


def _staging():
    shared = f"/tmp/nearmetal-{os.getuid()}"
    return sorted(n for n in os.listdir(shared) if n.startswith("trace-")) if os.path.isdir(shared) else []
