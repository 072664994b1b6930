"""nm-iobench, the FMS/MOM5-style parallel I/O kernel: real MPI ranks, real files.

Every write pattern with the posix and mpiio libraries, 2 and 4 ranks, both MPIs, an uneven
grid (23 x 19: blocks of 12/11 and 10/9 points), read back serially and in parallel and
verified by the kernel; -C must make verification fail. Kept files (-k) are read from Python
with numpy and compared with the formula, so a kernel that verified its own mistakes would
still be caught. Hints: what ROMIO reports back must appear as honoured or changed, striping
on a file system that is not Lustre and ROMIO-only hints under OMPIO as ignored. Bad input:
exit 2 and one line on stderr, and no file written. Timings are never asserted (2 shared
cores), only their consistency.
"""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, nearmetal

FAMILIES = ("openmpi", "mpich")
SCHEMA = json.loads((REPO / "src/nearmetal/schemas/bench-record.schema.json").read_text())
NX, NY, NZ, STEPS = 23, 19, 3, 2
GRID = ["-x", str(NX), "-y", str(NY), "-z", str(NZ), "-t", str(STEPS)]
TIMES = ("open_s", "write_s", "close_s", "read_s", "total_s")
# (ranks, layout, io_layout): one domain of two ranks; two domains of two ranks each
LAYOUTS = {2: ("2x1", "1x1"), 4: ("2x2", "1x2")}
CASES = [(p, lib) for p in ("serial", "file-per-rank", "io-domains", "shared") for lib in ("posix", "mpiio")
         if (p, lib) != ("shared", "posix")]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    monkeypatch.delenv("OMPI_MCA_io", raising=False)
    monkeypatch.delenv("NM_CORRUPT", raising=False)


def run_kernel(family, ranks, *kargs, env=(), timeout=180):
    """The host nm-iobench through `nearmetal run`: the kernel's own stdout and stderr."""
    envargs = [a for k, v in env for a in ("--env", f"{k}={v}")]
    return nearmetal("run", "--mpi", family, "-n", ranks, *envargs, "--", "nm-iobench", *kargs, timeout=timeout)


def ok(out):
    assert out.returncode == 0, f"exit {out.returncode}\nstdout:\n{out.stdout}\nstderr:\n{out.stderr}"
    return out.stdout


def parse(text):
    from nearmetal import kernels

    return kernels.parse(kernels.get("iobench"), text, {})


def table(records):
    return {(r["params"]["rank"], r["metric"]): r["value"] for r in records}


def config(text):
    line = next(l for l in text.splitlines() if l.startswith("# config "))
    return dict(tok.split("=", 1) for tok in line.split()[2:])


def hint_lines(text):
    """{key: (requested, effective, status)}"""
    out = {}
    for line in text.splitlines():
        m = re.fullmatch(r"# hint (\S+) requested=(\S+) effective=(\S+) (.+)", line)
        if m:
            out[m[1]] = (m[2], m[3], m[4])
    return out


def effective(text):
    line = next(l for l in text.splitlines() if l.startswith("# effective"))
    return dict(tok.split("=", 1) for tok in line.split()[2:])


def expected(nx, ny, x0, y0, xl, yl, t, is_double):
    """The formula over a block: g = (z*ny + y)*nx + x; (g % 1000003) + 0.25 t (+ 0.5 for floats)."""
    z, y, x = np.meshgrid(np.arange(NZ), np.arange(y0, y0 + yl), np.arange(x0, x0 + xl), indexing="ij")
    g = (z * ny + y) * nx + x
    v = (g % 1000003) + 0.25 * t + (0.0 if is_double else 0.5)
    return v.astype(np.float64 if is_double else np.float32)


def writers_of(pattern, ranks):
    """World ranks that open and write a file (domain roots), for LAYOUTS."""
    if pattern == "serial":
        return {0}
    if pattern == "file-per-rank":
        return set(range(ranks))
    return {0} if ranks == 2 else {0, 2}  # 2x2 layout, io_layout 1x2: rows 0 and 1


# ---------------------------------------------------------------- every pattern x posix/mpiio

