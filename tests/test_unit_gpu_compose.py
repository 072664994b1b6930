"""--gpus composed, argv for argv: every runtime x mode x --gpus form, on a fake machine with
two GPUs (tests/gpu_tree.py), and the refusals, each in one line.

As in test_unit_compose.py the components are resolved through a FakeHost and the MPI models'
output is written by hand; what differs is what --gpus adds: nm-gpuvis in front of each rank
(CUDA_VISIBLE_DEVICES per local rank), the runtime's GPU arguments before the image, and the
driver libraries on LD_LIBRARY_PATH. `$S` stands for the staged placeholder directory
($NEARMETAL_HOME/gpu/stage-KEY), `$R` for the image's root file system.
"""

import os
import shlex
import shutil

import pytest

import gpu_tree
from nearmetal.compose import compose
from nearmetal.discovery import gpu as discovery
from nearmetal.errors import NearmetalError
from nearmetal.image import Image
from nearmetal.models import ModelPlan
from nearmetal.resolve import Host, resolve
from nearmetal.run import RunRequest, _gpu_plans
from nearmetal.runtimes.base import Mount

pytestmark = pytest.mark.unit

MPI = {"family": "openmpi", "version": "4.1.4", "library": "/usr/lib/x86_64-linux-gnu/libmpi.so.40.30.4",
       "soname": "libmpi.so.40", "abi": "openmpi", "compiler": "/usr/bin/mpicc.openmpi",
       "launcher": "/usr/bin/mpirun.openmpi", "pmi": ["pmix"], "plugin_dirs": {}}
ON_PATH = {"ch-run", "bwrap", "podman", "apptainer", "srun", "scontrol"}
OMPI = "/opt/nearmetal/openmpi/bin/nm-mpi-info"
UUID1 = gpu_tree.UUID1


class GpuHost(Host):
    """One Open MPI, one image, and the fake machine's GPUs."""

    def __init__(self, image, root, which=gpu_tree.which_none):
        self._image, self._root, self._which = image, root, which

    def installations(self):
        return {"openmpi": MPI}

    def installation(self, family):
        return MPI

    def image(self, spec):
        return self._image

    def program_abi(self, path):
        return None

    def image_program_abi(self, image, program):
        return None

    def gpus(self):
        return discovery.discover(root=str(self._root), which=self._which, run=lambda argv: "", load=None)


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """(home, image rootfs, fake machine root): a non-root user, a fake PATH, nm-gpuvis at /h/tools."""
    home = tmp_path / "home"
    monkeypatch.setenv("NEARMETAL_HOME", str(home))
    monkeypatch.setenv("USER", "tester")
    monkeypatch.delenv("NEARMETAL_APPTAINER_NVCCLI", raising=False)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(shutil, "which", lambda name, mode=os.F_OK | os.X_OK, path=None:
                        f"/usr/bin/{name}" if name in ON_PATH else None)
    import nearmetal.gpu._visible as visible
    import nearmetal.launchers.srun as srun

    monkeypatch.setattr(visible, "binary", lambda: "/h/tools/nm-gpuvis")
    monkeypatch.setattr(srun, "_plugins", lambda: ["pmix", "pmi2"])
    rootfs = tmp_path / "img" / "rootfs"
    (rootfs / "nm" / "host-gpu").mkdir(parents=True)
    return home, rootfs, gpu_tree.make(tmp_path / "machine")


def image_at(rootfs):
    return Image(name="nm-test", rootfs=rootfs, sqfs=None, podman_ref="localhost/nearmetal-nm-test:latest",
                 distro="bookworm", mpis=["openmpi"], meta={})


def model(mode):
    if mode == "native":
        return ModelPlan(["/usr/bin/prog"], program="/usr/bin/prog")
    if mode == "bind":
        return ModelPlan([OMPI], env={"LD_LIBRARY_PATH": "/nm/host-mpi/lib"},
                         mounts=[Mount("/stage/openmpi-k", "/nm/host-mpi")])
    return ModelPlan([OMPI])


