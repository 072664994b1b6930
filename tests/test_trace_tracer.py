"""nm-trace.so, the preloaded multi-layer I/O tracer, and its reader (nearmetal.trace).

Real runs, no mocks: the library is built by trace.build, preloaded into the ranks only
(`mpiexec.openmpi -x`, `mpiexec.mpich -genv`, never the launcher) of the host nm-iobench of
each MPI family writing to /dev/shm, and the trace files are read back with trace.reader.
Counts are derived from nm-iobench's iobench/*.c: with io_layout = layout every rank is its
own I/O domain and a writer of the shared file, calling the library's write once per record
and variable (2 records x 2 variables). The unit tests read hand-made byte strings.
"""

import os
import re
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

from nearmetal.errors import NearmetalError
from nearmetal.trace import reader

FAMILIES = ("openmpi", "mpich")
NX, NY, NZ, STEPS, NVARS = 64, 64, 4, 2, 2
GRID = ["-x", str(NX), "-y", str(NY), "-z", str(NZ), "-t", str(STEPS)]
FILE_BYTES = NX * NY * NZ * STEPS * (8 + 4)  # temp_r8 (double) and temp_r4 (float) per record
LAYOUT = {2: (2, 1), 4: (2, 2)}  # MPI_Dims_create: px x py
WRITES = ("write", "pwrite", "pwrite64", "writev", "pwritev", "pwritev64", "aio_write", "aio_write64")
ROOT_OK = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


# ------------------------------------------------------------------ running traced ranks

@pytest.fixture(scope="module")
def tracer():
    from nearmetal.trace.build import library

    return library()