@pytest.mark.parametrize("read", ["serial", "parallel"])
@pytest.mark.parametrize("pattern, library", CASES)
@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("family", FAMILIES)
def test_pattern_writes_reads_and_verifies(family, ranks, pattern, library, read, tmp_path):
    layout, io_layout = LAYOUTS[ranks]
    text = ok(run_kernel(family, ranks, *GRID, "-l", layout, "-i", io_layout, "-p", pattern, "-L", library,
                         "-r", read, "-d", tmp_path))
    assert text.splitlines()[0] == "# nm-iobench 1"
    assert text.rstrip().endswith("verify ok"), text
    cfg = config(text)
    writers = writers_of(pattern, ranks)
    nfiles = 1 if pattern in ("serial", "shared") else len(writers)
    assert cfg["pattern"] == pattern and cfg["library"] == library and cfg["read"] == read
    assert cfg["grid"] == f"{NX}x{NY}x{NZ}" and cfg["layout"] == layout
    assert int(cfg["writers"]) == len(writers) and int(cfg["files"]) == nfiles
    assert cfg["mpiio"] == ("ompio" if family == "openmpi" else "romio")
    assert list(tmp_path.iterdir()) == [], "files must be removed without -k"

    t = table(parse(text))
    assert t["total", "bytes"] == NX * NY * NZ * STEPS * (8 + 4)
    assert t["total", "files"] == nfiles
    assert t["total", "write_bw"] > 0 and t["total", "read_bw"] > 0
    for r in range(ranks):
        assert (t[r, "open_s"] > 0) == (r in writers), (r, t[r, "open_s"])
        assert r in writers or t[r, "close_s"] == 0, (r, t[r, "close_s"])  # a writer's close may take < 1 us
        assert t[r, "read_s"] > 0
        assert t[r, "total_s"] == pytest.approx(sum(t[r, m] for m in TIMES[:4]), abs=5e-6)
    for m in TIMES:
        assert t["max", m] == max(t[r, m] for r in range(ranks))
    assert {k for k, _ in t} == set(range(ranks)) | {"max", "total"}


@pytest.mark.parametrize("family", FAMILIES)
def test_bench_json_records(family, tmp_path):
    from jsonschema import Draft202012Validator

    out = nearmetal("bench", "iobench", "--json", "--mpi", family, "-n", 2, "--",
                    *GRID, "-p", "shared", "-L", "mpiio", "-d", tmp_path, "-H", "cb_buffer_size=1048576", timeout=180)
    ok(out)
    records = [json.loads(l) for l in out.stdout.splitlines() if l.strip()]
    validator = Draft202012Validator(SCHEMA)
    for r in records:
        validator.validate(r)
        assert r["kernel"] == "iobench" and r["params"]["mpi"] == family
    units = {r["metric"]: r["unit"] for r in records}
    assert units == {**{m: "s" for m in TIMES}, "bytes": "bytes", "files": "count", "write_bw": "MB/s",
                     "read_bw": "MB/s", "hint.cb_buffer_size": "bool"}
    assert table(records)["total", "hint.cb_buffer_size"] == 1


@pytest.mark.parametrize("family", FAMILIES)
def test_read_none_skips_verification(family, tmp_path):
    text = ok(run_kernel(family, 2, *GRID, "-p", "io-domains", "-r", "none", "-d", tmp_path))
    assert text.rstrip().endswith("read_MBps - verify skipped"), text
    t = table(parse(text))
    assert ("total", "read_bw") not in t
    assert all(t[r, "read_s"] == 0 for r in (0, 1, "max"))


# ---------------------------------------------------------------- verification must be able to fail

@pytest.mark.parametrize("pattern, library", [("shared", "mpiio"), ("serial", "posix"), ("io-domains", "mpiio")])
@pytest.mark.parametrize("family", FAMILIES)
def test_corruption_fails_verification(family, pattern, library, tmp_path):
    out = run_kernel(family, 2, *GRID, "-p", pattern, "-L", library, "-d", tmp_path, "-C")
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stdout.rstrip().endswith("verify FAILED 2 mismatches"), out.stdout  # one per rank
    assert "nm-iobench: rank 0: temp_r8 t=0 (z,y,x)=(0,0,0): read 0, expected 1" in out.stderr
    assert "verification failed: 2 values read back differ" in out.stderr
    bench = nearmetal("bench", "iobench", "--mpi", family, "-n", 2, "--", *GRID, "-p", pattern, "-L", library,
                      "-d", tmp_path, "-C", timeout=180)
    assert bench.returncode != 0 and "failed with exit status 1" in bench.stderr, bench.stderr