def launch(machine, mode="hybrid", runtime=None, gpus="all", which=gpu_tree.which_none, scheduler=None, **kw):
    """(argv as one string with $S and $R in place, env delta, notes)."""
    home, rootfs, root = machine
    r = RunRequest("prog", mode=mode, runtime=runtime, image=None if mode == "native" else "nm-test", mpi="openmpi",
                   gpus=gpus, scheduler=scheduler, **kw)
    host = GpuHost(image_at(rootfs), root, which)
    components = resolve(r, (), host)
    argv, env, notes = compose(components, [model(mode)], cores=4, environ={}, tag="nmT",
                               gpus=_gpu_plans(components, host))
    text = shlex.join(argv).replace(str(rootfs), "$R")
    staged = sorted((home / "gpu").glob("stage-*")) if (home / "gpu").is_dir() else []
    if staged:
        assert len(staged) == 1
        text = text.replace(str(staged[0]), "$S")
    return text, env, notes


# -- the literal argv: every runtime x mode, --gpus all ---------------------------------------

BWRAP = ("/usr/bin/bwrap --ro-bind $R / --dev-bind /dev /dev --proc /proc --ro-bind /sys /sys --bind /tmp /tmp "
         "--ro-bind-try /etc/hosts /etc/hosts --die-with-parent")
PODMAN = ("/usr/bin/podman --root $H/podman/root --runroot $H/podman/runroot --storage-driver overlay run --rm "
          "--pull=never --net=host --ipc=host --pid=host --userns=host --env-host --security-opt label=disable -v /tmp:/tmp "
          "--log-driver=none")
# The driver libraries (compute + utility), each the host's file over its placeholder.
LIBS = [("/usr/local/nvidia/lib64/libcuda.so.550.54.15", "libcuda.so.1"),
        ("/usr/lib/x86_64-linux-gnu/libnvidia-cfg.so.550.54.15", "libnvidia-cfg.so.1"),
        ("/usr/local/nvidia/lib64/libnvidia-gpucomp.so.550.54.15", "libnvidia-gpucomp.so.550.54.15"),
        ("/usr/local/nvidia/lib64/libnvidia-ml.so.550.54.15", "libnvidia-ml.so.1"),
        ("/usr/local/nvidia/lib64/libnvidia-nvvm.so.550.54.15", "libnvidia-nvvm.so.4"),
        ("/usr/local/nvidia/lib64/libnvidia-ptxjitcompiler.so.550.54.15", "libnvidia-ptxjitcompiler.so.1")]
BW_LIBS = "--ro-bind $S /nm/host-gpu " + " ".join(f"--ro-bind {s} /nm/host-gpu/lib/{n}" for s, n in LIBS)
CH_LIBS = "--bind=$S:/nm/host-gpu " + " ".join(f"--bind={s}:/nm/host-gpu/lib/{n}" for s, n in LIBS)
PM_LIBS = "-v $S:/nm/host-gpu:ro " + " ".join(f"-v {s}:/nm/host-gpu/lib/{n}:ro" for s, n in LIBS)
CONTROL = ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]
BW_CTL = " ".join(f"--dev-bind {d} {d}" for d in CONTROL)
PM_CTL = " ".join(f"--device {d}" for d in CONTROL)
RUN = "/usr/bin/mpirun.openmpi -np 2"
VIS = "/h/tools/nm-gpuvis --devices"

