"""GPU discovery: the NVIDIA GPUs of this machine, their driver, and the device nodes.

Sources, in this order, each filling what the one before could not say:
1. /proc/driver/nvidia (version, gpus/*/information): read without starting anything or
   loading a library, exact (the kernel module's own words), present whenever the module
   is loaded; it has the model, UUID, PCI bus id and device minor but not the memory.
2. NVML (libnvidia-ml.so.1) through ctypes: in-process, no child; the memory, the driver
   version and the CUDA driver API version it supports. Absent under some sandboxes.
3. `nvidia-smi --query-gpu=... --format=csv,noheader,nounits`: a child process (~50 ms),
   asked only when NVML could not be loaded.

Everything is read under a root prefix (`root`) and the program finder and runner are
injected (`which`, `run`), so the unit tests run on a fake /proc, /dev and driver tree.
"""

import os
import re
import shutil
import subprocess

DEVICE_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
SMI_FIELDS = ("index", "name", "uuid", "pci.bus_id", "memory.total", "driver_version")
_KMOD = re.compile(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)")


def _at(root, path):
    return os.path.join(root, path.lstrip("/"))


def _read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read(65536)
    except OSError:
        return None


def bus_id(text):
    """A PCI bus id in one spelling (domain in 4 hex digits, lowercase): nvidia-smi writes
    00000000:18:00.0, the kernel and CUDA 0000:18:00.0."""
    m = re.fullmatch(r"\s*([0-9a-fA-F]+):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])\s*", text or "")
    if not m:
        return (text or "").strip().lower()
    return f"{int(m.group(1), 16):04x}:{m.group(2)}:{m.group(3)}.{m.group(4)}".lower()


def parse_driver_version(text):
    """The driver version in /proc/driver/nvidia/version ("NVRM version: NVIDIA UNIX x86_64
    Kernel Module  550.54.15 ..." or the open module's "... Open Kernel Module for x86_64
    550.54.15 ..."), or None."""
    m = _KMOD.search(text or "")
    return m.group(1) if m else None


def parse_information(text):
    """{model, uuid, pci_bus_id, minor} of a /proc/driver/nvidia/gpus/*/information file."""
    fields = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    out = {"model": fields.get("Model"), "uuid": fields.get("GPU UUID"),
           "pci_bus_id": bus_id(fields["Bus Location"]) if fields.get("Bus Location") else None}
    try:
        out["minor"] = int(fields["Device Minor"])
    except (KeyError, ValueError):
        out["minor"] = None
    return out


def from_proc(root="/"):
    """(driver version or None, [gpu]) from /proc/driver/nvidia; indices in PCI bus order,
    the order nvidia-smi and CUDA_DEVICE_ORDER=PCI_BUS_ID number them."""
    version = parse_driver_version(_read(_at(root, "/proc/driver/nvidia/version")))
    gpus_dir = _at(root, "/proc/driver/nvidia/gpus")
    try:
        entries = sorted(os.listdir(gpus_dir))
    except OSError:
        entries = []
    gpus = []
    for entry in entries:
        info = parse_information(_read(os.path.join(gpus_dir, entry, "information")))
        info["pci_bus_id"] = info["pci_bus_id"] or bus_id(entry)
        gpus.append(info)
    gpus.sort(key=lambda g: g["pci_bus_id"])
    for i, g in enumerate(gpus):
        g["index"], g["memory_mib"], g["source"] = i, None, "proc"
    return version, gpus


def parse_smi(text):
    """[gpu] from `nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,memory.total,driver_version
    --format=csv,noheader,nounits`; (gpus, driver version)."""
    gpus, version = [], None
    for line in (text or "").splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(SMI_FIELDS) or not cells[0].isdigit():
            continue
        try:
            memory = int(float(cells[4]))
        except ValueError:
            memory = None
        gpus.append({"index": int(cells[0]), "model": cells[1], "uuid": cells[2], "pci_bus_id": bus_id(cells[3]),
                     "memory_mib": memory, "minor": None, "source": "nvidia-smi"})
        version = version or cells[5]
    return gpus, version


def cuda_version_text(number):
    """12040 (cuDriverGetVersion, nvmlSystemGetCudaDriverVersion) -> "12.4"."""
    return f"{number // 1000}.{(number % 1000) // 10}" if number else None


