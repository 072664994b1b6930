"""GPUs for real. Without a GPU (this is expected on most machines) the tests that need one
report themselves skipped with the reason; what can run without one does: the kernels build
with no CUDA toolkit and say "no GPU" in one line, the witness records "none" and the libcuda
it found, nm-gpuvis gives each local rank of both MPI launchers its own device, and --gpus is
refused in one line."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import assert_one_line_error, nearmetal
from nearmetal.discovery.gpu import discover
from nearmetal.image.store import Image

pytestmark = pytest.mark.integration

FOUND = discover()
HAS_GPU = bool(FOUND["gpus"])
NO_GPU = "no NVIDIA GPU on this machine (no /proc/driver/nvidia, NVML or nvidia-smi): the GPU checks run on a GPU " \
         "machine (bench/gpu_check.sh, docs/gpu.md)"
ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    from nearmetal.kernels.gpu_build import build

    built, skipped = build(dest=tmp_path_factory.mktemp("gpu-kernels"))
    return built, skipped


def test_kernels_build_without_a_cuda_toolkit(kernels):
    built, skipped = kernels
    assert {"nm-gpu-stream", "nm-gpu-copy"} <= set(built), skipped
    assert all("\n" not in s for s in skipped)
    if not HAS_GPU:
        out = subprocess.run([built["nm-gpu-stream"], "-n", "4096", "-t", "3"], capture_output=True, text=True,
                             timeout=60, env={k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"})
        assert out.returncode == 4 and out.stderr.startswith("nm-gpu-stream: no GPU: ")
        assert len(out.stderr.strip().splitlines()) == 1


def test_ptx_compiles_for_hopper_and_ampere():
    from nearmetal.kernels.gpu_build import check_ptx, find_ptxas

    ptxas = find_ptxas()
    if ptxas is None:
        pytest.skip("no ptxas (a CUDA toolkit, `pip install nvidia-cuda-nvcc-cu12`, or NEARMETAL_PTXAS=PATH)")
    for arch in ("sm_90", "sm_80", "sm_70"):
        assert check_ptx(ptxas, arch) is None, arch


def _fake_driver(tmp):
    """A libcuda.so.1 -> libcuda.so.550.54.15 whose cuInit answers "no device" (CUDA error 100),
    and a program that loads it: the witness's own reading is what is tested."""
    src = tmp / "cuda.c"
    src.write_text("int cuInit(unsigned f){(void)f;return 100;}\n")
    lib = tmp / "lib"
    lib.mkdir()
    subprocess.run(["cc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", lib / "libcuda.so.550.54.15", src],
                   check=True)
    os.symlink("libcuda.so.550.54.15", lib / "libcuda.so.1")
    prog = tmp / "loads-cuda"
    (tmp / "p.c").write_text('#include <dlfcn.h>\nint main(void){return dlopen("libcuda.so.1",RTLD_NOW)?0:1;}\n')
    subprocess.run(["cc", "-o", prog, tmp / "p.c", "-ldl"], check=True)
    return lib, prog


def test_witness_without_a_gpu_says_none(tmp_path):
    from nearmetal.witness.gpu import library, parse

    lib, prog = _fake_driver(tmp_path)
    out = subprocess.run([prog], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, LD_LIBRARY_PATH=str(lib), LD_PRELOAD=library(), OMPI_COMM_WORLD_RANK="3",
                                  CUDA_VISIBLE_DEVICES="1"))
    assert out.returncode == 0, out.stderr
    rec, = parse(out.stderr)
    assert rec["rank"] == "3" and rec["visible"] == "1" and rec["context"] == "no"
    assert rec["libcuda"] == str(lib / "libcuda.so.550.54.15")
    assert rec["inode"] == str(os.stat(lib / "libcuda.so.550.54.15").st_ino)
    assert rec["libcuda_version"] == "550.54.15"
    assert rec["gpu"] == "none(cuInit=100)"
    assert rec["driver"] == (FOUND["driver"] or "none")


def test_witness_ignores_programs_without_cuda_or_mpi():
    from nearmetal.witness.gpu import library

    out = subprocess.run(["/bin/true"], capture_output=True, text=True, env=dict(os.environ, LD_PRELOAD=library()))
    assert out.returncode == 0 and "nm-gpu-witness" not in out.stderr


