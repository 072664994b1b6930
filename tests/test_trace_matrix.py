"""The trace of nm-iobench over its whole matrix: every valid pattern x library, 2 and 4 ranks,
natively with each MPI family that has the library, and in containers (hybrid, bind): the
main write calls are exactly what the kernel's parameters imply, on exactly the ranks that
write; every event's parent is the innermost higher-layer call around it on its thread; and
the byte ranges written at the POSIX layer tile each kept file.

Counts come from nm-iobench.c and iobench/*.c: a writer calls its library's write once per
record and variable (STEPS x 2), each call moving its whole domain (posix merges the domain's
full rows and planes into one pwrite). Writers: serial rank 0; file-per-rank every rank;
io-domains and shared the domain roots: io_layout 1x1 on 2 ranks (layout 2x1: rank 0),
2x1 on 4 ranks (layout 2x2: ranks 0 and 1). Writer r writes file index r (or the one file).
"""

import collections
import functools
import json
import os
import re
import shutil
import subprocess
import tempfile

import numpy as np
import pytest

from conftest import nearmetal
from test_trace_tracer import assert_parents_innermost, merged
from nearmetal.trace import callpath, reader

NX, NY, NZ, STEPS = 64, 32, 2, 2
GRID = ["-x", str(NX), "-y", str(NY), "-z", str(NZ), "-t", str(STEPS)]
IO_LAYOUT = {2: "1x1", 4: "2x1"}
WRITES = ("write", "pwrite", "pwrite64", "writev", "pwritev", "pwritev64", "aio_write", "aio_write64")
# library: (its layer, {data-write call: calls per writer}, --layers or None for the default)
LIBRARIES = {
    "posix": ("posix", {"pwrite": 2 * STEPS}, None),
    "mpiio": ("mpiio", {"MPI_File_write_at_all": 2 * STEPS}, None),
    "pnetcdf": ("pnetcdf", {"ncmpi_put_vara_double_all": STEPS, "ncmpi_put_vara_float_all": STEPS}, None),
    "netcdf4": ("netcdf", {"nc_put_vara_double": STEPS, "nc_put_vara_float": STEPS}, None),
    "hdf5": ("hdf5", {"H5Dwrite": 2 * STEPS}, "hdf5,mpiio,posix"),
}
HEADER_UPDATES = {"pnetcdf": 8}  # bytes of metadata written inside the data calls
PATTERNS = ("serial", "file-per-rank", "io-domains", "shared")
# Debian builds PnetCDF and parallel netCDF-4 against Open MPI only (iobench.mk)
FAMILY_LIBRARIES = {"openmpi": tuple(LIBRARIES), "mpich": ("posix", "mpiio", "hdf5")}
# in the default image (Charliecloud): every library of each family at least once, both modes
CONTAINER = [("mpich", "hybrid", "shared", "hdf5", 4), ("mpich", "hybrid", "serial", "posix", 2),
             ("mpich", "bind", "io-domains", "mpiio", 4), ("openmpi", "hybrid", "shared", "pnetcdf", 4),
             ("openmpi", "hybrid", "file-per-rank", "mpiio", 2), ("openmpi", "bind", "file-per-rank", "netcdf4", 2),
             ("openmpi", "bind", "io-domains", "hdf5", 4), ("openmpi", "bind", "io-domains", "posix", 4)]
CASES = [(family, "native", pattern, library, ranks)
         for family, libraries in FAMILY_LIBRARIES.items() for library in libraries for pattern in PATTERNS
         if not (library == "posix" and pattern == "shared") for ranks in (2, 4)] + CONTAINER


@functools.lru_cache(maxsize=None)
def available(kernel):
    """The libraries `nm-iobench -A` says this build has."""
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    out = subprocess.run([kernel, "-A"], capture_output=True, text=True, check=True, env=env, timeout=60)
    return set(re.findall(r"^(\S+) available$", out.stdout, re.M))