# ---------------------------------------------------------------- the files themselves

def kept_files(text):
    return [Path(l[len("# file "):]) for l in text.splitlines() if l.startswith("# file ")]


def read_raw(path, nx, ny, types):
    """A raw file with the netCDF-3 record layout: per record each variable's [z][y][x]."""
    fields = [(name, "<f8" if d else "<f4", (NZ, ny, nx)) for name, d in types]
    dtype = np.dtype(fields)
    assert path.stat().st_size == dtype.itemsize * STEPS, f"{path}: {path.stat().st_size} bytes"
    return np.fromfile(path, dtype=dtype, count=STEPS)


@pytest.mark.parametrize("family, pattern, library, types", [
    ("mpich", "shared", "mpiio", "double,float"),
    ("openmpi", "shared", "mpiio", "double,float"),
    ("openmpi", "serial", "posix", "double,float"),
    ("mpich", "serial", "posix", "float"),
    ("mpich", "io-domains", "posix", "double"),
    ("openmpi", "file-per-rank", "mpiio", "double,float"),
])
def test_kept_files_hold_the_formula(family, pattern, library, types, tmp_path):
    ranks, (layout, io_layout) = 4, LAYOUTS[4]
    text = ok(run_kernel(family, ranks, *GRID, "-l", layout, "-i", io_layout, "-p", pattern, "-L", library,
                         "-T", types, "-d", tmp_path, "-k"))
    files = kept_files(text)
    pid = re.fullmatch(rf"nmio-(\d+)-{pattern}.*\.bin", files[0].name)[1]
    vars_ = [("temp_r8", True), ("temp_r4", False)] if types == "double,float" else \
        [("temp_r8", True)] if types == "double" else [("temp_r4", False)]
    if pattern in ("serial", "shared"):
        assert files == [tmp_path / f"nmio-{pid}-{pattern}.bin"]
        regions = [(0, 0, NX, NY)]
    else:
        # file-per-rank: one file per rank's block; io-domains 1x2 on 2x2: one file per row of ranks
        xs, ys = [(0, 12), (12, 11)], [(0, 10), (10, 9)]
        if pattern == "file-per-rank":
            regions = [(x0, y0, xl, yl) for (y0, yl) in ys for (x0, xl) in xs]
        else:
            regions = [(0, y0, NX, yl) for (y0, yl) in ys]
        assert files == [tmp_path / f"nmio-{pid}-{pattern}.{k:04d}.bin" for k in range(len(regions))]
    assert sorted(tmp_path.iterdir()) == sorted(files)
    for path, (x0, y0, xl, yl) in zip(files, regions):
        data = read_raw(path, xl, yl, vars_)
        for t in range(STEPS):
            for name, is_double in vars_:
                want = expected(NX, NY, x0, y0, xl, yl, t, is_double)
                assert np.array_equal(data[name][t], want), f"{path} {name} t={t}"


def test_runs_get_their_own_files(tmp_path):
    first = kept_files(ok(run_kernel("mpich", 2, *GRID, "-p", "shared", "-d", tmp_path, "-k")))
    second = kept_files(ok(run_kernel("mpich", 2, *GRID, "-p", "shared", "-d", tmp_path, "-k")))
    assert len(first) == len(second) == 1 and first != second
    assert sorted(tmp_path.iterdir()) == sorted(first + second)


# ---------------------------------------------------------------- hints

SHARED2 = [*GRID, "-l", "2x1", "-i", "2x1", "-p", "shared", "-L", "mpiio"]  # two writers


