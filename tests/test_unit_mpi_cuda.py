"""CUDA-aware host MPIs (discovery/mpi_cuda.py): detected from their files on a fake tree
(UCX's CUDA modules beside libucs, Open MPI's smcuda component, MPICH linking libcudart), the
UCX CUDA modules brought into bind mode's closure as the "ucx" plugin kind with the real
closure of a real ELF file (a host UCX module copied under a CUDA module's name), the driver's
libraries kept out of it, and the transport record naming the CUDA transports used. Debian's
Open MPI and MPICH here have no CUDA support: doctor's words say so."""

import os
import shutil
from types import SimpleNamespace

import pytest

from nearmetal.discovery import mpi_cuda
from nearmetal.families._transport import report, summary
from nearmetal.models import bind

pytestmark = pytest.mark.unit

HOST_UCX = "/usr/lib/x86_64-linux-gnu/ucx"
OMPI = {"family": "openmpi", "library": "/usr/lib/x86_64-linux-gnu/libmpi.so.40",
        "plugin_dirs": {"openmpi": "/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3"}}


def fake_ucx(root, modules=("libuct_cuda.so.0", "libuct_cuda_gdrcopy.so.0", "libucm_cuda.so.0", "libuct_cma.so.0")):
    lib = root / "lib"
    (lib / "ucx").mkdir(parents=True)
    (lib / "libucs.so.0").write_bytes(b"\x7fELF")
    for name in modules:
        (lib / "ucx" / name).write_bytes(b"\x7fELF")
    return lib / "libucs.so.0"


def test_ucx_cuda_modules_beside_libucs_make_an_mpi_cuda_aware(tmp_path):
    libucs = fake_ucx(tmp_path)
    found = mpi_cuda.detect({"family": "mpich", "library": ""}, str(libucs))
    assert found["cuda"] and found["transports"] == ["cuda_copy", "cuda_ipc", "gdr_copy"]
    assert found["ucx_dir"] == str(tmp_path / "lib" / "ucx")
    assert [os.path.basename(m) for m in found["ucx_modules"]] == ["libucm_cuda.so.0", "libuct_cuda.so.0",
                                                                   "libuct_cuda_gdrcopy.so.0"]  # not cma
    assert "UCX cuda_copy, cuda_ipc, gdr_copy" in mpi_cuda.words(found)


def test_ucx_without_cuda_modules_and_debians_mpis_have_no_cuda_support(tmp_path):
    libucs = fake_ucx(tmp_path, modules=("libuct_cma.so.0", "libuct_ib.so.0"))
    found = mpi_cuda.detect({"family": "mpich", "library": ""}, str(libucs))
    assert not found["cuda"] and found["ucx_modules"] == [] and found["ucx_dir"] is None
    assert mpi_cuda.words(found).startswith("host MPI has no CUDA support")
    if not os.path.exists(OMPI["library"]):
        pytest.fail("set-up installs Debian's Open MPI")
    host = mpi_cuda.detect(OMPI)  # the real files: Debian builds without CUDA
    assert host == {"cuda": False, "via": [], "transports": [], "ucx_dir": None, "ucx_modules": []}


def test_open_mpi_built_with_cuda_is_told_by_its_smcuda_component(tmp_path):
    pkglib = tmp_path / "openmpi"
    pkglib.mkdir()
    (pkglib / "mca_btl_vader.so").write_bytes(b"\x7fELF")
    mpi = {"family": "openmpi", "library": str(tmp_path / "libmpi.so.40"), "plugin_dirs": {"openmpi": str(pkglib)}}
    assert not mpi_cuda.detect(mpi, libucs="")["cuda"]
    (pkglib / "mca_btl_smcuda.so").write_bytes(b"\x7fELF")
    found = mpi_cuda.detect(mpi, libucs="")
    assert found["cuda"] and found["transports"] == ["smcuda"] and "mca_btl_smcuda.so" in found["via"][0]


def test_bind_mode_stages_the_ucx_cuda_modules_with_their_real_closure(tmp_path):
    """A real UCX module (the host's cma transport) copied in as libuct_cuda.so.0: its closure
    (libuct, libucs, ...) joins the staged libraries, the module the "ucx" plugin kind."""
    real = os.path.join(HOST_UCX, "libuct_cma.so.0")
    if not os.path.exists(real):
        pytest.fail("set-up installs Debian's UCX (libucx0)")
    libucs = fake_ucx(tmp_path, modules=())
    shutil.copy(real, tmp_path / "lib" / "ucx" / "libuct_cuda.so.0")
    from nearmetal.elf import LinkerView

    host = LinkerView("/")
    ordered = {"libucs.so.0": SimpleNamespace(host_path=libucs)}
    plugins = {}

    def add_closure(path):
        for lib in host.closure(path):
            if not bind._driver_library(lib.soname):
                ordered.setdefault(lib.soname, lib)

    bind._add_cuda_transports({"family": "openmpi"}, ordered, plugins, add_closure)
    directory, files = plugins["ucx"]
    assert directory == str(tmp_path / "lib" / "ucx") and files == [os.path.join(directory, "libuct_cuda.so.0")]
    assert "libuct.so.0" in ordered  # the module's own DT_NEEDED, resolved on the host
    (note,) = bind.cuda_notes({"family": "openmpi"}, plugins)
    assert "CUDA-aware" in note and "cuda_copy, cuda_ipc" in note and "/nm/host-mpi/lib/ucx" in note


def test_an_mpi_without_cuda_modules_stages_no_ucx_plugins(tmp_path):
    libucs = fake_ucx(tmp_path, modules=("libuct_cma.so.0",))
    ordered = {"libucs.so.0": SimpleNamespace(host_path=libucs)}
    plugins = {}
    bind._add_cuda_transports({"family": "openmpi"}, ordered, plugins, lambda p: pytest.fail("closure asked"))
    assert plugins == {} and bind.cuda_notes({"family": "openmpi"}, plugins) == []


@pytest.mark.parametrize("soname,driver", [("libcuda.so.1", True), ("libnvidia-ml.so.1", True),
                                           ("libnvidia-ptxjitcompiler.so.1", True), ("libcudart.so.12", False),
                                           ("libucs.so.0", False)])
def test_the_drivers_libraries_never_join_the_staged_closure(soname, driver):
    assert bind._driver_library(soname) is driver


def test_the_recorded_transport_names_the_cuda_transports_used():
    ucx = ("[1.0] [n0:11:0]      ucp_worker.c:1763 UCX  INFO    ep_cfg[0]: tag(self/memory0 cma/memory) rma(self/memory0)\n"
           "[1.0] [n0:12:0]      ucp_worker.c:1763 UCX  INFO    ep_cfg[0]: tag(cuda_ipc/cuda cma/memory) "
           "rma(cuda_copy/cuda posix/memory)\n")
    got = summary(report(ucx), one_machine=True)
    assert got["cuda"] == ["cuda_copy", "cuda_ipc"] and got["shared_memory"] and not got["tcp_within_node"]
    plain = summary(report(ucx.replace("cuda_ipc/cuda", "sysv/memory").replace("cuda_copy/cuda", "posix/memory")),
                    one_machine=True)
    assert "cuda" not in plain  # a CPU run's record is as it was
