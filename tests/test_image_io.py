"""The parallel I/O stack inside images: what the distro offers is installed and recorded,
and nm-iobench built inside the image finds the libraries Debian builds for each MPI."""

import os
import re
from pathlib import Path

import pytest

from conftest import nearmetal
from nearmetal.image.builder import installable
from nearmetal.image.chroot import BuildLog
from nearmetal.image.recipe import io_packages

# What Debian builds per MPI family (PnetCDF and parallel netCDF-4 link Open MPI only).
EXPECTED = {"openmpi": {"posix", "mpiio", "pnetcdf", "netcdf4", "hdf5"}, "mpich": {"posix", "mpiio", "hdf5"}}


def _available(out):
    assert out.returncode == 0, f"exit {out.returncode}\n{out.stdout}\n{out.stderr}"
    libs = dict(re.findall(r"^(\w+) (available|unavailable)", out.stdout, re.M))
    assert set(libs) == {"posix", "mpiio", "pnetcdf", "netcdf4", "hdf5"}, out.stdout
    return {lib for lib, state in libs.items() if state == "available"}


def test_default_image_records_io_packages(default_image):
    meta = default_image.meta
    wanted = io_packages(default_image.mpis)
    assert sorted(meta["io_packages"]) == sorted(wanted), meta["io_packages"]
    assert all(meta["io_packages"].values()), "every installed package has a version"
    assert meta["io_packages_unavailable"] == []
    for tool in ("ncdump", "h5dump"):
        assert os.access(default_image.rootfs / "usr/bin" / tool, os.X_OK), tool


@pytest.mark.parametrize("family", ["openmpi", "mpich"])
def test_iobench_in_default_image_finds_the_io_libraries(family, default_image):
    out = nearmetal("run", "-n", "1", "--mode", "hybrid", "--runtime", "charliecloud", "--mpi", family,
                    "--image", default_image.name, "--", "nm-iobench", "-A", timeout=120)
    assert _available(out) == EXPECTED[family]


@pytest.mark.parametrize("fixture", ["bullseye_image", "trixie_image"])
def test_other_releases_get_parallel_hdf5(fixture, request):
    img = request.getfixturevalue(fixture)
    assert "libhdf5-mpich-dev" in img.meta["io_packages"], img.meta
    out = nearmetal("run", "-n", "1", "--mode", "hybrid", "--runtime", "bwrap", "--mpi", "mpich",
                    "--image", img.name, "--", "nm-iobench", "-A", timeout=120)
    assert _available(out) == EXPECTED["mpich"]


def test_installable_leaves_out_unknown_packages(tmp_path):
    """Against the host's own apt (chroot /): a name no release has is dropped, a real one kept."""
    log = BuildLog(tmp_path / "log", truncate=True)
    assert installable(Path("/"), ["hdf5-tools", "nm-no-such-package"], log) == ["hdf5-tools"]
    assert "nm-no-such-package" in (tmp_path / "log").read_text()