def test_romio_hints_round_trip_under_mpich(tmp_path):
    text = ok(run_kernel("mpich", 2, *SHARED2, "-d", tmp_path, "-H", "cb_buffer_size=1048576", "-H", "cb_nodes=2",
                         "-H", "cb_config_list=*:2", "-H", "romio_cb_write=enable"))
    hints, eff = hint_lines(text), effective(text)
    assert hints["cb_buffer_size"] == ("1048576", "1048576", "honoured")
    assert hints["cb_nodes"] == ("2", "2", "honoured")
    assert hints["cb_config_list"] == ("*:2", "*:2", "honoured")
    assert hints["romio_cb_write"] == ("enable", "enable", "honoured")
    assert eff["cb_buffer_size"] == "1048576" and eff["cb_nodes"] == "2"
    assert eff["romio_aggregator_list"] == "0_1"  # both writers aggregate
    t = table(parse(text))
    assert all(t["total", f"hint.{k}"] == 1 for k in hints)
    # ROMIO reports its own values, not an echo: its defaults without hints, and a clamp
    plain = effective(ok(run_kernel("mpich", 2, *SHARED2, "-d", tmp_path)))
    assert plain["cb_buffer_size"] == "16777216" and plain["cb_nodes"] == "1"
    clamped = hint_lines(ok(run_kernel("mpich", 2, *SHARED2, "-d", tmp_path, "-H", "cb_nodes=4")))
    assert clamped["cb_nodes"] == ("4", "1", "changed")


@pytest.mark.parametrize("where, fs", [("tmp", "ext4"), ("shm", "tmpfs")])
def test_striping_is_ignored_off_lustre(where, fs, tmp_path):
    target = tmp_path
    if where == "shm":
        target = Path(f"/dev/shm/nm-iobench-test-{os.getpid()}")
        target.mkdir()
    try:
        text = ok(run_kernel("mpich", 2, *SHARED2, "-d", target, "-H", "striping_factor=4",
                             "-H", "striping_unit=1048576"))
    finally:
        if where == "shm":
            shutil.rmtree(target)
    assert f"# fs {target} {fs}" in text.splitlines()
    hints = hint_lines(text)
    assert hints["striping_factor"][2] == f"ignored: {fs} is not Lustre"
    assert hints["striping_unit"][2] == f"ignored: {fs} is not Lustre"
    t = table(parse(text))
    assert t["total", "hint.striping_factor"] == 0 and t["total", "hint.striping_unit"] == 0


@pytest.mark.parametrize("component", ["ompio", "romio321"])
def test_open_mpi_components(component, tmp_path):
    env = [("OMPI_MCA_io", component)] if component == "romio321" else []
    text = ok(run_kernel("openmpi", 2, *SHARED2, "-d", tmp_path, "-H", "cb_buffer_size=1048576",
                         "-H", "romio_cb_write=enable", env=env))
    assert config(text)["mpiio"] == component
    hints = hint_lines(text)
    assert hints["cb_buffer_size"] == ("1048576", "1048576", "honoured")
    if component == "romio321":
        assert hints["romio_cb_write"] == ("enable", "enable", "honoured")
    else:
        assert hints["romio_cb_write"][2] == "ignored: OMPIO does not use ROMIO hints"


def test_posix_ignores_hints(tmp_path):
    text = ok(run_kernel("mpich", 2, *GRID, "-p", "serial", "-L", "posix", "-d", tmp_path, "-H", "cb_nodes=1"))
    assert hint_lines(text)["cb_nodes"] == ("1", "-", "ignored: posix does not use MPI-IO")
    assert not any(l.startswith("# effective") for l in text.splitlines())


# ---------------------------------------------------------------- availability

@pytest.mark.parametrize("family", FAMILIES)
def test_availability_list(family):
    lines = ok(run_kernel(family, 1, "-A")).splitlines()
    assert [l.split()[0] for l in lines] == ["posix", "mpiio", "pnetcdf", "netcdf4", "hdf5"]
    available = {l.split()[0] for l in lines if l.split()[1] == "available"}
    assert available == ({"posix", "mpiio", "pnetcdf", "netcdf4", "hdf5"} if family == "openmpi"
                         else {"posix", "mpiio", "hdf5"}), lines
    for l in lines:
        assert l.split()[1] == "available" or re.fullmatch(r"\S+ unavailable: .{20,}", l), l


# ---------------------------------------------------------------- bad input

@pytest.fixture()
def immutable_dir(tmp_path):
    """A directory even root cannot create files in (ext4's immutable attribute)."""
    d = tmp_path / "frozen"
    d.mkdir()
    chattr = shutil.which("chattr")
    assert chattr, "chattr (e2fsprogs) is needed to make a directory root cannot write"
    subprocess.run([chattr, "+i", str(d)], check=True)
    yield d
    subprocess.run([chattr, "-i", str(d)], check=True)