def writers(pattern, ranks):
    if pattern == "serial":
        return [0]
    if pattern == "file-per-rank":
        return list(range(ranks))
    return [0] if ranks == 2 else [0, 1]


def is_write(name):
    return "put" in name or "write" in name


def gaps(ranges, size):
    """The parts of [0, size) that no range covers."""
    out, at = [], 0
    for lo, hi in merged(ranges):
        if lo > at:
            out.append((at, min(lo, size)))
        at = max(at, hi)
    return out + ([(at, size)] if at < size else [])


def posix_written(proc, paths, under=None):
    """{path: [(offset, end)]} of the bytes the POSIX writes on `paths` moved (only those made
    inside one of the calls `under`, seq numbers, when given)."""
    out = collections.defaultdict(list)
    w = proc.calls(*WRITES)
    parent = dict(zip(proc.events["seq"].tolist(), proc.events["parent"].tolist()))
    for e, name in zip(w, proc.function_names(w)):
        path, up = proc.file_of(e), int(e["parent"])
        while under is not None and up and up not in under:
            up = parent.get(up, 0)
        if path in paths and (under is None or up):
            moved = int(e["size"] if name.startswith("aio_") else e["result"])
            out[path].append((int(e["offset"]), int(e["offset"]) + moved))
    return out


