"""A machine with two NVIDIA GPUs, written into a directory: the kernel module's /proc files,
the device nodes (empty files standing at their paths), the driver's libraries in
/usr/local/nvidia/lib64 (a read-only driver mount's layout) and one in the ld.so cache, and
optionally a CDI spec. discovery.gpu reads it through its root prefix, as it reads /."""

import os
import struct
from pathlib import Path

DRIVER = "550.54.15"
UUID0 = "GPU-8c3f0e4a-1b2c-4d5e-8f90-0123456789ab"
UUID1 = "GPU-11111111-2222-3333-4444-555555555555"
VERSION_TEXT = (f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {DRIVER}  Tue Feb 13 21:34:53 UTC 2024\n"
                "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")
OPEN_VERSION_TEXT = (f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {DRIVER}  Release Build  "
                     "(dvs-builder@U16-I3-B03-4-3)  Tue Feb 13 21:21:03 UTC 2024\nGCC version:  gcc version 12.2.0\n")


def information(model, uuid, bus, minor):
    return (f"Model: \t\t {model}\nIRQ:   \t\t 146\nGPU UUID: \t {uuid}\nVideo BIOS: \t 96.00.74.00.0d\n"
            f"Bus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\nBus Location: \t {bus}\n"
            f"Device Minor: \t {minor}\nGPU Excluded:\t No\n")


def ld_cache(entries):
    """An ld.so.cache (new format) with (soname, path) entries, all libc6,x86-64."""
    strings = bytearray()
    offsets = []
    header = struct.Struct("<20sIIB3xI12x")
    entry = struct.Struct("<iIIIQ")
    base = header.size + entry.size * len(entries)
    for soname, path in entries:
        k = base + len(strings)
        strings += soname.encode() + b"\0"
        v = base + len(strings)
        strings += path.encode() + b"\0"
        offsets.append((k, v))
    out = bytearray(header.pack(b"glibc-ld.so.cache1.1", len(entries), len(strings), 0, 0))
    for k, v in offsets:
        out += entry.pack(0x0303, k, v, 0, 0)
    return bytes(out + strings)


def write(path, text=""):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def make(root, cdi=False, open_module=False, smi=False):
    """The fake machine under `root`; returns root."""
    root = Path(root)
    write(root / "proc/driver/nvidia/version", OPEN_VERSION_TEXT if open_module else VERSION_TEXT)
    # listed out of bus order: indices follow the bus order
    write(root / "proc/driver/nvidia/gpus/0000:3b:00.0/information",
          information("NVIDIA H100 80GB HBM3", UUID1, "0000:3b:00.0", 1))
    write(root / "proc/driver/nvidia/gpus/0000:18:00.0/information",
          information("NVIDIA H100 80GB HBM3", UUID0, "0000:18:00.0", 0))
    for node in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset", "null"):
        write(root / "dev" / node)
    lib64 = root / "usr/local/nvidia/lib64"
    for name, soname in (("libcuda.so", "libcuda.so.1"), ("libnvidia-ml.so", "libnvidia-ml.so.1"),
                         ("libnvidia-ptxjitcompiler.so", "libnvidia-ptxjitcompiler.so.1"),
                         ("libnvidia-nvvm.so", "libnvidia-nvvm.so.4"), ("libGLX_nvidia.so", "libGLX_nvidia.so.0")):
        write(lib64 / f"{name}.{DRIVER}", b"\x7fELF fake")
        os.symlink(f"{name}.{DRIVER}", lib64 / soname)
    write(lib64 / f"libnvidia-gpucomp.so.{DRIVER}", b"\x7fELF fake")  # its own soname: no .so.1 link
    gnu = root / "usr/lib/x86_64-linux-gnu"
    write(gnu / f"libnvidia-cfg.so.{DRIVER}", b"\x7fELF fake")
    os.symlink(f"libnvidia-cfg.so.{DRIVER}", gnu / "libnvidia-cfg.so.1")
    write(gnu / "libGL.so.1", b"\x7fELF glvnd")  # glvnd's, not the driver's: not listed
    write(root / "etc/ld.so.cache", ld_cache([("libnvidia-cfg.so.1", "/usr/lib/x86_64-linux-gnu/libnvidia-cfg.so.1"),
                                              ("libGL.so.1", "/usr/lib/x86_64-linux-gnu/libGL.so.1")]))
    if cdi:
        write(root / "etc/cdi/nvidia.yaml", 'cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: "0"\n'
                                            '- name: "1"\n- name: all\n')
    return root


def which_none(name):
    return None


def which_of(*names):
    return lambda name: f"/usr/bin/{name}" if name in names else None