BAD = [
    (["-l", "2x1", "-i", "3x1"], "io_layout 3x1 does not divide layout 2x1"),
    (["-l", "3x1"], "layout 3x1 has 3 ranks, but 2 are running"),
    (["-H", "cb_nodez=2"], "unknown hint 'cb_nodez'"),
    (["-H", "cb_nodes=two"], "hint cb_nodes wants a positive integer, got 'two'"),
    (["-L", "netcdf3"], "unknown library 'netcdf3' (choose from: posix mpiio pnetcdf netcdf4 hdf5)"),
    (["-p", "shared", "-L", "posix"], "library posix cannot write a shared file"),
    (["-p", "shared", "-L", "mpiio", "-c", "2x2"], "-c (chunk layout) applies to netcdf4 and hdf5 only, not mpiio"),
    (["-p", "diagonal"], "unknown pattern 'diagonal'"),
    (["-r", "sometimes"], "unknown read mode 'sometimes'"),
    (["-r", "none", "-C"], "-C (corrupt the expected values) needs verification"),
    (["-x", "1"], "grid 1x19 is smaller than layout 2x1"),
    (["-q"], "unknown option -q"),
]


@pytest.mark.parametrize("args, message", BAD, ids=[m.split("(")[0][:40] for _, m in BAD])
def test_bad_input_one_line_exit_2(args, message, tmp_path):
    out = run_kernel("mpich", 2, *GRID, "-d", tmp_path, *args)
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stderr.splitlines() == [out.stderr.strip()] and out.stderr.startswith("nm-iobench: "), out.stderr
    assert message in out.stderr, out.stderr
    assert out.stdout == ""
    assert list(tmp_path.iterdir()) == [], "validation must come before any file is written"


@pytest.mark.parametrize("family", FAMILIES)
def test_bad_input_through_bench(family, tmp_path):
    out = nearmetal("bench", "iobench", "--mpi", family, "-n", 2, "--", *GRID, "-d", tmp_path, "-i", "3x1",
                    timeout=120)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    # one line: the kernel's own message as the error, without the launcher's banners (Open MPI
    # printed 13 lines around it, and the message twice); --verbose keeps the launcher's output
    assert out.stderr.splitlines() == [
        "nearmetal bench: error: kernel 'iobench' failed with exit status 2: nm-iobench: io_layout 3x1 does not "
        "divide layout 2x1 (ix must divide px and iy must divide py) (--verbose shows the launcher's whole output)"]
    verbose = nearmetal("bench", "iobench", "--mpi", family, "-n", 2, "--verbose", "--", *GRID, "-d", tmp_path,
                        "-i", "3x1", timeout=120)
    assert verbose.returncode == 2
    assert [l for l in verbose.stderr.splitlines() if l.startswith("nm-iobench: io_layout 3x1")], verbose.stderr


def test_unwritable_directories(immutable_dir):
    out = run_kernel("mpich", 2, *GRID, "-d", immutable_dir)
    assert out.returncode == 2 and out.stderr == f"nm-iobench: target directory {immutable_dir} is not writable: " \
                                                 "Operation not permitted\n", out.stderr
    for target, why in (("/proc", "is not writable"), ("/nonexistent/dir", "No such file or directory"),
                        ("/etc/hostname", "is not a directory")):
        out = run_kernel("mpich", 2, *GRID, "-d", target)
        assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
        assert out.stderr.startswith(f"nm-iobench: target directory {target}") and why in out.stderr, out.stderr


def test_unavailable_library_under_mpich(tmp_path):
    for lib in ("pnetcdf", "netcdf4"):
        out = run_kernel("mpich", 2, *GRID, "-d", tmp_path, "-p", "shared", "-L", lib)
        assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
        assert out.stderr.startswith(f"nm-iobench: library {lib} is not available in this build: "), out.stderr


# ---------------------------------------------------------------- parser

REPORT = """# nm-iobench 1
# config pattern=shared library=mpiio grid=8x8x2 steps=1 layout=2x1 io_layout=1x1 types=double,float chunk=default read=serial writers=1 files=1 mpiio=romio
# fs /dev/shm tmpfs
# hint cb_buffer_size requested=1048576 effective=1048576 honoured
# hint cb_nodes requested=4 effective=1 changed
# hint striping_factor requested=4 effective=- ignored: tmpfs is not Lustre
# effective cb_buffer_size=1048576 cb_nodes=1
# something a later version adds
# file /dev/shm/nmio-1-shared.bin
rank open_s write_s close_s read_s total_s
0 0.1 0.2 0.3 0.4 1.0
1 0.0 0.5 0.0 0.25 0.75
max 0.1 0.5 0.3 0.4 1.0
# bytes 1536 files 1 write_MBps 12.5 read_MBps - verify skipped
"""


