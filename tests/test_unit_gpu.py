"""GPU discovery and the --gpus switch's spelling, on a fake machine (tests/gpu_tree.py): the
kernel module's /proc files, the device nodes, the driver libraries in a driver folder and
in the ld.so cache, CDI specs; nvidia-smi's output as it prints it."""

import json
from pathlib import Path

import pytest

import gpu_tree
from nearmetal.discovery import gpu as discovery
from nearmetal.discovery.gpu_libs import compute_libraries, driver_libraries, mechanisms, split_name
from nearmetal.errors import NearmetalError
from nearmetal.gpu.select import choose, parse

pytestmark = pytest.mark.unit


def found_on(root, which=gpu_tree.which_none, run=None):
    return discovery.discover(root=str(root), which=which, run=run or (lambda argv: ""), load=None)


# -- the kernel module's words -----------------------------------------------------------------

def test_driver_version_of_both_kernel_modules():
    assert discovery.parse_driver_version(gpu_tree.VERSION_TEXT) == "550.54.15"
    assert discovery.parse_driver_version(gpu_tree.OPEN_VERSION_TEXT) == "550.54.15"
    assert discovery.parse_driver_version("garbage") is None
    assert discovery.parse_driver_version(None) is None


def test_information_file():
    info = discovery.parse_information(gpu_tree.information("NVIDIA A100-SXM4-40GB", gpu_tree.UUID0, "0000:07:00.0", 3))
    assert info == {"model": "NVIDIA A100-SXM4-40GB", "uuid": gpu_tree.UUID0, "pci_bus_id": "0000:07:00.0", "minor": 3}


def test_bus_ids_are_spelled_one_way():
    assert discovery.bus_id("00000000:3B:00.0") == "0000:3b:00.0"
    assert discovery.bus_id("0000:18:00.0") == "0000:18:00.0"


def test_gpus_from_proc_in_bus_order(tmp_path):
    found = found_on(gpu_tree.make(tmp_path))
    assert found["driver"] == "550.54.15"
    assert [(g["index"], g["pci_bus_id"], g["uuid"], g["minor"]) for g in found["gpus"]] == [
        (0, "0000:18:00.0", gpu_tree.UUID0, 0), (1, "0000:3b:00.0", gpu_tree.UUID1, 1)]
    assert found["sources"] == ["/proc/driver/nvidia"]
    assert found["gpus"][0]["memory_mib"] is None  # /proc does not say; NVML or nvidia-smi would
    assert discovery.summary_line(found) == "GPUs: 2 (NVIDIA H100 80GB HBM3), driver 550.54.15, CUDA ?"


def test_device_nodes(tmp_path):
    found = found_on(gpu_tree.make(tmp_path))
    assert found["devices"] == ["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm",
                                "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"]


def test_nvidia_smi_fills_what_proc_lacks(tmp_path):
    smi_out = ("0, NVIDIA H100 80GB HBM3, " + gpu_tree.UUID0 + ", 00000000:18:00.0, 81559, 550.54.15\n"
               "1, NVIDIA H100 80GB HBM3, " + gpu_tree.UUID1 + ", 00000000:3B:00.0, 81559, 550.54.15\n")
    asked = []

    def run(argv):
        asked.append(argv)
        return smi_out

    found = found_on(gpu_tree.make(tmp_path), which=gpu_tree.which_of("nvidia-smi"), run=run)
    assert asked == [["/usr/bin/nvidia-smi", "--query-gpu=index,name,uuid,pci.bus_id,memory.total,driver_version",
                      "--format=csv,noheader,nounits"]]
    assert [g["memory_mib"] for g in found["gpus"]] == [81559, 81559]
    assert found["sources"] == ["/proc/driver/nvidia", "nvidia-smi"]


def test_nvidia_smi_alone_where_proc_is_absent(tmp_path):
    # gVisor's nvproxy, for one, shows no /proc/driver/nvidia
    found = found_on(tmp_path, which=gpu_tree.which_of("nvidia-smi"),
                     run=lambda argv: "0, Tesla T4, GPU-aa, 00000000:00:1E.0, 15360, 535.104.05\nNo devices\n")
    assert [(g["index"], g["model"], g["pci_bus_id"], g["memory_mib"]) for g in found["gpus"]] == [
        (0, "Tesla T4", "0000:00:1e.0", 15360)]
    assert found["driver"] == "535.104.05"


def test_no_gpu_is_one_line(tmp_path):
    found = found_on(tmp_path)
    assert found["gpus"] == [] and found["devices"] == [] and found["driver"] is None
    assert discovery.summary_line(found).startswith("GPUs: none")
    assert "\n" not in discovery.summary_line(found)


def test_nvml_that_cannot_load_is_skipped(tmp_path):
    def load(name):
        raise OSError(f"{name}: cannot open shared object file")

    found = discovery.discover(root=str(gpu_tree.make(tmp_path)), which=gpu_tree.which_none, run=lambda a: "",
                               load=load)
    assert found["sources"] == ["/proc/driver/nvidia"] and len(found["gpus"]) == 2


def test_cuda_version_text():
    assert discovery.cuda_version_text(12040) == "12.4"
    assert discovery.cuda_version_text(11080) == "11.8"
    assert discovery.cuda_version_text(0) is None


# -- the driver libraries ----------------------------------------------------------------------