def case_id(case):
    family, mode, pattern, library, ranks = case
    return f"{family}-{mode}-{pattern}-{library}-{ranks}"


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_trace_matrix(case, tmp_path, request):
    family, mode, pattern, library, ranks = case
    layers = LIBRARIES[library][2]
    if mode == "native":
        from nearmetal.kernels.build import host_bin

        assert family in request.getfixturevalue("host_mpis")
        kernel = os.path.join(host_bin(family), "nm-iobench")
        assert available(kernel) == set(FAMILY_LIBRARIES[family])  # the matrix is every library it has
    else:
        request.getfixturevalue("default_image")
        kernel = "nm-iobench"
    data_dir = tempfile.mkdtemp(prefix="nm-matrix-", dir="/dev/shm")  # tmpfs; the containers show /dev
    out = tmp_path / "t"
    try:
        r = nearmetal("trace", "-n", ranks, "--mode", mode, "--mpi", family, "--out", out,
                      *(["--layers", layers] if layers else []), "--", kernel, "-p", pattern, "-L", library, *GRID,
                      "-i", IO_LAYOUT[ranks], "-d", data_dir, "-k", cwd=tmp_path, timeout=300)
        assert r.returncode == 0, f"{r.stdout}\n{r.stderr}"
        assert "verify ok" in r.stdout, r.stdout
        files = re.findall(r"^# file (\S+)$", r.stdout, re.M)
        writing = writers(pattern, ranks)
        assert len(files) == (1 if pattern in ("serial", "shared") else len(writing)), r.stdout
        assert f" writers={len(writing)} files={len(files)} " in r.stdout, r.stdout  # the kernel agrees
        points = NX * NY * NZ // len(writing)  # of a writer's domain: the blocks divide the grid evenly
        check_trace(reader.read(out), case, files, writing, points)
        if mode != "native":  # the report's JSON tells the run as it was made
            j = nearmetal("trace", "report", out, "--format", "json", check=True)
            run = json.loads(j.stdout)["run"]
            assert (run["mode"], run["runtime"], run["mpi"], run["ranks"]) == (mode, "charliecloud", family, ranks)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def check_trace(trace, case, files, writing, points):
    family, mode, pattern, library, ranks = case
    layer, calls, _ = LIBRARIES[library]
    procs = trace.by_rank()
    assert sorted(procs) == list(range(ranks)) and len(trace.processes) == ranks, [p.path for p in trace.processes]
    written, data_written = collections.defaultdict(list), collections.defaultdict(list)
    for rank, p in procs.items():
        assert p.complete and not p.truncated and p.dropped == 0 and len(p.events) == p.recorded, p.path
        # counts: exactly the kernel's calls, on the writers only, each moving the writer's domain
        top = p.layer_events(layer)
        names = p.function_names(top)
        w = top[[is_write(n) for n in names]]
        got = collections.Counter(n for n in names if is_write(n))
        assert got == (collections.Counter(calls) if rank in writing else collections.Counter()), (rank, got)
        if rank in writing:
            mine = files[writing.index(rank)] if len(files) > 1 else files[0]
            assert {p.file_of(e) for e in w} == {mine}, (rank, {p.file_of(e) for e in w}, mine)
            assert sorted(w["size"].tolist()) == [points * 4] * STEPS + [points * 8] * STEPS
            assert not w["flags"].any()
        # parents: the innermost higher-layer call in progress on the thread, none outside one
        assert_parents_innermost(p)
        name_of = dict(zip(p.events["seq"].tolist(), p.function_names()))
        data_ids = [i for i, f in p.files.items() if f in files]
        pw = p.calls(*WRITES)
        pw = pw[np.isin(pw["file"], data_ids)]
        if library == "posix":
            assert not p.events["parent"].any()
        else:
            # every POSIX write reaching a data file does so inside an MPI-IO call ...
            mpiio = set(p.layer_events("mpiio")["seq"].tolist())
            assert set(pw["parent"].tolist()) <= mpiio, [name_of.get(s) for s in pw["parent"].tolist()]
            if library == "mpiio":  # ... for raw MPI-IO, inside the kernel's write
                assert {name_of[s] for s in pw["parent"].tolist()} <= set(calls)
            else:  # ... and every MPI-IO write on a data file is inside a call of the library's layer
                mw = p.layer_events("mpiio")
                mw = mw[np.isin(mw["file"], data_ids) & np.array([is_write(n) for n in p.function_names(mw)], bool)]
                tops = set(top["seq"].tolist())
                assert set(mw["parent"].tolist()) <= tops, [name_of.get(s) for s in mw["parent"].tolist()]
        for path, ranges in posix_written(p, files).items():
            written[path] += ranges
        for path, ranges in posix_written(p, files, under=set(w["seq"].tolist())).items():
            data_written[path] += ranges
    # coverage: the POSIX writes of all ranks tile each kept file exactly
    for path in files:
        size = os.stat(path).st_size
        data = points * STEPS * 12 * (len(writing) if pattern == "shared" else 1)  # the values it holds
        union, holes = merged(written[path]), gaps(written[path], size)
        if library in ("posix", "mpiio"):  # raw files: the data and nothing else
            assert size == data and union == [(0, size)], (path, size, holes)
            continue
        # PnetCDF, netCDF-4 and HDF5 leave holes in their metadata that no rank ever writes (strace
        # of the untraced kernel shows the same write ranges): PnetCDF pads its header to 512
        # bytes, HDF5 (and so netCDF-4) allocates metadata in 2 KiB blocks it does not fill.
        # What holds: the writes reach from byte 0 to the file's end exactly, every hole reads
        # as zeros, the holes fit in the file's non-data bytes, and the writes made inside the
        # library's data calls cover the data's bytes (and, for PnetCDF, the header's 8-byte
        # CDF-5 numrecs, which each record-growing collective put rewrites at offset 4).
        assert union[0][0] == 0 and union[-1][1] == size, (path, size, union)
        with open(path, "rb") as f:
            content = f.read()
        assert all(not any(content[lo:hi]) for lo, hi in holes), (path, holes)
        assert sum(hi - lo for lo, hi in holes) < size - data, (path, size, data, holes)
        under = sum(hi - lo for lo, hi in merged(data_written[path]))
        assert under == data + HEADER_UPDATES.get(library, 0), (path, under, data)
    # the analysis (trace report's JSON): the write path of the library's layer, on the writers
    paths = {wp["layer"]: wp for wp in callpath.analyze(trace)["write_paths"]}
    assert paths[layer]["writing_ranks"] == len(writing) and set(paths[layer]["functions"]) == set(calls)