def test_parser_records():
    records = parse(REPORT)
    t = table(records)
    assert t[0, "total_s"] == 1.0 and t[1, "write_s"] == 0.5 and t["max", "read_s"] == 0.4
    assert t["total", "bytes"] == 1536 and t["total", "files"] == 1 and t["total", "write_bw"] == 12.5
    assert ("total", "read_bw") not in t  # read_MBps '-'
    assert (t["total", "hint.cb_buffer_size"], t["total", "hint.cb_nodes"], t["total", "hint.striping_factor"]) \
        == (1, 1, 0)
    assert len(records) == 3 * 5 + 3 + 3


@pytest.mark.parametrize("text", [
    "# nm-iobench 1\n# config pattern=shared\n",
    REPORT.replace("max 0.1 0.5 0.3 0.4 1.0\n", ""),
    REPORT.replace("# bytes", "# byte"),
    "posix available\nmpiio available\n",
])
def test_parser_refuses_output_without_the_table(text):
    with pytest.raises(ValueError):
        parse(text)


def test_parser_empty_output_has_no_records():
    assert parse("") == []


# ================================================================ high-level libraries
# (helper B's section: the pnetcdf, netcdf4 and hdf5 backends and their build detection)
# Kept files are read back with the libraries' own command-line readers (ncdump, h5dump), not
# with the kernel: the values must be the formula, the headers the layout nm-iobench promises
# (CDF-5 / netCDF-4 / HDF5, dims time unlimited x z x y x, FMS chunk_layout chunks).

HL_EXT = {"pnetcdf": ".nc", "netcdf4": ".nc4", "hdf5": ".h5"}
HL_FORMAT = {"pnetcdf": "cdf5", "netcdf4": "netCDF-4"}


def hl_tool(name, package):
    path = shutil.which(name)
    assert path, f"{name} ({package}) is needed to read the files nm-iobench keeps"
    return path


def hl_run(argv):
    out = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"{argv}: exit {out.returncode}\n{out.stderr}"
    return out.stdout


def hl_numbers(text):
    return np.array([float(v) for v in re.split(r"[,\s]+", text.strip()) if v])


def hl_values(library, path, name):
    """One variable's values, all records, in file order, as the library's own reader prints them."""
    if library == "hdf5":
        text = hl_run([hl_tool("h5dump", "hdf5-tools"), "-y", "-w", "0", "-d", f"/{name}", path])
        return hl_numbers(re.search(r"DATA \{(.*?)\}", text, re.S)[1])
    text = hl_run([hl_tool("ncdump", "netcdf-bin"), "-p", "9,17", "-v", name, path])
    return hl_numbers(re.search(rf"\n {name} =(.*?);", text, re.S)[1])


def hl_regions(pattern):
    """(x0, y0, xl, yl) of each kept file for LAYOUTS[4] (2x2 ranks, io_layout 1x2) on the 23 x 19 grid."""
    xs, ys = [(0, 12), (12, 11)], [(0, 10), (10, 9)]
    if pattern in ("serial", "shared"):
        return [(0, 0, NX, NY)]
    if pattern == "file-per-rank":
        return [(x0, y0, xl, yl) for (y0, yl) in ys for (x0, xl) in xs]
    return [(0, y0, NX, yl) for (y0, yl) in ys]


