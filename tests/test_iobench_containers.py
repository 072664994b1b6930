"""nm-iobench in containers: every write pattern x every library the image's build has, in
hybrid mode (the image's own MPI and I/O libraries) and bind mode (the host's MPI injected
under the image's PnetCDF/netCDF/HDF5), on Charliecloud, for both MPI families; bwrap and
Podman once each. The directory under test is the run's --workdir, mounted read-write at
/nm/work; the kernel verifies what it reads back, and kept files are read again on the host
(numpy for raw files, ncdump/h5dump for library files) so the container's writes are checked
from outside it.
"""

import re

import numpy as np
import pytest

from conftest import nearmetal
from test_kernel_iobench import (GRID, LAYOUTS, NX, NY, STEPS, config, expected, hl_check_header, hl_regions,
                                 hl_values, kept_files, ok, read_raw)

PATTERNS = ("serial", "file-per-rank", "io-domains", "shared")
LIBRARIES = {"openmpi": ("posix", "mpiio", "pnetcdf", "netcdf4", "hdf5"), "mpich": ("posix", "mpiio", "hdf5")}
CASES = [(fam, p, lib) for fam, libs in LIBRARIES.items() for p in PATTERNS for lib in libs
         if (p, lib) != ("shared", "posix")]
EXT = {"posix": ".bin", "mpiio": ".bin", "pnetcdf": ".nc", "netcdf4": ".nc4", "hdf5": ".h5"}
VARS = [("temp_r8", True), ("temp_r4", False)]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    monkeypatch.delenv("OMPI_MCA_io", raising=False)
    monkeypatch.setenv("USER", "root")  # ch-run needs $USER


def in_container(family, mode, ranks, workdir, *kargs, runtime="charliecloud"):
    return nearmetal("run", "--mode", mode, "--runtime", runtime, "--mpi", family, "-n", ranks,
                     "--workdir", workdir, "--", "nm-iobench", *kargs, timeout=300)


def check_files_from_host(text, library, pattern, workdir):
    """The files the container kept, read on the host, hold the formula."""
    files = kept_files(text)
    regions = hl_regions(pattern)
    assert len(files) == len(regions), text
    host_files = [workdir / f.name for f in files]
    # inside the container the kernel names /nm/work/...: the same files on the host
    assert all(str(f).startswith("/nm/work/") for f in files), files
    assert sorted(workdir.iterdir()) == sorted(host_files)
    for path, (x0, y0, xl, yl) in zip(host_files, regions):
        if library in ("posix", "mpiio"):
            data = read_raw(path, xl, yl, VARS)
            for t in range(STEPS):
                for name, is_double in VARS:
                    assert np.array_equal(data[name][t], expected(NX, NY, x0, y0, xl, yl, t, is_double)), f"{path} {name}"
            continue
        hl_check_header(library, path, xl, yl, VARS, "default")
        for name, is_double in VARS:
            want = np.concatenate([expected(NX, NY, x0, y0, xl, yl, t, is_double).ravel() for t in range(STEPS)])
            assert np.array_equal(hl_values(library, path, name), want.astype(np.float64)), f"{path} {name}"


@pytest.mark.parametrize("mode", ["hybrid", "bind"])
@pytest.mark.parametrize("family, pattern, library", CASES)
def test_every_pattern_and_library_in_a_container(default_image, family, pattern, library, mode, tmp_path):
    ranks = 4 if pattern == "io-domains" else 2
    layout, io_layout = LAYOUTS[ranks]
    read = "parallel" if pattern in ("shared", "io-domains") else "serial"
    text = ok(in_container(family, mode, ranks, tmp_path, *GRID, "-l", layout, "-i", io_layout, "-p", pattern,
                           "-L", library, "-r", read, "-k"))
    assert text.rstrip().endswith("verify ok"), text
    cfg = config(text)
    assert cfg["pattern"] == pattern and cfg["library"] == library
    assert cfg["mpiio"] == ("ompio" if family == "openmpi" else "romio")
    if ranks == 4:  # hl_regions describes the 4-rank layout; 2 ranks are checked for shared/serial files
        check_files_from_host(text, library, pattern, tmp_path)
    elif pattern in ("serial", "shared"):
        check_files_from_host(text, library, pattern, tmp_path)


@pytest.mark.parametrize("runtime", ["bwrap", "podman"])
def test_other_runtimes_write_shared_files(default_image, runtime, tmp_path):
    text = ok(in_container("openmpi", "hybrid", 2, tmp_path, *GRID, "-p", "shared", "-i", "2x1", "-L", "pnetcdf",
                           "-r", "parallel", "-k", runtime=runtime))
    assert text.rstrip().endswith("verify ok"), text
    check_files_from_host(text, "pnetcdf", "shared", tmp_path)


@pytest.mark.parametrize("family", ["openmpi", "mpich"])
def test_bind_mode_maps_the_host_mpi_under_the_image_io_libraries(default_image, family, tmp_path):
    """In bind mode the image's HDF5 must run on the host's MPI: the kernel works and the run's
    plan injects the host library directory (not the image's MPI)."""
    dry = nearmetal("run", "--mode", "bind", "--mpi", family, "-n", 2, "--workdir", tmp_path, "--dry-run",
                    "--", "nm-iobench", "-L", "hdf5")
    assert dry.returncode == 0, dry.stderr
    assert "/nm/host-mpi" in dry.stdout and "/nm/work" in dry.stdout, dry.stdout
    text = ok(in_container(family, "bind", 2, tmp_path, *GRID, "-p", "shared", "-i", "2x1", "-L", "hdf5",
                           "-r", "parallel"))
    assert text.rstrip().endswith("verify ok"), text
    assert list(tmp_path.iterdir()) == []


def test_unavailable_library_in_the_image_is_one_line(default_image, tmp_path):
    out = in_container("mpich", "hybrid", 2, tmp_path, *GRID, "-p", "shared", "-L", "pnetcdf")
    assert out.returncode == 2, out.stdout + out.stderr
    lines = [l for l in out.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and re.search(r"pnetcdf is not available", lines[0]), out.stderr