def launch(family, ranks, argv, rank_env, mark, timeout=180):
    """argv on `ranks` ranks of `family` under nm-supervise, rank_env given to the ranks only;
    `mark` (in the launcher's and the ranks' environment) finds leftover processes."""
    from nearmetal import supervise

    rank_env = dict(rank_env, NM_TEST_MARK=str(mark))
    if family == "openmpi":
        cmd = ["mpiexec.openmpi", "-n", str(ranks)] + (["--oversubscribe"] if ranks > 2 else [])
        for k, v in rank_env.items():
            cmd += ["-x", f"{k}={v}"]
    else:
        cmd = ["mpiexec.mpich", "-n", str(ranks)]
        for k, v in rank_env.items():
            cmd += ["-genv", k, v]
    unset = ("LD_PRELOAD", "NM_TRACE_DIR", "NM_TRACE_LAYERS", "OMPI_MCA_io")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.update(ROOT_OK, NM_TEST_MARK=str(mark))
    out = subprocess.run(supervise.wrap(cmd + [str(a) for a in argv]), capture_output=True, text=True,
                         timeout=timeout, env=env, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, f"exit {out.returncode}\nstdout:\n{out.stdout}\nstderr:\n{out.stderr}"
    assert not leftovers(mark), f"processes left behind: {leftovers(mark)}"
    return out


def leftovers(mark):
    """Pids of live processes whose environment carries this test's mark."""
    needle = f"NM_TEST_MARK={mark}".encode() + b"\0"
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle in f.read() + b"\0":
                    found.append(int(pid))
        except OSError:
            pass
    return found


def iobench(family, ranks, *args, tmp_path, kept, layers=None, extra_env=None):
    """Traced nm-iobench (shared file, every rank a writer, file kept and listed in `kept`):
    (stdout, data file, Trace)."""
    from nearmetal.kernels.build import host_bin
    from nearmetal.trace.build import rank_env

    trace_dir = tmp_path / "trace"
    trace_dir.mkdir()
    px, py = LAYOUT[ranks]
    argv = [Path(host_bin(family)) / "nm-iobench", *GRID, "-p", "shared", "-i", f"{px}x{py}", "-d", "/dev/shm",
            "-k", *args]
    out = launch(family, ranks, argv, dict(rank_env(trace_dir, layers), **(extra_env or {})), tmp_path)
    path = re.search(r"^# file (\S+)$", out.stdout, re.M).group(1)
    kept.append(path)
    assert "verify ok" in out.stdout, out.stdout
    return out.stdout, path, reader.read(trace_dir)


@pytest.fixture
def shm_files():
    """Data files the test kept in /dev/shm, removed afterwards."""
    kept = []
    yield kept
    for p in kept:
        Path(p).unlink(missing_ok=True)


def ranks_of(trace, ranks):
    procs = trace.by_rank()
    assert sorted(procs) == list(range(ranks)), [(p.path, p.rank) for p in trace.processes]
    assert len(trace.processes) == ranks  # the launcher's helpers leave no file
    for p in procs.values():
        assert p.complete and not p.truncated and p.dropped == 0 and len(p.events) == p.recorded, p.path
    return procs


def block_elements(ranks, rank):
    """Points of rank's block (the blocks divide 64 x 64 evenly here)."""
    px, py = LAYOUT[ranks]
    return NZ * (NY // py) * (NX // px)


def merged(ranges):
    out = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return [tuple(r) for r in out]


def assert_parents_innermost(proc):
    """Every event lying within calls of higher layers on its thread has the innermost of them
    (the one that started last) as parent; every other event has none."""
    ev = proc.events
    for e in ev:
        around = ev[(ev["tid"] == e["tid"]) & (ev["layer"] < e["layer"]) & (ev["start_ns"] <= e["start_ns"])
                    & (ev["end_ns"] >= e["end_ns"])]
        want = int(around["seq"][np.argmax(around["start_ns"])]) if len(around) else 0
        assert int(e["parent"]) == want, (proc.function_names([e]), int(e["parent"]), want)


def posix_writes(proc, path):
    """(offset, end) of the bytes each POSIX write on `path` moved (requested ones for aio)."""
    fid = [i for i, p in proc.files.items() if p == path]
    w = proc.calls(*WRITES)
    w = w[np.isin(w["file"], fid)]
    names = proc.function_names(w)
    return [(int(e["offset"]), int(e["offset"]) + int(e["size"] if n.startswith("aio_") else e["result"]))
            for e, n in zip(w, names)]


# ------------------------------------------------------------------ MPI-IO

@pytest.mark.parametrize("family,ranks", [("openmpi", 2), ("openmpi", 4), ("mpich", 2), ("mpich", 4)])
def test_mpiio_calls_parents_and_coverage(family, ranks, tracer, tmp_path, shm_files):
    """iobench/mpiio.c: each writer calls MPI_File_write_at_all(fh, 0, buf, n, etype) once per
    (record, variable) through a subarray view: 4 calls per rank, offset 0 as given, the
    rank's block in bytes; the POSIX writes beneath have them as parents and tile the file."""
    _, path, trace = iobench(family, ranks, "-L", "mpiio", tmp_path=tmp_path, kept=shm_files)
    assert os.stat(path).st_size == FILE_BYTES  # raw MPI-IO: no header
    procs = ranks_of(trace, ranks)
    ranges = []
    for rank, p in procs.items():
        w = p.calls("MPI_File_write_at_all")
        assert len(w) == STEPS * NVARS, p.function_names()
        assert {p.file_of(e) for e in w} == {path}
        assert list(w["offset"]) == [0] * len(w)
        block = block_elements(ranks, rank)
        assert sorted(w["size"]) == [block * 4] * STEPS + [block * 8] * STEPS
        assert not w["flags"].any() and list(w["result"]) == [0] * len(w)
        assert set(p.function_names(p.layer_events("mpiio"))) >= {"MPI_File_open", "MPI_File_set_view",
                                                                  "MPI_File_close", "MPI_File_write_at_all"}
        assert (p.layer_events("mpiio")["parent"] == 0).all()
        assert_parents_innermost(p)
        mpiio_seqs = set(p.layer_events("mpiio")["seq"].tolist())
        posix = p.layer_events("posix")
        assert set(posix["parent"].tolist()) <= mpiio_seqs | {0}
        assert set(p.files.values()) >= {path}
        assert path in p.hints
        ranges += posix_writes(p, path)
    assert ranges, "no POSIX write reached the file"
    assert merged(ranges) == [(0, FILE_BYTES)]


def test_full_buffers_reach_the_file(tracer, tmp_path, shm_files):
    """OMPIO writes each rank's rows separately: a larger grid fills the 1 MiB per-thread
    buffer several times during the run; every event still reaches the file once."""
    from nearmetal.kernels.build import host_bin
    from nearmetal.trace.build import rank_env

    trace_dir = tmp_path / "trace"
    trace_dir.mkdir()
    argv = [Path(host_bin("openmpi")) / "nm-iobench", "-x", "512", "-y", "512", "-z", "8", "-t", "4", "-p", "shared",
            "-i", "2x1", "-L", "mpiio", "-d", "/dev/shm", "-k"]
    out = launch("openmpi", 2, argv, rank_env(trace_dir), tmp_path)
    path = re.search(r"^# file (\S+)$", out.stdout, re.M).group(1)
    shm_files.append(path)
    size = 512 * 512 * 8 * 4 * 12
    assert os.stat(path).st_size == size
    procs = ranks_of(reader.read(trace_dir), 2)
    for p in procs.values():
        assert len(p.events) * reader.EVENT.itemsize > 2 << 20  # more than two buffers' worth
        assert len(set(p.events["seq"].tolist())) == len(p.events)
        assert len(p.calls("MPI_File_write_at_all")) == 4 * NVARS
    assert merged(r for p in procs.values() for r in posix_writes(p, path)) == [(0, size)]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("aggregators", [1, 2])
def test_romio_collective_buffering_aggregators(family, aggregators, tracer, tmp_path, shm_files):
    """ROMIO two-phase with cb_config_list=*:N on one node: exactly N ranks write to the file
    inside MPI_File_write_at_all (Open MPI through its romio321 component)."""
    extra = {"OMPI_MCA_io": "romio321"} if family == "openmpi" else {}
    _, path, trace = iobench(family, 2, "-L", "mpiio", "-H", "romio_cb_write=enable", "-H",
                             f"cb_config_list=*:{aggregators}", tmp_path=tmp_path, kept=shm_files, extra_env=extra)
    writers = set()
    for rank, p in ranks_of(trace, 2).items():
        assert p.hints[path].get("cb_config_list") == f"*:{aggregators}", p.hints
        assert p.hints[path].get("romio_cb_write") == "enable", p.hints
        collective = set(p.calls("MPI_File_write_at_all")["seq"].tolist())
        assert len(collective) == STEPS * NVARS
        w = p.calls(*WRITES)
        if np.isin(w["parent"], list(collective)).any():
            writers.add(rank)
    assert len(writers) == aggregators, writers


# ------------------------------------------------------------------ netCDF and PnetCDF

@pytest.mark.parametrize("library,puts", [
    ("pnetcdf", {"ncmpi_put_vara_double_all": "temp_r8", "ncmpi_put_vara_float_all": "temp_r4"}),
    ("netcdf4", {"nc_put_vara_double": "temp_r8", "nc_put_vara_float": "temp_r4"}),
])
def test_netcdf_layers_name_variables_and_parent_mpiio(library, puts, tracer, tmp_path, shm_files):
    """iobench/pnetcdf.c and netcdf4.c (built for Open MPI only): one put per record and
    variable, recorded with the variable names the kernel defines and the rank's block in
    bytes; the MPI-IO calls made inside them have them as parents."""
    _, path, trace = iobench("openmpi", 2, "-L", library, tmp_path=tmp_path, kept=shm_files)
    layer = "pnetcdf" if library == "pnetcdf" else "netcdf"
    for rank, p in ranks_of(trace, 2).items():
        top = p.layer_events(layer)
        for name, var in puts.items():
            calls = p.calls(name)
            assert len(calls) == STEPS, p.function_names(top)
            assert {p.var_of(e) for e in calls} == {var}
            assert {p.file_of(e) for e in calls} == {path}
            assert list(calls["size"]) == [block_elements(2, rank) * (8 if var == "temp_r8" else 4)] * STEPS
        assert_parents_innermost(p)
        put_seqs = set(p.calls(*puts)["seq"].tolist())
        mpiio = p.layer_events("mpiio")
        under_puts = mpiio[np.isin(mpiio["parent"], list(put_seqs))]
        assert any(n.startswith("MPI_File_write") for n in p.function_names(under_puts)), p.function_names(mpiio)
        layer_seqs = set(top["seq"].tolist())
        assert set(mpiio["parent"].tolist()) <= layer_seqs | {0}


def test_hdf5_layer_between_netcdf_and_mpiio(tracer, tmp_path, shm_files):
    """With hdf5 enabled, netCDF-4's HDF5 calls sit between the nc_ puts and MPI-IO:
    H5Dwrite's parent is the put, the MPI-IO writes inside H5Dwrite have it as parent."""
    _, path, trace = iobench("openmpi", 2, "-L", "netcdf4", tmp_path=tmp_path, kept=shm_files,
                             layers=("netcdf", "hdf5", "mpiio", "posix"))
    for rank, p in ranks_of(trace, 2).items():
        puts = set(p.calls("nc_put_vara_double", "nc_put_vara_float")["seq"].tolist())
        h5w = p.calls("H5Dwrite")
        assert len(h5w) >= STEPS * NVARS and set(h5w["parent"].tolist()) >= puts
        assert {p.var_of(e) for e in h5w if int(e["parent"]) in puts} == {"/temp_r8", "/temp_r4"}
        assert_parents_innermost(p)
        mpiio = p.layer_events("mpiio")
        assert np.isin(mpiio["parent"], h5w["seq"]).any()


# ------------------------------------------------------------------ Fortran MPI-IO

FORTRAN = """program fwrite
  use mpi
  implicit none
  integer :: ierr, rank, fh, k
  integer(kind=MPI_OFFSET_KIND) :: off
  double precision :: buf(100)
  integer :: status(MPI_STATUS_SIZE)
  character(len=512) :: path
  call get_command_argument(1, path)
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  buf = rank
  call MPI_File_open(MPI_COMM_WORLD, trim(path), MPI_MODE_CREATE + MPI_MODE_WRONLY, MPI_INFO_NULL, fh, ierr)
  do k = 0, 2
     off = (k * 2 + rank) * 800
     call MPI_File_write_at_all(fh, off, buf, 100, MPI_DOUBLE_PRECISION, status, ierr)
  end do
  call MPI_File_close(fh, ierr)
  call MPI_Finalize(ierr)
end program
"""


def test_fortran_mpiio_under_openmpi(tracer, tmp_path):
    """Open MPI's Fortran bindings call PMPI_Init and PMPI_File_* directly: still recorded,
    under the MPI_ names, with the offsets and sizes the program used."""
    from nearmetal.trace.build import rank_env

    src = tmp_path / "fwrite.f90"
    src.write_text(FORTRAN)
    exe = tmp_path / "fwrite"
    subprocess.run(["mpif90.openmpi", "-o", exe, src], check=True, capture_output=True, cwd=tmp_path)
    trace_dir = tmp_path / "trace"
    trace_dir.mkdir()
    data = tmp_path / "out.dat"
    launch("openmpi", 2, [exe, data], rank_env(trace_dir), tmp_path)
    assert data.stat().st_size == 6 * 800
    ranges = []
    for rank, p in ranks_of(reader.read(trace_dir), 2).items():
        w = p.calls("MPI_File_write_at_all")
        assert sorted(w["offset"].tolist()) == [(k * 2 + rank) * 800 for k in range(3)]
        assert w["size"].tolist() == [800] * 3 and {p.file_of(e) for e in w} == {str(data)}
        assert len(p.calls("MPI_File_open")) == 1 and len(p.calls("MPI_File_close")) == 1
        assert_parents_innermost(p)
        ranges += posix_writes(p, str(data))  # by whichever rank aggregates
    assert merged(ranges) == [(0, 6 * 800)]


# ------------------------------------------------------------------ the library itself

def test_library_loads_in_older_images(tracer):
    """No glibc symbol version newer than 2.17 (clock_gettime), libdl needed by name, no MPI,
    netCDF or HDF5 library linked: one host-built library for both MPIs and older images."""
    dynsyms = subprocess.run(["objdump", "-T", tracer], capture_output=True, text=True, check=True).stdout
    versions = {tuple(int(x) for x in v.split(".")) for v in re.findall(r"\(GLIBC_([\d.]+)\)", dynsyms)}
    assert versions and max(versions) == (2, 17), sorted(versions)
    needed = re.findall(r"NEEDED\s+(\S+)", subprocess.run(["objdump", "-p", tracer], capture_output=True,
                                                          text=True, check=True).stdout)
    assert sorted(needed) == ["libc.so.6", "libdl.so.2"], needed
    for name in ("MPI_File_write_at_all", "PMPI_File_write_at_all", "nc_put_vara_double",
                 "ncmpi_put_vara_float_all", "H5Dwrite", "pwritev", "aio_write", "__open_2"):
        assert re.search(rf"\sDF? ?\.text\s.*\s{name}$", dynsyms, re.M), name
    for name in ("MPI_Init", "PMPI_Init", "MPI_Init_thread", "MPI_Finalize", "PMPI_Finalize"):
        # one owner of these among nearmetal's preloads: the evidence library (tests/test_evidence.py)
        assert not re.search(rf"\sDF? ?\.text\s.*\s{name}$", dynsyms, re.M), name


# ------------------------------------------------------------------ forwarding only

@pytest.mark.parametrize("family", FAMILIES)
def test_untraced_forwarding_and_no_io_program(family, tracer, tmp_path):
    """Preloaded without NM_TRACE_DIR the library only forwards: the kernel verifies its data and
    no trace appears. An MPI program without I/O (nm-barrier) gives one file per rank with no
    event: MPI's own files (shared-memory segments, /proc, /sys) are not the user's I/O."""
    from nearmetal.kernels.build import host_bin

    bindir = Path(host_bin(family))
    work = tmp_path / "data"
    work.mkdir()
    out = launch(family, 2, [bindir / "nm-iobench", *GRID, "-p", "file-per-rank", "-L", "posix", "-d", work],
                 {"LD_PRELOAD": tracer}, tmp_path)
    assert "verify ok" in out.stdout
    assert not list(tmp_path.rglob("*.nmt")) and not list(work.iterdir())
    trace_dir = tmp_path / "trace"
    trace_dir.mkdir()
    from nearmetal.trace.build import rank_env

    launch(family, 2, [bindir / "nm-barrier", "-i", "50", "-x", "5"], rank_env(trace_dir), tmp_path)
    procs = ranks_of(reader.read(trace_dir), 2)
    assert [len(p.events) for p in procs.values()] == [0, 0], {r: p.function_names() for r, p in procs.items()}
    assert all(p.world_size == 2 for p in procs.values())


POSIX_PROGRAM = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <dlfcn.h>
#include <pthread.h>
static void *writer(void *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/h.dat", (char *)dir);
    int fd = open(path, O_CREAT | O_WRONLY, 0600);
    for (int i = 0; i < 3; i++) pwrite(fd, "abc", 3, 3 * i);
    close(fd);
    return NULL;
}
int main(int argc, char **argv)
{
    char path[4096], buf[64] = "0123456789";
    umask(0);
    int bad = open("/nonexistent/x", O_RDONLY), missing = errno == ENOENT;
    printf("missing %d %d\n", bad, missing);
    snprintf(path, sizeof path, "%s/f.dat", argv[1]);
    int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0640);
    struct stat st;
    fstat(fd, &st);
    printf("mode %o\n", st.st_mode & 0777);
    printf("write %zd\n", write(fd, buf, 10));
    struct iovec iov[2] = {{buf, 3}, {buf, 4}};
    printf("writev %zd\n", writev(fd, iov, 2));
    printf("pwrite %zd\n", pwrite(fd, buf, 5, 100));
    printf("lseek %ld\n", (long)lseek(fd, 2, SEEK_SET));
    printf("read %zd\n", read(fd, buf, 4));
    errno = 0;
    ssize_t r = pread(fd, buf, 4, -1);
    printf("pread %zd %d\n", r, errno == EINVAL);
    int dir = open(argv[1], O_RDONLY | O_DIRECTORY);
    int fd2 = openat(dir, "g.dat", O_CREAT | O_WRONLY, 0600);
    printf("openat %d\n", fd2 >= 0);
    close(fd2);
    close(dir);
    printf("close %d\n", close(fd));
    errno = 0;
    int c = close(fd);
    printf("closed %d %d\n", c, errno == EBADF);
    write(1, "", 0);
    pthread_t t;
    pthread_create(&t, NULL, writer, argv[1]);
    pthread_join(t, NULL);
    /* wrappers of libraries this program does not have: an error code, no crash */
    int (*mpi_write)(void *, long long, void *, int, void *, void *) = dlsym(RTLD_DEFAULT, "MPI_File_write_at_all");
    int (*nc_put)(int, int, const size_t *, const size_t *, const double *) = dlsym(RTLD_DEFAULT, "nc_put_vara_double");
    int (*h5_write)(long, long, long, long, long, const void *) = dlsym(RTLD_DEFAULT, "H5Dwrite");
    int (*mpi_init)(int *, char ***) = dlsym(RTLD_DEFAULT, "MPI_Init");
    fprintf(stderr, "absent %d %d %d %d\n", mpi_write ? mpi_write(0, 0, 0, 0, 0, 0) : -999,
            nc_put ? nc_put(0, 0, 0, 0, 0) : -999, h5_write ? h5_write(0, 0, 0, 0, 0, 0) : -999,
            mpi_init ? mpi_init(0, 0) : -999);
    return 0;
}
"""


def test_posix_forwarding_is_exact(tracer, tmp_path):
    """A plain (non-MPI) program: return values, errno and the created file's mode are what
    they are untraced; the regular files it opens are recorded with their offsets, a
    directory, a failed open and stdout are not; a thread's events carry its id and reach
    the file when it exits; wrappers of absent libraries return an error code."""
    src = tmp_path / "p.c"
    src.write_text(POSIX_PROGRAM)
    exe = tmp_path / "p"
    subprocess.run(["cc", "-O1", "-o", exe, src, "-lpthread", "-ldl"], check=True, capture_output=True)
    work = tmp_path / "work"
    work.mkdir()
    plain = subprocess.run([exe, work], capture_output=True, text=True, check=True)
    assert plain.stderr == "absent -999 -999 -999 -999\n"
    for f in work.iterdir():
        f.unlink()
    trace_dir = tmp_path / "trace"
    trace_dir.mkdir()
    # as the ranks get it (trace.build.rank_env): the evidence library first, owner of MPI_Init
    from nearmetal.trace.build import rank_env

    env = {**os.environ, **rank_env(trace_dir, env={})}
    assert env["LD_PRELOAD"].split()[1] == tracer and "nm-evidence-" in env["LD_PRELOAD"].split()[0]
    run = subprocess.run([exe, work], capture_output=True, text=True, check=True, env=env)
    assert run.stderr == "absent 16 -33 -1 1\n"  # MPI_ERR_OTHER (Open MPI), NC_EBADID, HDF5's -1, non-zero
    traced = run.stdout
    assert traced == plain.stdout and "missing -1 1" in traced and "mode 640" in traced and "closed -1 1" in traced
    assert "pread -1 1" in traced
    (p,) = reader.read(trace_dir).processes
    assert p.rank == -1 and p.complete
    f, g, h = str(work / "f.dat"), str(work / "g.dat"), str(work / "h.dat")
    got = [(n, p.file_of(e), int(e["offset"]), int(e["size"]), int(e["result"]))
           for n, e in zip(p.function_names(), p.events)]
    fd = got[0][4]
    assert got == [("open", f, -1, -1, fd), ("write", f, 0, 10, 10), ("writev", f, 10, 7, 7),
                   ("pwrite", f, 100, 5, 5), ("lseek", f, 2, -1, 2), ("read", f, 2, 4, 4),
                   ("pread", f, -1, 4, -1), ("openat", g, -1, -1, got[7][4]), ("close", g, -1, -1, 0),
                   ("close", f, -1, -1, 0), ("open", h, -1, -1, got[10][4]), ("pwrite", h, 0, 3, 3),
                   ("pwrite", h, 3, 3, 3), ("pwrite", h, 6, 3, 3), ("close", h, -1, -1, 0)]
    assert (p.events["parent"] == 0).all() and p.events["flags"].tolist() == [0] * 6 + [1] + [0] * 8
    tids = p.events["tid"].tolist()
    assert tids[:10] == [p.pid] * 10 and len(set(tids[10:])) == 1 and tids[10] != p.pid
    for f in work.iterdir():
        f.unlink()
    env["NM_TRACE_DIR"] = str(tmp_path / "missing")  # says so once, then only forwards
    run = subprocess.run([exe, work], capture_output=True, text=True, check=True, env=env)
    assert run.stdout == plain.stdout
    assert run.stderr.splitlines()[0] == f"nm-trace: NM_TRACE_DIR is not a directory, not tracing: {tmp_path}/missing"


def _built_with_trace_env(tmp_path, source):
    """`source` compiled; (program, its work directory, the trace directory, the environment
    that traces it as a rank: trace.build.rank_env)."""
    from nearmetal.trace.build import rank_env

    (tmp_path / "p.c").write_text(source)
    subprocess.run(["cc", "-O1", "-o", tmp_path / "p", tmp_path / "p.c"], check=True, capture_output=True)
    work, trace_dir = tmp_path / "work", tmp_path / "trace"
    work.mkdir()
    trace_dir.mkdir()
    return tmp_path / "p", work, trace_dir, {**os.environ, **rank_env(trace_dir, env={})}


KILLED_PROGRAM = r"""
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/k.dat", argv[1]);
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
    struct timespec pause = {0, 50000000};
    for (int i = 0; i < 50; i++) { /* 2.5 s of small writes: far from filling a 1 MiB buffer */
        write(fd, "0123456789", 10);
        nanosleep(&pause, NULL);
    }
    kill(getpid(), SIGKILL); /* as mpirun ends ranks after ^C, or a job's time limit: no exit handlers */
    return 0;
}
"""


@pytest.mark.parametrize("choice", ["default", "monotonic"])
def test_a_killed_process_keeps_all_but_its_last_second(choice, tracer, tmp_path):
    """A process that is SIGKILLed before its buffer fills still leaves its earlier events:
    a buffer that has waited a second goes to the file at the thread's next call, whichever
    clock the tracer uses (the TSC's rate is learnt from the clock pair read at load)."""
    exe, work, trace_dir, env = _built_with_trace_env(tmp_path, KILLED_PROGRAM)
    if choice == "monotonic":
        env["NM_TRACE_CLOCK"] = "monotonic"
    run = subprocess.run([exe, work], capture_output=True, env=env)
    assert run.returncode == -9
    (p,) = reader.read(trace_dir).processes
    assert not p.complete
    writes = p.calls("write")
    assert len(writes) >= 20, len(writes)  # written by 1.5 s at the latest: 30 expected, 50 made
    assert (writes["result"] == 10).all() and writes["offset"].tolist() == [10 * i for i in range(len(writes))]
    assert (writes["end_ns"] - writes["start_ns"]).min() >= 0


# The start of the programs below: a.dat in the work directory (argv[1]) written for 1.5 s,
# so that the trace file is open (a buffer is flushed once it has waited a second).
TRACE_FILE_OPEN = r"""
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
static const struct timespec nap = {0, 50000000};
static int write_a_while_traced(const char *work)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/a.dat", work);
    int a = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
    for (int i = 0; i < 30; i++) { write(a, "0123456789", 10); nanosleep(&nap, NULL); }
    return a;
}
"""

FD_CLOSER_PROGRAM = TRACE_FILE_OPEN + r"""
int main(int argc, char **argv)
{
    char path[4096];
    int a = write_a_while_traced(argv[1]);
    for (int fd = 3; fd < 1024; fd++) if (fd != a) close(fd); /* as a daemonizing program does */
    snprintf(path, sizeof path, "%s/b.dat", argv[1]);
    int b = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);  /* the lowest number: the trace file's, once */
    int high = fcntl(b, F_DUPFD, 900);                      /* the number the tracer moves its file to */
    for (int i = 0; i < 30; i++) {
        write(b, "abcdefghij", 10);
        write(high, "abcdefghij", 10);
        write(a, "0123456789", 10);
        nanosleep(&nap, NULL);
    }
    printf("b=%d high=%d\n", b, high);
    return 0;
}
"""


def test_a_program_that_closes_the_trace_file_keeps_its_own_data_and_the_trace(tracer, tmp_path):
    """A program that closes every descriptor and opens its own files gets the trace file's
    number: the tracer must not write its records there (it wrote them into b.dat), and goes
    on in its own file."""
    exe, work, trace_dir, env = _built_with_trace_env(tmp_path, FD_CLOSER_PROGRAM)
    run = subprocess.run([exe, work], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    assert (work / "b.dat").read_bytes() == b"abcdefghij" * 60, run.stdout
    assert (work / "a.dat").read_bytes() == b"0123456789" * 60
    (p,) = reader.read(trace_dir).processes
    assert p.complete and len([f for f in map(p.file_of, p.calls("write")) if f == str(work / "a.dat")]) == 60


LOST_TRACE_PROGRAM = TRACE_FILE_OPEN + r"""
int main(int argc, char **argv)
{
    char path[4096];
    int a = write_a_while_traced(argv[1]);
    DIR *d = opendir(argv[2]);                               /* the trace file removed: it cannot be opened again */
    for (struct dirent *e; (e = readdir(d));) if (e->d_name[0] != '.') unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
    for (int fd = 3; fd < 1024; fd++) if (fd != a) close(fd);
    snprintf(path, sizeof path, "%s/b.dat", argv[1]);
    int b = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
    FILE *out = fdopen(fcntl(b, F_DUPFD, 900), "w");         /* the trace file's number, through stdio */
    for (int i = 0; i < 30; i++) { write(a, "0123456789", 10); fputs("abcdefghij", out); nanosleep(&nap, NULL); }
    return 0; /* exit(): the tracer's last flush runs before stdio writes what `out` buffered */
}
"""


def test_a_trace_file_that_cannot_be_opened_again_never_costs_the_program_its_descriptor(tracer, tmp_path):
    """When the program had closed the trace file and it could not be opened again, the tracer
    kept the number and closed it at exit: the program's own file there, whose buffered
    output stdio writes after the tracer's last flush, lost it."""
    exe, work, trace_dir, env = _built_with_trace_env(tmp_path, LOST_TRACE_PROGRAM)
    run = subprocess.run([exe, work, trace_dir], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    assert "cannot be opened again" in run.stderr
    assert (work / "b.dat").read_bytes() == b"abcdefghij" * 30
    assert (work / "a.dat").read_bytes() == b"0123456789" * 60


SIGNAL_EXIT_PROGRAM = r"""
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
static void leave(int sig) { (void)sig; exit(0); } /* as programs' ^C handlers do: not async-signal-safe */
int main(int argc, char **argv)
{
    char host[64] = "", path[4096];
    gethostname(host, sizeof host - 1);
    snprintf(path, sizeof path, "%s/trace-%s-%ld.nmt", argv[2], host, (long)getpid());
    mkfifo(path, 0600); /* the tracer's file: opening it to flush waits, holding the tracer's lock */
    signal(SIGALRM, leave);
    alarm(3);
    snprintf(path, sizeof path, "%s/a.dat", argv[1]);
    int a = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
    struct timespec pause = {0, 50000000};
    for (int i = 0; i < 100; i++) { write(a, "0123456789", 10); nanosleep(&pause, NULL); }
    return 1; /* not reached: the first flush waits until the alarm */
}
"""


def test_exit_from_a_signal_handler_while_the_tracer_holds_its_lock_does_not_hang(tracer, tmp_path):
    """A program's signal handler that calls exit() while the tracer is inside a flush (here:
    opening a trace file that is a FIFO, which waits) ran the tracer's exit flush on the same
    thread, which waited for the lock that thread held: for ever."""
    exe, work, trace_dir, env = _built_with_trace_env(tmp_path, SIGNAL_EXIT_PROGRAM)
    run = subprocess.run([exe, work, trace_dir], capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 0, run.stderr
    assert (work / "a.dat").read_bytes().startswith(b"0123456789" * 10)


# ------------------------------------------------------------------ the reader (unit)

def _record(rtype, payload):
    body = struct.pack("<II", rtype, 0) + payload
    body += b"\0" * (-len(body) % 8)
    return struct.pack("<II", rtype, len(body)) + body[8:]


def _string(kind, sid, text, layer=0):
    raw = text.encode()
    return _record(reader.REC_STRING, struct.pack("<IIII", kind, sid, layer, len(raw)) + raw)


def _event(seq, parent, func, layer, file=0, var=0, offset=-1, size=-1, result=0):
    return struct.pack("<IIQQqqqqqIHBBII", reader.REC_EVENT, 80, seq, parent, 100 * seq, 100 * seq + 50, offset,
                       size, result, 7, func, layer, 0, file, var)


def _trace_bytes(rank=3, end=True):
    header = reader.HEADER.pack(reader.MAGIC, 1, 128, 4242, -1, 5, 1000, 2000, b"node1", 0b11011, 0, 0)
    body = (_event(2, 1, (4 << 12) | 2, 4, file=1, offset=0, size=8, result=8)  # before its strings
            + _string(1, (3 << 12) | 12, "MPI_File_write_at_all", 3) + _string(1, (4 << 12) | 2, "pwrite", 4)
            + _string(2, 1, "/data/out.nc") + _event(1, 0, (3 << 12) | 12, 3, file=1, offset=0, size=8)
            + _record(reader.REC_RANK, struct.pack("<ii", rank, 4))
            + _record(reader.REC_HINTS, struct.pack("<IIQ", 1, 11, 1) + b"cb_nodes\x002\x00")
            + (_record(reader.REC_END, struct.pack("<QQ", 2, 0)) if end else b""))
    return header + body


@pytest.mark.unit
def test_reader_reads_a_hand_made_file(tmp_path):
    (tmp_path / "trace-node1-4242.nmt").write_bytes(_trace_bytes())
    t = reader.read(tmp_path)
    (p,) = t.processes
    assert (p.host, p.pid, p.rank, p.env_rank, p.world_size) == ("node1", 4242, 3, 5, 4)
    assert (p.complete, p.truncated, p.monotonic_ns, p.realtime_ns) == (True, False, 1000, 2000)
    assert p.layers == ("netcdf", "pnetcdf", "mpiio", "posix")
    assert p.function_names() == ["MPI_File_write_at_all", "pwrite"]
    assert p.events["seq"].tolist() == [1, 2] and p.events["parent"].tolist() == [0, 1]
    assert p.file_of(p.events[1]) == "/data/out.nc" and p.hints == {"/data/out.nc": {"cb_nodes": "2"}}
    assert p.calls("pwrite")["size"].tolist() == [8] and t.by_rank() == {3: p}


@pytest.mark.unit
def test_reader_drops_a_truncated_last_record(tmp_path):
    whole = _trace_bytes(end=False)
    (tmp_path / "trace-node1-4242.nmt").write_bytes(whole[:-13])  # the hints record cut short
    (p,) = reader.read(tmp_path).processes
    assert p.truncated and not p.complete and len(p.events) == 2 and p.hints == {}


@pytest.mark.unit
def test_reader_refuses_bad_files(tmp_path):
    with pytest.raises(NearmetalError, match="no trace files"):
        reader.read(tmp_path)
    with pytest.raises(NearmetalError, match="cannot read trace directory"):
        reader.read(tmp_path / "missing")
    bad = tmp_path / "trace-node1-1.nmt"
    bad.write_bytes(b"NOTTRACE" + _trace_bytes()[8:])
    with pytest.raises(NearmetalError, match="bad magic") as e:
        reader.read(tmp_path)
    assert "\n" not in str(e.value)
    data = bytearray(_trace_bytes())
    data[128:132] = struct.pack("<I", 99)  # an unknown record type in the middle
    bad.write_bytes(bytes(data))
    with pytest.raises(NearmetalError, match="corrupt record at byte 128"):
        reader.read(tmp_path)
    bad.write_bytes(_trace_bytes()[:100])
    with pytest.raises(NearmetalError, match="bad magic or shorter"):
        reader.read(tmp_path)


def _ticks_trace(pairs, events, version=2, clock=reader.CLOCK_TSC):
    """A version-2 file whose event times are ticks: the header's pair, then clock records."""
    (t0, ns0), rest = pairs[0], pairs[1:]
    header = reader.HEADER.pack(reader.MAGIC, version, 128, 7, 0, 0, ns0, 0, b"n", 1 << 4, clock, t0)
    body = _string(1, (4 << 12) | 2, "pwrite", 4)
    for t, ns in rest:
        body += _record(reader.REC_CLOCK, struct.pack("<Qq", t, ns))
    for seq, (start, end) in events:
        body += struct.pack("<IIQQqqqqqIHBBII", reader.REC_EVENT, 80, seq, 0, start, end, 0, 1, 1, 7,
                            (4 << 12) | 2, 4, 0, 0, 0)
    return header + body


@pytest.mark.unit
def test_reader_converts_tsc_ticks_with_the_clock_pairs(tmp_path):
    """3 ticks per ns from (1000 ticks, 5e9 ns): the line through the pairs (one slightly off,
    as a real reading is) puts each event at its ns; events come back in start order."""
    pairs = [(1000, 5_000_000_000), (3_001_000, 5_001_000_000), (30_001_003, 5_010_000_001)]
    events = [(1 << 40 | 2, (1000 + 3 * 400_000, 1000 + 3 * 400_100)), (1 << 40 | 1, (1000 + 3 * 10, 1000 + 3 * 20))]
    (tmp_path / "trace-n-7.nmt").write_bytes(_ticks_trace(pairs, events))
    (p,) = reader.read(tmp_path).processes
    assert p.events["seq"].tolist() == [1 << 40 | 1, 1 << 40 | 2]
    got = np.stack([p.events["start_ns"], p.events["end_ns"]], 1) - 5_000_000_000
    assert np.abs(got - np.array([[10, 20], [400_000, 400_100]])).max() <= 1
    # the clock slewed by 100 ppm between two flushes: each segment has its own slope
    slewed = [(0, 10**9), (3 * 10**9, 2 * 10**9), (6 * 10**9 + 300_000, 3 * 10**9)]
    (tmp_path / "trace-n-7.nmt").write_bytes(_ticks_trace(slewed, [(1, (15 * 10**8, 45 * 10**8 + 150_000))]))
    (q,) = reader.read(tmp_path).processes
    assert q.events["start_ns"].tolist() == [15 * 10**8 // 3 + 10**9] and q.events["end_ns"].tolist() == [25 * 10**8]
    (tmp_path / "trace-n-7.nmt").write_bytes(_ticks_trace(pairs[:1], events))  # no second reading
    with pytest.raises(NearmetalError, match="no second clock reading"):
        reader.read(tmp_path)
    (tmp_path / "trace-n-7.nmt").write_bytes(_ticks_trace(pairs, events, clock=5))
    with pytest.raises(NearmetalError, match="unknown clock 5"):
        reader.read(tmp_path)
    (tmp_path / "trace-n-7.nmt").write_bytes(_ticks_trace(pairs, events, version=3))
    with pytest.raises(NearmetalError, match="format version 3, this reader knows 1, 2"):
        reader.read(tmp_path)


SLEEPER = r"""
#include <fcntl.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv)
{
    struct timespec ms50 = {0, 50000000};
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0600);
    for (int k = 0; k < 3; k++) {
        if (write(fd, "x", 1) != 1) return 1;
        nanosleep(&ms50, 0);
    }
    return close(fd);
}
"""


def _tsc_expected():
    """What the tracer should pick here: ticks where the TSC is invariant and the kernel's clock."""
    try:
        flags = Path("/proc/cpuinfo").read_text().split()
        source = Path("/sys/devices/system/clocksource/clocksource0/current_clocksource").read_text().strip()
    except OSError:
        return False
    return "nonstop_tsc" in flags and "constant_tsc" in flags and source == "tsc"


@pytest.mark.parametrize("choice", ["default", "monotonic"])
def test_event_times_are_monotonic_ns_whatever_the_clock(choice, tracer, tmp_path):
    """Writes 50 ms apart (nanosleep, untraced) are 50 ms apart in the trace, and lie between
    the tracer's load and now on CLOCK_MONOTONIC, with the TSC (where usable) or without."""
    import time

    src = tmp_path / "s.c"
    src.write_text(SLEEPER)
    exe = tmp_path / "s"
    subprocess.run(["cc", "-O1", "-o", exe, src], check=True, capture_output=True)
    trace_dir = tmp_path / "trace"
    trace_dir.mkdir()
    env = dict(os.environ, LD_PRELOAD=tracer, NM_TRACE_DIR=str(trace_dir), NM_TRACE_LAYERS="posix")
    if choice == "monotonic":
        env["NM_TRACE_CLOCK"] = "monotonic"
    subprocess.run([exe, tmp_path / "out"], check=True, env=env)
    now = time.monotonic_ns()
    data = next(trace_dir.iterdir()).read_bytes()
    clock = reader.HEADER.unpack_from(data)[10]
    assert clock == (reader.CLOCK_TSC if choice == "default" and _tsc_expected() else reader.CLOCK_NS)
    (p,) = reader.read(trace_dir).processes
    w = p.calls("write")
    assert len(w) == 3
    gaps = np.diff(w["start_ns"]) / 1e6
    assert ((gaps > 49.9) & (gaps < 80)).all(), gaps
    assert p.monotonic_ns < int(w["start_ns"][0]) and int(w["end_ns"][-1]) < now
    assert ((w["end_ns"] - w["start_ns"]) < 1_000_000).all()