ALL = {
    ("native", None):
        f"{RUN} -x OMP_NUM_THREADS=1 {VIS} 0,1 -- /usr/bin/prog",
    ("hybrid", "bwrap"):
        f"{RUN} {VIS} 0,1 -- {BWRAP} --setenv LD_LIBRARY_PATH /nm/host-gpu/lib --setenv OMP_NUM_THREADS 1 "
        f"--dev-bind /dev/nvidia0 /dev/nvidia0 --dev-bind /dev/nvidia1 /dev/nvidia1 {BW_CTL} {BW_LIBS} -- {OMPI}",
    ("bind", "bwrap"):
        f"{RUN} {VIS} 0,1 -- {BWRAP} --ro-bind /stage/openmpi-k /nm/host-mpi "
        "--setenv LD_LIBRARY_PATH /nm/host-mpi/lib:/nm/host-gpu/lib --setenv OMP_NUM_THREADS 1 "
        f"--dev-bind /dev/nvidia0 /dev/nvidia0 --dev-bind /dev/nvidia1 /dev/nvidia1 {BW_CTL} {BW_LIBS} -- {OMPI}",
    ("hybrid", "charliecloud"):
        f"{RUN} {VIS} 0,1 -- /usr/bin/ch-run --join-ct=2 --join-tag=nmT --set-env=LD_LIBRARY_PATH=/nm/host-gpu/lib "
        f"--set-env=OMP_NUM_THREADS=1 {CH_LIBS} $R -- {OMPI}",
    ("bind", "charliecloud"):
        f"{RUN} {VIS} 0,1 -- /usr/bin/ch-run --join-ct=2 --join-tag=nmT --bind=/stage/openmpi-k:/nm/host-mpi "
        "--set-env=LD_LIBRARY_PATH=/nm/host-mpi/lib:/nm/host-gpu/lib --set-env=OMP_NUM_THREADS=1 "
        f"{CH_LIBS} $R -- {OMPI}",
    ("hybrid", "podman"):
        f"{RUN} {VIS} 0,1 -- {PODMAN} -e LD_LIBRARY_PATH=/nm/host-gpu/lib -e OMP_NUM_THREADS=1 "
        f"--device /dev/nvidia0 --device /dev/nvidia1 {PM_CTL} {PM_LIBS} localhost/nearmetal-nm-test:latest {OMPI}",
    ("bind", "podman"):
        f"{RUN} {VIS} 0,1 -- {PODMAN} -v /stage/openmpi-k:/nm/host-mpi:ro "
        "-e LD_LIBRARY_PATH=/nm/host-mpi/lib:/nm/host-gpu/lib -e OMP_NUM_THREADS=1 "
        f"--device /dev/nvidia0 --device /dev/nvidia1 {PM_CTL} {PM_LIBS} localhost/nearmetal-nm-test:latest {OMPI}",
    ("hybrid", "apptainer"):
        f"{RUN} -x APPTAINERENV_OMP_NUM_THREADS=1 -x APPTAINERENV_OMPI_MCA_btl_vader_single_copy_mechanism=none "
        f"{VIS} 0,1 --also-prefix APPTAINERENV_ -- /usr/bin/apptainer --quiet exec --bind /tmp --bind /dev/shm --nv "
        f"$R {OMPI}",
    ("bind", "apptainer"):
        f"{RUN} -x APPTAINERENV_LD_LIBRARY_PATH=/nm/host-mpi/lib -x APPTAINERENV_OMP_NUM_THREADS=1 "
        f"-x APPTAINERENV_OMPI_MCA_btl_vader_single_copy_mechanism=none {VIS} 0,1 --also-prefix APPTAINERENV_ -- "
        f"/usr/bin/apptainer --quiet exec --bind /tmp --bind /dev/shm --bind /stage/openmpi-k:/nm/host-mpi:ro --nv "
        f"$R {OMPI}",
}


def test_every_runtime_and_mode_is_covered():
    from nearmetal import runtimes

    assert set(ALL) == {("native", None)} | {(m, r) for m in ("hybrid", "bind") for r in runtimes.names()}


@pytest.mark.parametrize("mode, runtime", sorted(ALL, key=str), ids=[f"{m}-{r}" for m, r in sorted(ALL, key=str)])
def test_all_gpus(machine, mode, runtime):
    argv, env, notes = launch(machine, mode, runtime, "all")
    assert argv == ALL[(mode, runtime)].replace("$H", str(machine[0]))
    assert notes[-1] == ("gpu: each local rank sees one GPU: CUDA_VISIBLE_DEVICES = [0,1][local rank mod 2] "
                         "(nm-gpuvis; override with --env CUDA_VISIBLE_DEVICES=...)")
    assert "gpu: --gpus all: GPU 0, 1 (NVIDIA H100 80GB HBM3), driver 550.54.15" in notes


