"""`nearmetal trace` and `trace report` (trace/command.py, callpath.py, render.py): the
analysis on hand-made traces (unit), then real traced MPI runs of nm-iobench through the
command line, and bad input."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import assert_one_line_error, local_slurm_env, nearmetal
from nearmetal.trace import callpath, render
from nearmetal.trace.reader import EVENTS, LAYERS, Process, Trace

NEARMETAL = os.path.join(os.path.dirname(sys.executable), "nearmetal")


def _proc(rank, rows):
    """A Process from rows (seq, parent, layer, function, start_us, end_us, size, file)."""
    names = sorted({r[3] for r in rows})
    fid = {n: k + 1 for k, n in enumerate(names)}
    ev = np.zeros(len(rows), EVENTS)
    for k, (seq, parent, layer, fn, t0, t1, size, path) in enumerate(rows):
        ev[k] = (seq, parent, int(t0 * 1000), int(t1 * 1000), -1, size, 0, 1, fid[fn], LAYERS.index(layer), 0,
                 1 if path else 0, 0)
    return Process(path=f"r{rank}", host="h", pid=100 + rank, rank=rank, env_rank=rank, layers=LAYERS, events=ev,
                   functions={v: k for k, v in fid.items()}, files={1: "/d/f.nc"}, complete=True)


def _two_ranks():
    # rank 0: nc_put_vara_double -> MPI_File_write_at_all -> pwrite (an aggregator);
    # rank 1: the same netCDF and MPI-IO calls, no POSIX write of its own
    r0 = [(1, 0, "netcdf", "nc_put_vara_double", 0, 100, 800, True),
          (2, 1, "mpiio", "MPI_File_write_at_all", 10, 90, 800, True),
          (3, 2, "posix", "pwrite", 20, 80, 1600, True),
          (4, 0, "posix", "fstat", 200, 200.5, -1, False)]
    r1 = [(1, 0, "netcdf", "nc_put_vara_double", 0, 60, 800, True),
          (2, 1, "mpiio", "MPI_File_write_at_all", 5, 55, 800, True)]
    return Trace(directory="t", processes=[_proc(0, r0), _proc(1, r1)])


@pytest.mark.unit
def test_the_call_path_graph_takes_the_largest_rank_and_counts_ranks_on_each_path():
    a = callpath.analyze(_two_ranks())
    nodes = {(n["layer"], n["function"]): n for n in a["nodes"]}
    assert nodes[("netcdf", "nc_put_vara_double")]["max_rank_s"] == pytest.approx(100e-6)
    assert nodes[("netcdf", "nc_put_vara_double")]["ranks"] == 2
    assert nodes[("posix", "pwrite")]["ranks"] == 1 and nodes[("posix", "pwrite")]["bytes"] == 1600
    edges = {(e["parent"]["function"], e["child"]["function"]): e for e in a["edges"]}
    assert edges[("nc_put_vara_double", "MPI_File_write_at_all")]["ranks"] == 2
    assert edges[("nc_put_vara_double", "MPI_File_write_at_all")]["max_rank_s"] == pytest.approx(80e-6)
    assert edges[("MPI_File_write_at_all", "pwrite")]["ranks"] == 1
    # the 0.5 µs fstat is under 1% of the largest node's 100 µs: omitted and counted
    assert ("application", "fstat") not in edges and a["omitted_edges"] == 1
    paths = {w["layer"]: w for w in a["write_paths"]}
    assert paths["posix"]["writing_ranks"] == 1 and paths["mpiio"]["writing_ranks"] == 2
    assert [r["s"] for r in paths["posix"]["per_rank_s"]] == pytest.approx([60e-6, 0.0])
    f = a["files"][0]
    assert f["path"] == "/d/f.nc" and f["layers"]["posix"]["bytes_written"] == 1600


@pytest.mark.unit
def test_lengths_are_not_bytes_moved_and_write_paths_take_every_write_function():
    """A new file length (set_size, ftruncate) is not data read or written; a layer's write
    path adds all its write functions (doubles and floats), so layers compare fairly."""
    rows = [(1, 0, "netcdf", "nc_put_vara_double", 0, 50, 800, True),
            (2, 0, "netcdf", "nc_put_vara_float", 60, 80, 400, True),
            (3, 0, "mpiio", "MPI_File_set_size", 90, 95, 999999, True),
            (4, 3, "posix", "ftruncate", 91, 94, 999999, True),
            (5, 0, "posix", "pread", 100, 110, 64, True)]
    a = callpath.analyze(Trace(directory="t", processes=[_proc(0, rows)]), threshold=0)
    f = a["files"][0]["layers"]
    assert f["posix"] == {"calls": 2, "bytes_written": 0, "bytes_read": 64}
    assert f["mpiio"] == {"calls": 1, "bytes_written": 0, "bytes_read": 0}
    assert {n["function"]: n["bytes"] for n in a["nodes"]}["ftruncate"] == 0
    nc = next(w for w in a["write_paths"] if w["layer"] == "netcdf")
    assert nc["functions"] == ["nc_put_vara_double", "nc_put_vara_float"] and nc["calls"] == 2
    assert nc["per_rank_s"] == [{"rank": 0, "s": pytest.approx(70e-6)}]
    assert a["omitted_edges"] == 0 and len(a["edges"]) == 5  # threshold 0: every path


@pytest.mark.unit
def test_the_reports_render_the_analysis():
    a = callpath.analyze(_two_ranks())
    text = render.dot(a)
    assert text.startswith("digraph callpath {") and text.count("->") == len(a["edges"])
    assert 'label="nc_put_vara_double\\n100 µs"' in text and 'label="80 µs [2]"' in text
    md = render.markdown(a)
    assert "| posix | pwrite | 1 | 1600 | 1 | 60 µs | 60 µs |" in md
    assert json.loads(render.as_json(a))["omitted_edges"] == 1
    bars = render.write_paths_svg(a)  # Fig. 13: one bar per rank per layer's write path
    assert bars.count("<rect") == 2 * len(a["write_paths"]) and "posix pwrite" in bars and ">60 µs<" in bars


@pytest.mark.unit
def test_a_short_run_has_a_timeline_per_rank(monkeypatch):
    monkeypatch.setattr(render.shutil, "which", lambda name: None)  # the page without Graphviz: DOT text
    a = callpath.analyze(_two_ranks())
    tl = a["timeline"]
    assert len(tl) == 6 and min(e["start_s"] for e in tl) == 0.0
    first = next(e for e in tl if e["rank"] == 0 and e["function"] == "pwrite")
    assert first["start_s"] == pytest.approx(20e-6) and first["end_s"] == pytest.approx(80e-6)
    svg = render.timeline_svg(a)
    assert svg.count("<rect") == 6 and "rank 0" in svg and "rank 1" in svg
    page = render.page(a)
    assert "<h2>Timeline per rank</h2>" in page and "Graphviz is not installed" in page and "digraph callpath" in page
    monkeypatch.setattr(callpath, "TIMELINE_MAX", 5)  # a longer run: no timeline, and none drawn
    b = callpath.analyze(_two_ranks())
    assert b["timeline"] is None and render.timeline_svg(b) is None and "Timeline per rank" not in render.page(b)


@pytest.mark.unit
def test_dot_labels_cannot_break_out_of_their_quotes():
    a = callpath.analyze(_two_ranks())
    a["nodes"][0]["function"] = 'evil"]; x -> y; "'
    a["edges"][0]["parent"] = {"layer": a["nodes"][0]["layer"], "function": a["nodes"][0]["function"]}
    assert 'evil\\"]; x -> y; \\"' in render.dot(a)


# ---------------------------------------------------------------------------- real runs

@pytest.mark.parametrize("family", ["openmpi", "mpich"])
def test_a_traced_iobench_run_writes_its_trace_and_reports(tmp_path, host_mpis, family):
    from nearmetal.kernels.build import host_bin

    kernel = os.path.join(host_bin(family), "nm-iobench")
    out = tmp_path / "t"
    r = nearmetal("trace", "-n", "2", "--mpi", family, "--out", out, "--", kernel, "-p", "shared", "-L", "mpiio",
                  "-x", "64", "-y", "64", "-z", "4", "-t", "3", "-i", "2x1", "-d", "/dev/shm", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "verify ok" in r.stdout and f"report: {out}/report.html" in r.stdout
    assert len(list(out.glob("trace-*.nmt"))) == 2
    meta = json.loads((out / "meta.json").read_text())
    assert meta["mpi"] == family and meta["exit_status"] == 0
    assert meta["layers"] == ["netcdf", "pnetcdf", "mpiio", "posix"]
    assert "<svg" in (out / "report.html").read_text()
    j = nearmetal("trace", "report", out, "--format", "json")
    assert j.returncode == 0, j.stderr
    a = json.loads(j.stdout)
    nodes = {(n["layer"], n["function"]): n for n in a["nodes"]}
    # io_layout 2x1: both ranks root an I/O domain and write 3 records x 2 variables each
    assert nodes[("mpiio", "MPI_File_write_at_all")]["calls"] == 2 * 3 * 2
    assert nodes[("mpiio", "MPI_File_write_at_all")]["ranks"] == 2
    # the POSIX writes hang under the collective write (read from the events: the report's graph
    # leaves out paths under 1% of its largest node, which a slow MPI_File_open can make this one)
    from nearmetal.trace.reader import read

    parents = set()
    for p in read(out).processes:
        names = dict(zip(p.events["seq"].tolist(), p.function_names()))
        parents |= {names.get(int(e["parent"])) for e in p.calls("pwrite", "pwritev", "write")}
    assert parents == {"MPI_File_write_at_all"}, parents
    assert a["run"]["argv"][0] == kernel


POSIX_WRITER = r"""
#include <fcntl.h>
#include <unistd.h>
int main(void) { int f = open("out.dat", O_CREAT | O_WRONLY | O_TRUNC, 0644); write(f, "abc", 3); close(f); return 0; }
"""


@pytest.mark.parametrize("fmt", ["md", "json"])
def test_a_traced_run_prints_the_report_in_the_format_asked(tmp_path, fmt):
    """`trace --format md|json -- PROGRAM` wrote the HTML page only and printed its path: the
    format asked for was ignored. Now the report is printed (stdout is the report's alone) and
    the page is still written."""
    (tmp_path / "w.c").write_text(POSIX_WRITER)
    subprocess.run(["cc", "-O1", "-o", tmp_path / "w", tmp_path / "w.c"], check=True)
    out = tmp_path / "t"
    r = nearmetal("trace", "-n", "1", "--format", fmt, "--out", out, "--", tmp_path / "w", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"report: {out}/report.html" in r.stderr and (out / "report.html").exists()
    if fmt == "json":
        assert json.loads(r.stdout)["run"]["argv"] == [str(tmp_path / "w")]
    else:
        assert r.stdout.startswith("#") and "out.dat" in r.stdout, r.stdout[:300]


def test_an_interrupted_trace_says_what_it_kept_and_leaves_no_process(tmp_path, host_mpis):
    """^C while the ranks run: the trace directory keeps what the ranks wrote (here nothing: they
    made no traced call yet), meta.json says interrupted, and the line says so
    instead of a bare 'interrupted' over an empty directory (a new user's 3 s trace)."""
    import signal
    import time

    from conftest import NEARMETAL
    from test_lifetime import _table, descendants

    out = tmp_path / "t"
    # SIGINT back to its default in the child: CI may start the suite as a background job, whose
    # commands inherit SIGINT ignored (Python then never raises KeyboardInterrupt, and nearmetal
    # rightly ran on until the ranks' 60 s were over: the "hang" session 43's CI saw)
    proc = subprocess.Popen([str(NEARMETAL), "trace", "-n", "2", "--mpi", "openmpi", "--out", str(out), "--",
                             "sleep", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    # the ranks themselves (argv "sleep 60"), not nm-supervise or the launcher, whose argv hold those words
    while sum(c.split()[:2] in (["sleep", "60"], ["/usr/bin/sleep", "60"]) for c in descendants(proc.pid).values()) < 2 \
            and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "the ranks were ended before they wrote any trace" in err and f"{out} holds meta.json only" in err, err
    assert json.loads((out / "meta.json").read_text())["status"] == "interrupted"
    time.sleep(0.5)
    left = [c for _, state, c in _table().values() if c.startswith("sleep 60") and state not in "ZX"]
    assert not left and "Traceback" not in err, left  # the ranks ended with nearmetal


SLOW_WRITER = r"""
#include <fcntl.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv)
{
    int fd = open(argv[1], O_CREAT | O_WRONLY | O_TRUNC, 0600);
    struct timespec pause = {0, 50000000};
    for (int i = 0; i < 1200; i++) { write(fd, "0123456789", 10); nanosleep(&pause, NULL); } /* 60 s */
    return 0;
}
"""


def test_a_timed_out_trace_keeps_its_calls_and_reports_them(tmp_path, host_mpis):
    """--timeout kills the ranks: their trace up to about a second before is kept (the tracer
    writes a waiting buffer at the next call), reported, and the error line says where."""
    (tmp_path / "w.c").write_text(SLOW_WRITER)
    subprocess.run(["cc", "-O1", "-o", tmp_path / "w", tmp_path / "w.c"], check=True)
    out = tmp_path / "t"
    r = nearmetal("trace", "-n", "1", "--mpi", "openmpi", "--timeout", "8", "--out", out, "--", tmp_path / "w",
                  tmp_path / "w.dat", timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stderr.rstrip().splitlines()[-1].endswith(f"timed out after 8 s; the job's process tree was ended; "
                                                       f"the trace up to then is in {out}"), r.stderr
    assert f"report: {out}/report.html" in r.stdout and (out / "report.html").is_file()
    assert json.loads((out / "meta.json").read_text())["status"] == "timeout"
    a = json.loads(nearmetal("trace", "report", out, "--format", "json").stdout)
    writes = [n for n in a["nodes"] if n["function"] == "write"]
    assert writes and writes[0]["calls"] >= 30, writes  # 8 s at 20 writes a second, less the last second
    assert len(a["incomplete_ranks"]) == 1


def test_bad_input_is_one_line(tmp_path):
    static = tmp_path / "static"
    (tmp_path / "s.c").write_text("int main(void) { return 0; }\n")
    subprocess.run(["cc", "-static", "-o", str(static), str(tmp_path / "s.c")], check=True)
    empty, junk = tmp_path / "empty", tmp_path / "junk"
    empty.mkdir()
    junk.mkdir()
    (junk / "trace-x-1.nmt").write_bytes(b"not a trace")
    cases = [
        (["trace", "--layers", "netcdf,nfs", "--", "true"], "unknown value 'nfs'"),
        (["trace", "--", static], "statically linked: preloading the tracer cannot work"),
        (["trace", "report", empty], "no trace files (trace-*.nmt) in"),
        (["trace", "report", tmp_path / "nope"], "is not a trace directory (no such directory)"),
        (["trace", "report", tmp_path / "s.c"], "is not a trace directory (a file, not a directory)"),
        (["trace", "report", junk], "not an nm-trace file"),
        (["trace"], "no program to trace"),
        (["trace", "report", junk, "--threshold", "1.5"], "expected a share from 0 to below 1"),
        # a run's options given to a report were ignored without a word
        (["trace", "report", junk, "--layers", "posix"], "trace report: error: unrecognized arguments: --layers posix"),
        (["trace", "report", junk, "--", "ls"], "a report runs no program (given: ls)"),
        (["trace", "--layers", "posix", "report", junk], "trace report: error: --layers is an option of a traced run"),
        (["trace", "-n", "3", "report", junk], "trace report: error: -n is an option of a traced run, not of a report"),
    ]
    for argv, expect in cases:
        err = assert_one_line_error(nearmetal(*argv, cwd=tmp_path))
        assert expect in err, (argv, err)


@pytest.mark.unit
def test_trace_report_help_shows_the_reports_options_only(capsys):
    """`trace report --help` printed the whole traced run's help (launch options and all)."""
    from nearmetal.cli import main

    def helped(*argv):
        with pytest.raises(SystemExit) as e:
            main(list(argv))
        assert e.value.code == 0
        return capsys.readouterr().out

    said = helped("trace", "report", "--help")
    assert said.startswith("usage: nearmetal trace report ") and "--format" in said and "--threshold" in said
    assert "--mode" not in said and "--layers" not in said and "--timeout" not in said
    assert "nearmetal trace report --help" in " ".join(helped("trace", "--help").split())


def test_a_program_that_stops_before_any_traced_call_leaves_no_trace(tmp_path, host_mpis):
    """nm-iobench refusing its own argument traces nothing: no empty trace-DATE directory is
    left behind, and the last line says why (a walk-through found one in its cwd, '0 calls')."""
    out = nearmetal("trace", "-n", 2, "--", "nm-iobench", "-H", "cb_nodes=two", "-d", tmp_path, cwd=tmp_path,
                    timeout=300)
    assert out.returncode == 2, out.stderr
    assert out.stderr.rstrip().splitlines()[-1] == ("nearmetal trace: error: nm-iobench exited with status 2 before "
                                                    "it made any traced call: no trace kept")
    assert "nm-iobench: hint cb_nodes wants a positive integer" in out.stderr  # the program's own word, kept
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "mine").mkdir()  # a directory the user made is theirs: kept, with what was written
    nearmetal("trace", "-n", 2, "--out", tmp_path / "mine", "--", "nm-iobench", "-H", "cb_nodes=two", "-d", tmp_path,
              timeout=300)
    assert (tmp_path / "mine" / "meta.json").is_file()


@pytest.mark.parametrize("family, mode, runtime, image", [
    ("mpich", "hybrid", "charliecloud", None), ("openmpi", "bind", "charliecloud", None),
    ("mpich", "hybrid", "charliecloud", "nm-bullseye-mpich"),  # an older glibc (2.31) and the image's MPICH 3.4
    ("openmpi", "hybrid", "apptainer", None), ("mpich", "bind", "podman", None)])
def test_a_traced_run_in_a_container(tmp_path, default_image, bullseye_image, family, mode, runtime, image):
    """The tracer is built once on the host (glibc 2.17 symbols at most) and placed under /tmp,
    which every runtime shows at the same path: the ranks in the image preload it and write
    their trace there too, whatever the image's glibc and MPI."""
    if runtime == "apptainer":
        from test_apptainer import _apptainer_or_skip

        _apptainer_or_skip()
    out = tmp_path / "t"
    r = nearmetal("trace", "-n", "2", "--mode", mode, "--runtime", runtime, "--mpi", family, "--out", out,
                  *(["--image", image] if image else []), "--", "nm-iobench", "-p", "shared", "-L", "mpiio",
                  "-x", "64", "-y", "64", "-z", "4", "-t", "2", "-i", "2x1", "-d", "/dev/shm", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    a = json.loads(nearmetal("trace", "report", out, "--format", "json", check=True).stdout)
    nodes = {(n["layer"], n["function"]): n for n in a["nodes"]}
    assert nodes[("mpiio", "MPI_File_write_at_all")]["calls"] == 2 * 2 * 2
    assert a["run"]["mode"] == mode and a["run"]["runtime"] == runtime
    assert sorted(a["ranks"]) == [0, 1]


@pytest.fixture(scope="module")
def slurm_env(tmp_path_factory):
    yield from local_slurm_env(tmp_path_factory, nodes=2)


@pytest.mark.parametrize("allocation", [False, True])
def test_under_slurm_only_the_ranks_are_traced(tmp_path, slurm_env, allocation):
    """As a batch job (sbatch: its script's shell and srun inherit the job's environment) and
    inside an allocation (srun directly): LD_PRELOAD goes on the ranks' command line, so
    exactly the 2 ranks leave a trace, not sbatch, bash or srun."""
    from nearmetal.trace.reader import read

    out = tmp_path / "t"
    argv = ["trace", "--scheduler", "slurm", "-n", "2", "--mpi", "mpich", "--out", out, "--", "nm-iobench", "-p",
            "shared", "-L", "mpiio", "-x", "64", "-y", "64", "-z", "4", "-t", "2", "-i", "2x1", "-d", "/dev/shm"]
    if allocation:  # salloc runs nearmetal inside a job: srun steps, no batch script
        argv = ["salloc", "-n", "2", "--quiet", str(NEARMETAL)] + [str(a) for a in argv]
        r = subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ, **slurm_env), timeout=300,
                           cwd=tmp_path)
    else:
        r = nearmetal(*argv, env=slurm_env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    t = read(out)
    assert sorted(p.rank for p in t.processes) == [0, 1], [(p.pid, p.rank) for p in t.processes]
    calls = sum(len(p.calls("MPI_File_write_at_all")) for p in t.processes)
    assert calls == 2 * 2 * 2


def test_netcdf4_file_size_queries_are_mpiio_calls(tmp_path, host_mpis):
    """HDF5 asks MPI-IO for the file's size (MPI_File_get_size, which seeks): that call is
    traced, so the lseek hangs under it, never straight under a netCDF call; with
    --threshold 0 the report keeps nc_close's short paths."""
    from nearmetal.trace.reader import read

    out = tmp_path / "t"
    r = nearmetal("trace", "-n", "2", "--mpi", "openmpi", "--threshold", "0", "--out", out, "--", "nm-iobench",
                  "-p", "shared", "-L", "netcdf4", "-x", "64", "-y", "64", "-z", "4", "-t", "2", "-i", "2x1",
                  "-d", "/dev/shm", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    parents = set()
    for p in read(out).processes:
        names = dict(zip(p.events["seq"].tolist(), p.function_names()))
        parents |= {names.get(int(e["parent"])) for e in p.calls("lseek")}
    assert parents == {"MPI_File_get_size"}, parents
    a = json.loads(nearmetal("trace", "report", out, "--format", "json", "--threshold", "0", check=True).stdout)
    assert a["omitted_edges"] == 0
    assert any(e["parent"]["function"] == "nc_close" for e in a["edges"])