def hl_check_header(library, path, xl, yl, vars_, chunk):
    """Format, dimensions, variable types and the storage layout, from the readers' headers."""
    want_chunk = None
    if chunk != "default":
        cx, cy = map(int, chunk.split("x"))
        want_chunk = (1, NZ, -(-yl // cy), -(-xl // cx))
    if library == "hdf5":
        text = hl_run([hl_tool("h5dump", "hdf5-tools"), "-H", "-p", path])
        names = re.findall(r'DATASET "(\w+)"', text)
        assert sorted(names) == sorted(n for n, _ in vars_), text
        for name, is_double in vars_:
            block = text[text.index(f'DATASET "{name}"'):]
            assert f"H5T_IEEE_F{64 if is_double else 32}LE" in block.split("DATASET")[1], block
            dims = f"( {STEPS}, {NZ}, {yl}, {xl} )"
            if want_chunk:
                assert f"SIMPLE {{ {dims} / ( H5S_UNLIMITED, {NZ}, {yl}, {xl} ) }}" in block, block
                assert "CHUNKED ( %d, %d, %d, %d )" % want_chunk in block, block
            else:
                assert f"SIMPLE {{ {dims} / {dims} }}" in block and "CONTIGUOUS" in block, block
            assert "H5D_FILL_TIME_NEVER" in block.split("DATASET")[1], block
        return
    ncdump = hl_tool("ncdump", "netcdf-bin")
    assert hl_run([ncdump, "-k", path]).strip() == HL_FORMAT[library]
    # -s (special attributes) only for netCDF-4: ncdump 4.9.0 fails on it for CDF-5 files
    text = hl_run([ncdump, "-hs" if library == "netcdf4" else "-h", path])
    assert f"time = UNLIMITED ; // ({STEPS} currently)" in text, text
    assert f"z = {NZ} ;" in text and f"y = {yl} ;" in text and f"x = {xl} ;" in text, text
    declared = re.findall(r"\n\t(double|float) (\w+)\(time, z, y, x\) ;", text)
    assert declared == [("double" if d else "float", n) for n, d in vars_], text
    if library == "netcdf4":
        for name, _ in vars_:
            assert f'{name}:_NoFill = "true" ;' in text, text
            if want_chunk:
                assert f"{name}:_ChunkSizes = %d, %d, %d, %d ;" % want_chunk in text, text


HL_CASES = [
    # family, library, pattern, chunk, types, read
    ("openmpi", "pnetcdf", "shared", "default", "double,float", "parallel"),
    ("openmpi", "pnetcdf", "serial", "default", "double", "serial"),
    ("openmpi", "pnetcdf", "io-domains", "default", "double,float", "parallel"),
    ("openmpi", "pnetcdf", "file-per-rank", "default", "double,float", "serial"),
    ("openmpi", "netcdf4", "shared", "default", "double,float", "parallel"),
    ("openmpi", "netcdf4", "shared", "2x2", "double,float", "serial"),
    ("openmpi", "netcdf4", "io-domains", "2x2", "float", "parallel"),
    ("openmpi", "netcdf4", "file-per-rank", "default", "double,float", "serial"),
    ("openmpi", "hdf5", "shared", "default", "double,float", "parallel"),
    ("openmpi", "hdf5", "shared", "2x2", "double,float", "serial"),
    ("openmpi", "hdf5", "serial", "3x1", "float", "parallel"),
    ("openmpi", "hdf5", "file-per-rank", "2x2", "double,float", "parallel"),
    ("mpich", "hdf5", "shared", "default", "double,float", "serial"),
    ("mpich", "hdf5", "shared", "2x2", "double,float", "parallel"),
    ("mpich", "hdf5", "io-domains", "default", "double", "serial"),
    ("mpich", "hdf5", "file-per-rank", "2x2", "double,float", "parallel"),
]


@pytest.mark.parametrize("family, library, pattern, chunk, types, read", HL_CASES)
def test_library_files_hold_the_formula(family, library, pattern, chunk, types, read, tmp_path):
    layout, io_layout = LAYOUTS[4]
    chunk_args = [] if library == "pnetcdf" else ["-c", chunk]
    text = ok(run_kernel(family, 4, *GRID, "-l", layout, "-i", io_layout, "-p", pattern, "-L", library,
                         *chunk_args, "-T", types, "-r", read, "-d", tmp_path, "-k"))
    assert text.rstrip().endswith("verify ok"), text
    regions = hl_regions(pattern)
    files = kept_files(text)
    ext = HL_EXT[library]
    pid = re.fullmatch(rf"nmio-(\d+)-{pattern}.*{re.escape(ext)}", files[0].name)[1]
    if len(regions) == 1:
        assert files == [tmp_path / f"nmio-{pid}-{pattern}{ext}"]
    else:
        assert files == [tmp_path / f"nmio-{pid}-{pattern}.{k:04d}{ext}" for k in range(len(regions))]
    assert sorted(tmp_path.iterdir()) == sorted(files)
    vars_ = [v for v in (("temp_r8", True), ("temp_r4", False)) if ("double" if v[1] else "float") in types]
    for path, (x0, y0, xl, yl) in zip(files, regions):
        hl_check_header(library, path, xl, yl, vars_, chunk)
        for name, is_double in vars_:
            want = np.concatenate([expected(NX, NY, x0, y0, xl, yl, t, is_double).ravel() for t in range(STEPS)])
            got = hl_values(library, path, name)
            assert got.shape == want.shape, f"{path} {name}: {got.shape} values, expected {want.shape}"
            assert np.array_equal(got, want.astype(np.float64)), f"{path} {name}"


@pytest.mark.parametrize("family, library", [("openmpi", "pnetcdf"), ("openmpi", "netcdf4"), ("openmpi", "hdf5"),
                                             ("mpich", "hdf5")])
def test_library_read_back_catches_corruption_and_cleans_up(family, library, tmp_path):
    """The kernel's own verification reads through the library: clean files verify and are removed,
    corrupted expectations fail (one mismatch per rank, as for posix/mpiio)."""
    text = ok(run_kernel(family, 2, *GRID, "-p", "shared", "-L", library, "-r", "parallel", "-d", tmp_path))
    assert text.rstrip().endswith("verify ok") and config(text)["library"] == library, text
    assert list(tmp_path.iterdir()) == [], "files must be removed without -k"
    out = run_kernel(family, 2, *GRID, "-p", "shared", "-L", library, "-d", tmp_path, "-C")
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stdout.rstrip().endswith("verify FAILED 2 mismatches"), out.stdout


def test_unavailable_libraries_name_themselves_under_mpich(tmp_path):
    """Debian builds PnetCDF and parallel netCDF-C only against Open MPI: the MPICH build must say so
    (the build detected that the installed libraries link Open MPI's libmpi, not MPICH's)."""
    for lib, who in (("pnetcdf", "PnetCDF"), ("netcdf4", "parallel netCDF-4")):
        out = run_kernel("mpich", 2, *GRID, "-d", tmp_path, "-p", "shared", "-L", lib)
        assert out.returncode == 2 and out.stdout == "", out.stdout + out.stderr
        assert out.stderr.splitlines() == [out.stderr.strip()], out.stderr
        assert f"{who} is not installed for MPICH here" in out.stderr, out.stderr
        assert "only for Open MPI" in out.stderr, out.stderr
    assert list(tmp_path.iterdir()) == []
    lines = ok(run_kernel("mpich", 1, "-A")).splitlines()
    assert "pnetcdf unavailable: PnetCDF is not installed for MPICH here" in "\n".join(lines), lines


@pytest.mark.parametrize("family", FAMILIES)
def test_library_build_links_one_mpi(family):
    """Each family's nm-iobench loads exactly one MPI: the I/O libraries linked in must not drag in
    the other family's libmpi (what iobench.mk's link check prevents), and the HDF5 directory is a
    RUNPATH, never an RPATH that would beat bind mode's LD_LIBRARY_PATH."""
    from nearmetal.kernels.build import host_bin

    exe = Path(host_bin(family)) / "nm-iobench"
    loaded = hl_run([hl_tool("ldd", "libc-bin"), exe])
    sonames = set(re.findall(r"^\s*(\S+\.so[.\w]*) =>", loaded, re.M))
    mpis = {s for s in sonames if re.fullmatch(r"libmpi(ch)?\.so\.\d+", s)}
    if family == "openmpi":
        assert mpis == {"libmpi.so.40"}, loaded
        assert {"libpnetcdf.so.0d", "libnetcdf_mpi.so.19", "libhdf5_openmpi.so.103"} <= sonames, loaded
    else:
        assert mpis == {"libmpich.so.12"}, loaded
        assert "libhdf5_mpich.so.103" in sonames, loaded
        assert not any(s.startswith(("libpnetcdf", "libnetcdf")) for s in sonames), loaded
    dynamic = hl_run([hl_tool("readelf", "binutils"), "-d", exe])
    assert "(RPATH)" not in dynamic, dynamic
    assert f"(RUNPATH)            Library runpath: [/usr/lib/x86_64-linux-gnu/hdf5/{family}]" in dynamic, dynamic