# -- every --gpus form: what changes against `all` (device list, device nodes) ----------------
# (form, runtime): (nm-gpuvis's list, the GPU device arguments): a count takes the first GPUs
# in bus order; an index or a UUID names one. Runtimes that show the whole host /dev keep host
# indices; podman's --device shows only the named node, where CUDA numbers from 0.

FORMS = {
    ("2", "bwrap"): ("0,1", "--dev-bind /dev/nvidia0 /dev/nvidia0 --dev-bind /dev/nvidia1 /dev/nvidia1"),
    ("1", "bwrap"): ("0", "--dev-bind /dev/nvidia0 /dev/nvidia0"),
    ("1,", "bwrap"): ("1", "--dev-bind /dev/nvidia1 /dev/nvidia1"),
    (UUID1, "bwrap"): ("1", "--dev-bind /dev/nvidia1 /dev/nvidia1"),
    (f"{UUID1},0", "bwrap"): ("1,0", "--dev-bind /dev/nvidia1 /dev/nvidia1 --dev-bind /dev/nvidia0 /dev/nvidia0"),
    ("2", "podman"): ("0,1", "--device /dev/nvidia0 --device /dev/nvidia1"),
    ("1", "podman"): ("0", "--device /dev/nvidia0"),
    ("1,", "podman"): ("0", "--device /dev/nvidia1"),
    (UUID1, "podman"): ("0", "--device /dev/nvidia1"),
    (f"{UUID1},0", "podman"): ("1,0", "--device /dev/nvidia1 --device /dev/nvidia0"),
    ("2", "charliecloud"): ("0,1", ""), ("1", "charliecloud"): ("0", ""), ("1,", "charliecloud"): ("1", ""),
    (UUID1, "charliecloud"): ("1", ""), (f"{UUID1},0", "charliecloud"): ("1,0", ""),
    ("2", "apptainer"): ("0,1", ""), ("1", "apptainer"): ("0", ""), ("1,", "apptainer"): ("1", ""),
    (UUID1, "apptainer"): ("1", ""), (f"{UUID1},0", "apptainer"): ("1,0", ""),
    ("2", None): ("0,1", ""), ("1", None): ("0", ""), ("1,", None): ("1", ""), (UUID1, None): ("1", ""),
    (f"{UUID1},0", None): ("1,0", ""),
}
ALL_DEVICES = {"bwrap": "--dev-bind /dev/nvidia0 /dev/nvidia0 --dev-bind /dev/nvidia1 /dev/nvidia1",
               "podman": "--device /dev/nvidia0 --device /dev/nvidia1"}


@pytest.mark.parametrize("form, runtime, mode", [(f, r, m) for (f, r) in sorted(FORMS, key=str)
                                                  for m in (("native",) if r is None else ("hybrid", "bind"))],
                         ids=lambda v: str(v)[:12])
def test_every_form(machine, form, runtime, mode):
    visible, devices = FORMS[(form, runtime)]
    want = ALL[(mode, runtime)].replace("$H", str(machine[0])).replace(f"{VIS} 0,1 ", f"{VIS} {visible} ")
    if runtime in ALL_DEVICES:
        want = want.replace(ALL_DEVICES[runtime], devices)
    argv, _, _ = launch(machine, mode, runtime, form)
    assert argv == want