@pytest.mark.parametrize("launcher", ["mpirun.openmpi", "mpiexec.hydra"])
def test_gpuvis_gives_each_local_rank_its_device(launcher):
    from nearmetal.gpu._visible import wrap

    exe = shutil.which(launcher)
    if exe is None:
        pytest.fail(f"{launcher} not installed: scripts/setup.sh installs both MPI families")
    argv = [exe, *(["-n"] if "hydra" in launcher else ["--oversubscribe", "-np"]), "3",
            *wrap(["/bin/sh", "-c", 'echo "$CUDA_VISIBLE_DEVICES $CUDA_DEVICE_ORDER"'], ["2", "5"])]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=dict(os.environ, **ROOT_ENV))
    assert out.returncode == 0, out.stderr
    assert sorted(out.stdout.split("\n")[:-1]) == ["2 PCI_BUS_ID", "2 PCI_BUS_ID", "5 PCI_BUS_ID"]


@pytest.mark.skipif(HAS_GPU, reason="this machine has a GPU: the refusal is for machines without one")
@pytest.mark.parametrize("extra", [[], ["--mode", "hybrid", "--runtime", "bwrap"]])
def test_gpus_refused_without_a_gpu(extra):
    out = nearmetal("run", "--gpus", "all", *extra, "--", "/bin/true")
    assert_one_line_error(out)
    assert "this machine has no NVIDIA GPU" in out.stderr


# -- on a GPU --------------------------------------------------------------------------------

needs_gpu = pytest.mark.skipif(not HAS_GPU, reason=NO_GPU)


@needs_gpu
def test_device_stream_natively_with_the_witness(kernels):
    from nearmetal.kernels.parsers.gpu import parse as parse_kernel
    from nearmetal.witness.gpu import parse

    built, _ = kernels
    out = nearmetal("run", "-n", "1", "--gpus", "1", "--witness", "--", built["nm-gpu-stream"], "-n", str(1 << 24))
    assert out.returncode == 0, out.stderr[-2000:]
    recs = parse_kernel(out.stdout, "gpu-stream", {})
    assert {r["metric"] for r in recs} == {"copy", "scale", "add", "triad"} and all(r["value"] > 0 for r in recs)
    w, = parse(out.stderr)
    assert w["gpu"] == FOUND["gpus"][0]["pci_bus_id"] and w["driver"] == FOUND["driver"]


@needs_gpu
@pytest.mark.parametrize("runtime", ["bwrap", "charliecloud", "podman", "apptainer"])
def test_container_ranks_load_the_hosts_libcuda(runtime, default_image, kernels):
    from nearmetal.witness.gpu import parse

    libcuda = next(v for k, v in FOUND["libraries"].items() if k.startswith("libcuda.so"))
    host_inode = str(os.stat(libcuda["file"]).st_ino)
    out = nearmetal("run", "-n", "1", "--gpus", "1", "--witness", "--mode", "hybrid", "--runtime", runtime, "--",
                    "/opt/nearmetal/openmpi/bin/nm-mpi-info")
    if out.returncode != 0 and "is not installed" in out.stderr:
        pytest.skip(out.stderr.strip())
    assert out.returncode == 0, out.stderr[-2000:]
    w = parse(out.stderr)
    assert w and all(r["inode"] == host_inode or r["libcuda"] == "none" for r in w)


def test_doctor_json_has_the_gpu_section():
    import json

    out = nearmetal("doctor", "--json")
    assert out.returncode == 0, out.stderr
    gpu = json.loads(out.stdout)["gpu"]
    assert [g["pci_bus_id"] for g in gpu["gpus"]] == [g["pci_bus_id"] for g in FOUND["gpus"]]
    assert Path("/proc/driver/nvidia").exists() == ("/proc/driver/nvidia" in gpu["sources"])