def test_driver_libraries_from_the_driver_folder_and_the_cache(tmp_path):
    root = gpu_tree.make(tmp_path)
    libs, dirs = driver_libraries(str(root))
    assert dirs == ["/usr/local/nvidia/lib64"]
    assert sorted(libs) == ["libGLX_nvidia.so.0", "libcuda.so.1", "libnvidia-cfg.so.1", "libnvidia-gpucomp.so.550.54.15",
                            "libnvidia-ml.so.1", "libnvidia-nvvm.so.4", "libnvidia-ptxjitcompiler.so.1"]
    assert libs["libcuda.so.1"] == {"path": "/usr/local/nvidia/lib64/libcuda.so.1",
                                    "file": "/usr/local/nvidia/lib64/libcuda.so.550.54.15", "version": "550.54.15"}
    assert libs["libnvidia-cfg.so.1"]["path"] == "/usr/lib/x86_64-linux-gnu/libnvidia-cfg.so.1"  # via ld.so.cache
    # what a CUDA container gets: compute + utility, not the GL ones
    assert sorted(compute_libraries(libs)) == ["libcuda.so.1", "libnvidia-cfg.so.1", "libnvidia-gpucomp.so.550.54.15",
                                               "libnvidia-ml.so.1", "libnvidia-nvvm.so.4",
                                               "libnvidia-ptxjitcompiler.so.1"]


def test_split_name():
    assert split_name("libcuda.so.550.54.15") == ("libcuda.so", "550.54.15")
    assert split_name("libcuda.so.1") == ("libcuda.so", "1")
    assert split_name("libcuda.so") == ("libcuda.so", None)


def test_mechanisms(tmp_path):
    root = gpu_tree.make(tmp_path, cdi=True)
    m = mechanisms(str(root), gpu_tree.which_of("apptainer"))
    assert m["apptainer --nv"] == "/usr/bin/apptainer"
    assert m["apptainer --nvccli"] is None and m["nvidia-container-cli"] is None
    assert m["podman cdi"] == "/etc/cdi/nvidia.yaml"
    m = mechanisms(str(gpu_tree.make(tmp_path / "b")), gpu_tree.which_of("apptainer", "nvidia-container-cli"))
    assert m["apptainer --nvccli"] == "/usr/bin/apptainer" and m["podman cdi"] is None


def test_doctor_record_matches_its_schema(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    from nearmetal.gpu.report import collect

    schema = json.loads((Path(discovery.__file__).parents[1] / "schemas/doctor.schema.json").read_text())
    gpu_schema = dict(schema["properties"]["gpu"])
    for found in (found_on(gpu_tree.make(tmp_path / "a", cdi=True)), found_on(tmp_path / "none")):
        jsonschema.validate(collect(found), gpu_schema)


def test_doctor_renders_a_table_or_one_line(tmp_path):
    from rich.console import Console

    from nearmetal.gpu.report import collect, render

    console = Console(record=True, width=160)
    render(collect(found_on(tmp_path / "none")), console)
    text = console.export_text().strip()
    assert len(text.splitlines()) == 1 and "none found" in text
    console = Console(record=True, width=160)
    render(collect(found_on(gpu_tree.make(tmp_path / "a"))), console)
    text = console.export_text()
    assert "0000:3b:00.0" in text and gpu_tree.UUID1 in text and "/dev/nvidia-uvm" in text


# -- --gpus: spelling, then what it names --------------------------------------------------------

@pytest.mark.parametrize("text, kind, count, items", [
    ("all", "all", None, ()), ("2", "count", 2, ()), ("1,", "list", None, (1,)), ("0,1", "list", None, (0, 1)),
    (gpu_tree.UUID1, "list", None, (gpu_tree.UUID1,)), (f"0,{gpu_tree.UUID1}", "list", None, (0, gpu_tree.UUID1))])
def test_parse(text, kind, count, items):
    spec = parse(text)
    assert (spec.kind, spec.count, spec.items) == (kind, count, items)


@pytest.mark.parametrize("text, says", [
    ("0", "a count must be at least 1 (to name GPU 0, write --gpus 0,)"), ("", "expected all, a count"),
    ("1,,2", "expected all, a count"), ("x", "'x' is neither a GPU index nor a GPU UUID"),
    ("1,1", "a GPU is named twice"), ("GPU-", "neither")])
def test_parse_refuses_in_one_line(text, says):
    with pytest.raises(NearmetalError, match=r".*") as e:
        parse(text)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_choose(tmp_path):
    gpus = found_on(gpu_tree.make(tmp_path))["gpus"]
    assert [g["index"] for g in choose("all", gpus)] == [0, 1]
    assert [g["index"] for g in choose("1", gpus)] == [0]
    assert [g["index"] for g in choose("1,", gpus)] == [1]
    assert [g["index"] for g in choose(f"{gpu_tree.UUID1},0", gpus)] == [1, 0]


@pytest.mark.parametrize("text, says", [
    ("3", "--gpus 3: this machine has 2 GPUs"), ("2,", "--gpus 2,: no GPU 2 on this machine (GPUs: 0, 1)"),
    ("GPU-00000000-dead", "no GPU GPU-00000000-dead"), (f"1,{gpu_tree.UUID1}", "named twice")])
def test_choose_refuses(tmp_path, text, says):
    gpus = found_on(gpu_tree.make(tmp_path))["gpus"]
    with pytest.raises(NearmetalError) as e:
        choose(text, gpus)
    assert says in str(e.value)


def test_choose_without_a_gpu():
    with pytest.raises(NearmetalError, match="this machine has no NVIDIA GPU"):
        choose("all", [])