def test_podman_with_a_cdi_spec_names_cdi_devices(machine, tmp_path):
    home, rootfs, _ = machine
    root = gpu_tree.make(tmp_path / "cdi", cdi=True)
    m = (home, rootfs, root)
    argv, _, notes = launch(m, "hybrid", "podman", "all")
    assert argv == (f"{RUN} {VIS} 0,1 -- {PODMAN} -e OMP_NUM_THREADS=1 --device nvidia.com/gpu=all "
                    f"localhost/nearmetal-nm-test:latest {OMPI}").replace("$H", str(home))
    assert "gpu: podman: CDI devices nvidia.com/gpu=all (spec /etc/cdi/nvidia.yaml)" in notes
    # one GPU of two: only its node is in the container, where CUDA calls it 0
    argv, _, _ = launch(m, "bind", "podman", UUID1)
    assert argv == (f"{RUN} {VIS} 0 -- {PODMAN} -v /stage/openmpi-k:/nm/host-mpi:ro "
                    "-e LD_LIBRARY_PATH=/nm/host-mpi/lib -e OMP_NUM_THREADS=1 --device nvidia.com/gpu=1 "
                    f"localhost/nearmetal-nm-test:latest {OMPI}").replace("$H", str(home))
    # both, in another order: all of them
    argv, _, _ = launch(m, "hybrid", "podman", f"{UUID1},0")
    assert f"{VIS} 1,0 -- " in argv and argv.count("--device nvidia.com/gpu=all") == 1
    assert not (home / "gpu").exists()  # nothing staged: the CDI spec binds the libraries


def test_apptainer_nvccli_when_configured(machine, monkeypatch):
    monkeypatch.setenv("NEARMETAL_APPTAINER_NVCCLI", "1")
    argv, _, _ = launch(machine, "hybrid", "apptainer", "all", which=gpu_tree.which_of("nvidia-container-cli"))
    assert " --bind /dev/shm --nv --nvccli $R " in argv
    with pytest.raises(NearmetalError, match="nvidia-container-cli is not installed"):
        launch(machine, "hybrid", "apptainer", "all")


def test_apptainer_nv_given_by_the_user_is_kept(machine):
    argv, _, notes = launch(machine, "hybrid", "apptainer", "all", runtime_args=["--nv"])
    assert argv.count("--nv") == 1 and " --bind /dev/shm --nv $R " in argv


def test_apptainer_cleanenv_still_gets_the_device(machine, monkeypatch):
    import nearmetal.runtimes._envfwd as envfwd

    monkeypatch.setattr(envfwd, "binary", lambda: "/h/tools/nm-envfwd")
    argv, _, _ = launch(machine, "hybrid", "apptainer", "1,", runtime_args=["--cleanenv"])
    # nm-gpuvis sets APPTAINERENV_CUDA_VISIBLE_DEVICES too, which --cleanenv lets in
    assert f" {VIS} 1 --also-prefix APPTAINERENV_ -- /h/tools/nm-envfwd --prefix APPTAINERENV_ " in argv


def test_cuda_visible_devices_from_env_overrides(machine):
    argv, _, notes = launch(machine, "hybrid", "bwrap", "all", env={"CUDA_VISIBLE_DEVICES": "1"})
    assert "nm-gpuvis" not in argv and "--setenv CUDA_VISIBLE_DEVICES 1" in argv
    assert "gpu: CUDA_VISIBLE_DEVICES=1 from --env: every rank sees what it names (no per-rank assignment)" in notes


def test_under_srun_each_rank_is_wrapped(machine):
    argv, _, _ = launch(machine, "native", None, "2", scheduler="slurm")
    assert argv == f"/usr/bin/srun --mpi=pmix --kill-on-bad-exit=1 -n 2 {VIS} 0,1 -- /usr/bin/prog"


def test_the_staged_directory_holds_placeholders(machine):
    home = machine[0]
    launch(machine, "hybrid", "bwrap", "all")
    staged, = (home / "gpu").glob("stage-*")
    lib = staged / "lib"
    assert sorted(p.name for p in lib.iterdir()) == sorted([n for _, n in LIBS] + ["libcuda.so", "libnvidia-cfg.so",
                                                                                  "libnvidia-ml.so", "libnvidia-nvvm.so",
                                                                                  "libnvidia-ptxjitcompiler.so"])
    assert all(p.stat().st_size == 0 for p in lib.iterdir() if not p.is_symlink())
    assert os.readlink(lib / "libcuda.so") == "libcuda.so.1"