def test_doctor_says_whether_each_host_mpi_is_cuda_aware():
    """Debian's Open MPI and MPICH are built without CUDA: --json says so for each (mpi[].cuda),
    and so do the words on a machine with a GPU; without one, the one GPU line is all (no
    device buffer to move: a line per MPI would only be noise)."""
    import json

    report = json.loads(nearmetal("doctor", "--json").stdout)
    assert report["mpi"] and all(m["cuda"] == {"aware": False, "via": [], "transports": []} for m in report["mpi"])
    out = nearmetal("doctor", env={"COLUMNS": "400"})
    lines = [line.strip() for line in out.stdout.splitlines() if "CUDA support" in line]
    gpu_lines = [line for line in out.stdout.splitlines() if line.startswith("GPUs")]
    if FOUND["gpus"]:
        assert len(lines) == len(report["mpi"]) and all(": host MPI has no CUDA support (" in line for line in lines)
    else:
        assert lines == [] and len(gpu_lines) == 1 and "--gpus is refused on this machine" in gpu_lines[0], out.stdout


# -- the binds for real, on a fake driver tree (no GPU needed) ----------------------------------

def _stat_rootfs(tmp):
    """A directory image with stat(1) and its libraries, and the mount points."""
    from nearmetal.elf import LinkerView, read_elf

    root = tmp / "rootfs"
    for d in ("bin", "dev", "proc", "sys", "tmp", "etc", "nm/host-mpi", "nm/host-gpu", "nm/work"):
        (root / d).mkdir(parents=True, exist_ok=True)
    stat = shutil.which("stat")
    shutil.copy2(stat, root / "bin" / "stat")
    files = [lib.path for lib in LinkerView("/").closure(stat, skip_glibc=False)] + [read_elf(stat).interp]
    for f in files:
        (root / f.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.realpath(f), root / f.lstrip("/"))
    for name, text in (("hosts", "127.0.0.1 localhost\n"), ("passwd", "root:x:0:0::/:/bin/stat\n"),
                       ("group", "root:x:0:\n")):
        (root / "etc" / name).write_text(text)  # ch-run binds the host's over these
    return root


@pytest.mark.parametrize("runtime", ["bwrap", "charliecloud"])
def test_container_sees_the_host_driver_files_at_their_inodes(tmp_path, monkeypatch, runtime):
    """What --gpus binds, started by the real runtime: inside, /nm/host-gpu/lib/libcuda.so.1 is
    the host's libcuda file (same inode), the placeholders' development link resolves, and the
    GPU's device node is there."""
    import types

    import gpu_tree
    from nearmetal.gpu.plan import prepare
    from nearmetal.runtimes import get
    from nearmetal.runtimes.base import RankSpec

    monkeypatch.setenv("NEARMETAL_HOME", str(tmp_path / "home"))  # the staged placeholders go there
    rt = get(runtime)
    if not rt.path():
        pytest.skip(f"{runtime} not installed")
    fake = gpu_tree.make(tmp_path / "machine")
    found = discover(root=str(fake), load=None)
    for lib in found["libraries"].values():  # the fake driver's files, as this machine names them
        lib["file"] = str(fake) + lib["file"]
    image = Image("stat", _stat_rootfs(tmp_path), meta={})
    c = types.SimpleNamespace(runtime=rt, image=image, env={}, runtime_args=(), mode="hybrid")
    plan = prepare(c, found, "1,")
    spec = RankSpec(image, ["/bin/stat", "-L", "-c", "%i %n", "/nm/host-gpu/lib/libcuda.so.1",
                            "/nm/host-gpu/lib/libcuda.so", "/nm/host-gpu/lib/libnvidia-ml.so.1"],
                    env={"LD_LIBRARY_PATH": "/nm/host-gpu/lib"}, runtime_args=plan.args)
    argv = rt.wrap(spec)
    # bwrap binds device nodes by path: the fake tree's files stand in for /dev/nvidia*
    argv = [str(fake) + a if argv[i - 1] == "--dev-bind" and a.startswith("/dev/nvidia") else a
            for i, a in enumerate(argv)]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=rt.env_for_tools())
    assert out.returncode == 0, out.stderr
    inodes = [line.split()[0] for line in out.stdout.splitlines()]
    libcuda = os.stat(fake / "usr/local/nvidia/lib64/libcuda.so.550.54.15").st_ino
    nvml = os.stat(fake / "usr/local/nvidia/lib64/libnvidia-ml.so.550.54.15").st_ino
    assert inodes == [str(libcuda), str(libcuda), str(nvml)]
