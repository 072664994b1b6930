"""Bind mode's closure of a CUDA-aware MPI, on ELF files built here with cc: an MPI under a
prefix whose libmpi links libucs and the CUDA runtime, a UCX module directory beside libucs
with libuct_cuda (linking the driver's libcuda.so.1) and a CPU module. The real host_closure
stages libuct_cuda as the "ucx" plugin kind with its closure, never the driver's libcuda, and
leaves the CPU module out; the MPI is CUDA-aware by its module and by linking libcudart."""

import os
import shutil
import subprocess

import pytest

from nearmetal.discovery.mpi_cuda import detect
from nearmetal.models.bind import cuda_notes, host_closure


def cc(*args):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.fail("set-up installs a C compiler (build-essential)")
    subprocess.run([cc, *map(str, args)], check=True, capture_output=True, timeout=120)


def shared(path, soname, *links):
    src = path.with_suffix(".c")
    src.write_text(f"int {soname.split('.')[0].replace('-', '_')}_here(void) {{ return 1; }}\n")
    cc("-shared", "-fPIC", "-o", path, f"-Wl,-soname,{soname}", src, "-Wl,--no-as-needed", *links)


@pytest.fixture
def cuda_mpi(tmp_path):
    lib, drv = tmp_path / "lib", tmp_path / "driver"
    (lib / "ucx").mkdir(parents=True)
    drv.mkdir()
    shared(drv / "libcuda.so.1", "libcuda.so.1")
    shared(lib / "libcudart.so.12", "libcudart.so.12")
    shared(lib / "libucs.so.0", "libucs.so.0")
    shared(lib / "libmpi.so.12", "libmpi.so.12", f"-L{lib}", "-l:libucs.so.0", "-l:libcudart.so.12",
           f"-Wl,-rpath,{lib}")
    shared(lib / "ucx" / "libuct_cuda.so.0", "libuct_cuda.so.0", f"-L{drv}", "-l:libcuda.so.1", f"-L{lib}",
           "-l:libcudart.so.12", f"-Wl,-rpath,{drv}:{lib}")
    shared(lib / "ucx" / "libuct_cma.so.0", "libuct_cma.so.0")
    return {"family": "mpich", "version": "4.2", "library": str(lib / "libmpi.so.12"), "soname": "libmpi.so.12",
            "prefix": str(tmp_path), "plugin_dirs": {}}


def test_the_ucx_cuda_module_is_staged_with_its_closure_but_not_the_drivers_libcuda(cuda_mpi, tmp_path):
    libs, aliases, plugins = host_closure(cuda_mpi, ["libmpi.so.12"])
    assert {"libmpi.so.12", "libucs.so.0", "libcudart.so.12"} <= set(libs)
    assert "libcuda.so.1" not in libs  # the driver's: --gpus binds it, bind mode never stages it
    directory, files = plugins["ucx"]
    assert directory == str(tmp_path / "lib" / "ucx") and [os.path.basename(f) for f in files] == ["libuct_cuda.so.0"]
    (note,) = cuda_notes(cuda_mpi, plugins)
    assert "cuda_copy, cuda_ipc" in note and "libuct_cuda.so" in note


def test_the_mpi_is_cuda_aware_by_its_module_and_its_link_to_the_cuda_runtime(cuda_mpi, tmp_path):
    found = detect(cuda_mpi, str(tmp_path / "lib" / "libucs.so.0"))
    assert found["cuda"] and found["transports"] == ["cuda_copy", "cuda_ipc"]
    assert found["via"][1] == "mpich links libcudart.so.12"


def test_a_staged_ucx_without_cuda_modules_makes_no_cuda_claim(tmp_path):
    """The fabric stages UCX's whole module directory (Debian's Open MPI and MPICH: libuct_cma,
    libuct_ib, libuct_rdmacm, ...): none of them is a CUDA transport, so bind says nothing of CUDA."""
    ucx = tmp_path / "ucx"
    files = [str(ucx / n) for n in ("libuct_cma.so.0", "libuct_ib.so.0", "libuct_rdmacm.so.0", "libucm_ugni.so.0")]
    installation = {"family": "openmpi"}
    assert cuda_notes(installation, {"ucx": (str(ucx), files)}) == []
    (note,) = cuda_notes(installation, {"ucx": (str(ucx), files + [str(ucx / "libuct_cuda.so.0")])})
    assert note.startswith("bind: host openmpi is CUDA-aware: UCX's CUDA transports (cuda_copy, cuda_ipc: "
                           "libuct_cuda.so from ")