# -- refusals, one line each -------------------------------------------------------------------

def one_line(excinfo):
    text = str(excinfo.value)
    assert "\n" not in text
    return text


@pytest.mark.parametrize("runtime", [None, "bwrap", "podman", "apptainer", "charliecloud"])
def test_no_gpu(machine, tmp_path, runtime):
    home, rootfs, _ = machine
    with pytest.raises(NearmetalError) as e:
        launch((home, rootfs, tmp_path / "empty"), "native" if runtime is None else "hybrid", runtime, "all")
    assert one_line(e) == ("--gpus all: this machine has no NVIDIA GPU (no driver in /proc/driver/nvidia, no NVML, "
                           "no nvidia-smi)")


def test_an_index_not_present(machine):
    with pytest.raises(NearmetalError) as e:
        launch(machine, "hybrid", "bwrap", "0,7")
    assert one_line(e) == "--gpus 0,7: no GPU 7 on this machine (GPUs: 0, 1)"


@pytest.mark.parametrize("runtime", ["bwrap", "charliecloud"])
def test_an_image_without_the_mount_point(machine, runtime):
    (machine[1] / "nm" / "host-gpu").rmdir()
    with pytest.raises(NearmetalError) as e:
        launch(machine, "hybrid", runtime, "all")
    assert one_line(e).startswith(f"--gpus with {runtime}: image 'nm-test' has no /nm/host-gpu mount point")


def test_podman_and_apptainer_need_no_mount_point(machine):
    (machine[1] / "nm" / "host-gpu").rmdir()
    for runtime in ("podman", "apptainer"):
        assert "nm-gpuvis" in launch(machine, "hybrid", runtime, "all")[0]


def test_an_image_with_an_older_libcuda_is_refused(machine):
    stale = machine[1] / "usr/lib/x86_64-linux-gnu/libcuda.so.470.82.01"
    gpu_tree.write(stale, b"\x7fELF old")
    with pytest.raises(NearmetalError) as e:
        launch(machine, "hybrid", "podman", "all")
    assert one_line(e) == ("--gpus refused: image 'nm-test' carries its own /usr/lib/x86_64-linux-gnu/libcuda.so.470.82.01 "
                           "(470.82.01), older than the host driver 550.54.15; a program that loads it fails: remove it "
                           "from the image (the host's driver libraries are bound in)")


def test_an_image_with_a_newer_libcuda_is_noted(machine):
    gpu_tree.write(machine[1] / "usr/local/cuda/compat/libcuda.so.560.28.03", b"\x7fELF compat")
    _, _, notes = launch(machine, "hybrid", "bwrap", "all")
    assert any("/usr/local/cuda/compat/libcuda.so.560.28.03 (560.28.03, newer than the host driver 550.54.15)" in n
               for n in notes)


def test_a_host_without_libcuda(machine):
    for f in (machine[2] / "usr/local/nvidia/lib64").glob("libcuda.so*"):
        f.unlink()
    with pytest.raises(NearmetalError) as e:
        launch(machine, "hybrid", "bwrap", "all")
    assert one_line(e).startswith("--gpus refused: no libcuda.so.1 on this host")
    assert "nm-gpuvis" in launch(machine, "native", None, "all")[0]  # natively the program finds its own


def test_missing_uvm_node(machine):
    (machine[2] / "dev" / "nvidia-uvm").unlink()
    with pytest.raises(NearmetalError) as e:
        launch(machine, "hybrid", "podman", "all")
    assert one_line(e).startswith("--gpus refused: /dev/nvidia-uvm missing")


def test_no_gpus_asked_changes_nothing(machine):
    argv, _, notes = launch(machine, "hybrid", "bwrap", None)
    assert "nvidia" not in argv and not any(n.startswith("gpu:") for n in notes)