def from_nvml(load):
    """(gpus, driver version, CUDA version) through NVML, or None when it cannot be used.
    load(name) -> a ctypes library (ctypes.CDLL), raising OSError when absent."""
    import ctypes

    try:
        nvml = load("libnvidia-ml.so.1")
    except OSError:
        return None
    try:
        if nvml.nvmlInit_v2() != 0:
            return None
    except AttributeError:
        return None
    try:
        buf = ctypes.create_string_buffer(96)
        version = buf.value.decode() if nvml.nvmlSystemGetDriverVersion(buf, 96) == 0 else None
        cuda = ctypes.c_int(0)
        cuda_text = cuda_version_text(cuda.value) if nvml.nvmlSystemGetCudaDriverVersion_v2(ctypes.byref(cuda)) == 0 \
            else None
        count = ctypes.c_uint(0)
        if nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
            return [], version, cuda_text
        gpus = []
        for i in range(count.value):
            handle = ctypes.c_void_p()
            if nvml.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(handle)) != 0:
                continue
            name, uuid = ctypes.create_string_buffer(96), ctypes.create_string_buffer(96)
            nvml.nvmlDeviceGetName(handle, name, 96)
            nvml.nvmlDeviceGetUUID(handle, uuid, 96)
            mem = (ctypes.c_ulonglong * 3)()  # nvmlMemory_t: total, free, used
            memory = mem[0] // (1 << 20) if nvml.nvmlDeviceGetMemoryInfo(handle, mem) == 0 else None
            pci = ctypes.create_string_buffer(128)  # nvmlPciInfo_t starts with busIdLegacy[16], then domain...
            bus = None
            if nvml.nvmlDeviceGetPciInfo_v3(handle, pci) == 0:
                bus = bus_id(pci.raw[:16].split(b"\0")[0].decode(errors="replace"))
            minor = ctypes.c_uint(0)
            gpus.append({"index": i, "model": name.value.decode(errors="replace"), "uuid": uuid.value.decode(),
                         "pci_bus_id": bus, "memory_mib": memory, "source": "nvml",
                         "minor": minor.value if nvml.nvmlDeviceGetMinorNumber(handle, ctypes.byref(minor)) == 0
                         else None})
        return gpus, version, cuda_text
    except (AttributeError, OSError, ValueError):
        return None
    finally:
        try:
            nvml.nvmlShutdown()
        except AttributeError:
            pass


def device_nodes(root="/"):
    """The NVIDIA device nodes present: /dev/nvidiaN (sorted by N), then the control, UVM
    and modeset nodes; paths as the host names them."""
    dev = _at(root, "/dev")
    try:
        names = os.listdir(dev)
    except OSError:
        names = []
    numbered = sorted((n for n in names if re.fullmatch(r"nvidia\d+", n)), key=lambda n: int(n[6:]))
    return [f"/dev/{n}" for n in numbered] + [f"/dev/{n}" for n in DEVICE_NODES if n in names]


def _merge(base, extra):
    """The /proc records completed by another source's (matched on the PCI bus id)."""
    if not base:
        return extra
    by_bus = {g["pci_bus_id"]: g for g in extra}
    for g in base:
        other = by_bus.get(g["pci_bus_id"])
        if other:
            for key in ("model", "uuid", "memory_mib", "minor"):
                if g.get(key) is None:
                    g[key] = other.get(key)
    return base


def _smi(which, run):
    exe = which("nvidia-smi")
    if not exe:
        return None
    try:
        out = run([exe, f"--query-gpu={','.join(SMI_FIELDS)}", "--format=csv,noheader,nounits"])
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_smi(out)


def _run(argv):
    return subprocess.run(argv, capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL).stdout


def _load(name):
    """ctypes.CDLL of a driver library: as the loader finds it, else from a driver folder
    (/usr/local/nvidia/lib64 is often on no search path of the host's own)."""
    import ctypes

    from .gpu_libs import DRIVER_DIRS

    try:
        return ctypes.CDLL(name)
    except OSError as first:
        for d in DRIVER_DIRS:
            if os.path.exists(os.path.join(d, name)):
                return ctypes.CDLL(os.path.join(d, name))
        raise first


def discover(root="/", which=shutil.which, run=_run, load=_load):
    """What this machine has: {gpus, driver, cuda, devices, libraries, library_dirs, mechanisms,
    sources, root (where the files were read: paths in the record are under it)}; `gpus` empty when there is none. load=None: NVML is not asked (tests)."""
    from .gpu_libs import driver_libraries, mechanisms

    version, gpus = from_proc(root)
    sources = ["/proc/driver/nvidia"] if version or gpus else []
    cuda = None
    nvml = from_nvml(load) if load is not None else None
    if nvml is not None:
        n_gpus, n_version, cuda = nvml
        gpus, version = _merge(gpus, n_gpus), version or n_version
        sources.append("nvml")
    else:
        smi = _smi(which, run)
        if smi is not None:
            s_gpus, s_version = smi
            gpus, version = _merge(gpus, s_gpus), version or s_version
            sources.append("nvidia-smi")
    libraries, dirs = driver_libraries(root)
    return {"gpus": gpus, "driver": version, "cuda": cuda, "devices": device_nodes(root),
            "libraries": libraries, "library_dirs": dirs, "mechanisms": mechanisms(root, which),
            "sources": sources, "root": root}


def summary_line(found):
    """One line: what GPUs this machine has, or that it has none."""
    if not found["gpus"]:
        return "GPUs: none (no NVIDIA driver in /proc/driver/nvidia, no NVML, no nvidia-smi)"
    models = sorted({g["model"] or "?" for g in found["gpus"]})
    return (f"GPUs: {len(found['gpus'])} ({', '.join(models)}), driver {found['driver'] or '?'}, "
            f"CUDA {found['cuda'] or '?'}")
