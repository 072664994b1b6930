"""The host's NVIDIA driver libraries and the container GPU mechanisms this machine offers.

The library names are those of Apptainer's etc/nvliblist.conf that the NVIDIA driver itself
installs (libcuda, libnvidia-*, ...; not glvnd's libGL.so or the ICD loader libOpenCL.so,
which belong to other packages), found through the host's ld.so.cache (elf.ldcache) and in
the driver folders container set-ups use (/usr/local/nvidia/lib64, where a read-only driver
mount usually lands). What a container needs for CUDA programs is the compute and utility
set, the one nvidia-container-cli binds by default ("compute,utility"): COMPUTE_LIBS.
"""

import os
import re

# Apptainer's nvliblist.conf libraries that come with the driver (nvliblist names them by
# their unversioned .so name; the files are lib*.so.DRIVER_VERSION with a .so.1 link).
NVLIBLIST = ("libcuda.so", "libcudadebugger.so", "libEGL_nvidia.so", "libGLESv1_CM_nvidia.so", "libGLESv2_nvidia.so",
             "libGLX_nvidia.so", "libnvcuvid.so", "libnvidia-allocator.so", "libnvidia-cbl.so", "libnvidia-cfg.so",
             "libnvidia-compiler.so", "libnvidia-eglcore.so", "libnvidia-encode.so",
             "libnvidia-fatbinaryloader.so", "libnvidia-fbc.so", "libnvidia-glcore.so", "libnvidia-glsi.so",
             "libnvidia-glvkspirv.so", "libnvidia-gpucomp.so", "libnvidia-ifr.so", "libnvidia-ml.so",
             "libnvidia-nvvm.so", "libnvidia-opencl.so", "libnvidia-opticalflow.so", "libnvidia-pkcs11.so",
             "libnvidia-pkcs11-openssl3.so", "libnvidia-ptxjitcompiler.so", "libnvidia-rtcore.so",
             "libnvidia-tls.so", "libnvoptix.so", "libvdpau_nvidia.so")
# What CUDA programs and nvidia-smi/NVML need (nvidia-container-cli's compute + utility).
COMPUTE_LIBS = ("libcuda.so", "libcudadebugger.so", "libnvidia-allocator.so", "libnvidia-cfg.so",
                "libnvidia-compiler.so", "libnvidia-fatbinaryloader.so", "libnvidia-gpucomp.so", "libnvidia-ml.so",
                "libnvidia-nvvm.so", "libnvidia-opencl.so", "libnvidia-pkcs11.so", "libnvidia-pkcs11-openssl3.so",
                "libnvidia-ptxjitcompiler.so")
DRIVER_DIRS = ("/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/usr/lib/x86_64-linux-gnu/nvidia/current",
               "/usr/lib64/nvidia", "/usr/lib/nvidia")
CDI_DIRS = ("/etc/cdi", "/var/run/cdi")
_VERSIONED = re.compile(r"^(lib[\w.+-]*?\.so)\.(\d+(?:\.\d+)*)$")


def _at(root, path):
    return os.path.join(root, path.lstrip("/"))


def split_name(filename):
    """("libcuda.so", "550.54.15") for libcuda.so.550.54.15; (name, None) when unversioned."""
    m = _VERSIONED.match(filename)
    return (m.group(1), m.group(2)) if m else (filename, None)


def _record(root, path):
    """{path (as found), file (the file it links to), version (the driver version the file
    carries in its name: libcuda.so.1 -> libcuda.so.550.54.15 -> "550.54.15")}; links are
    followed inside `root`."""
    from ..elf import LinkerView

    real = LinkerView(root).resolve_in_root(path)
    _, version = split_name(os.path.basename(real))
    return {"path": path, "file": real, "version": version if version and "." in version else None}


def driver_libraries(root="/"):
    """({soname: {path, file, version}}, [driver folders found]) for the nvliblist libraries on this
    host: ld.so.cache entries first (what a host program would load), then the driver folders."""
    from ..elf.ldcache import FLAGS_X86_64, read_ld_so_cache
    from ..errors import NearmetalError

    wanted = set(NVLIBLIST)
    found = {}
    try:
        entries = read_ld_so_cache(_at(root, "/etc/ld.so.cache"))
    except NearmetalError:
        entries = []
    for e in entries:
        if e.flags == FLAGS_X86_64 and split_name(e.soname)[0] in wanted and e.soname not in found:
            if os.path.exists(_at(root, e.path)):
                found[e.soname] = _record(root, e.path)
    dirs = []
    for d in DRIVER_DIRS:
        try:
            names = sorted(os.listdir(_at(root, d)))
        except OSError:
            continue
        dirs.append(d)
        by_base = {}
        for name in names:
            base, version = split_name(name)
            if base in wanted and version is not None:
                by_base.setdefault(base, []).append((version, name))
        for base, versions in by_base.items():
            # The soname: a lib*.so.1 link where the driver has one, else the versioned file
            # itself (libnvidia-gpucomp.so.550.54.15 is its own soname).
            links = [name for v, name in versions if "." not in v]
            for name in links or [name for v, name in versions]:
                if name not in found:
                    path = f"{d}/{name}"
                    found[name] = _record(root, path)
    return found, dirs


def compute_libraries(libraries):
    """The subset of driver_libraries()'s result a CUDA container needs, by soname."""
    return {s: v for s, v in libraries.items() if split_name(s)[0] in COMPUTE_LIBS}


def cdi_specs(root="/"):
    """CDI spec files that declare nvidia.com/gpu devices (podman --device nvidia.com/gpu=...)."""
    out = []
    for d in CDI_DIRS:
        try:
            names = sorted(os.listdir(_at(root, d)))
        except OSError:
            continue
        for name in names:
            if not name.endswith((".json", ".yaml", ".yml")):
                continue
            try:
                with open(_at(root, f"{d}/{name}"), errors="replace") as f:
                    text = f.read(1 << 20)
            except OSError:
                continue
            if re.search(r"""kind["']?\s*:\s*["']?nvidia\.com/gpu""", text):
                out.append(f"{d}/{name}")
    return out


def mechanisms(root="/", which=None):
    """{name: what makes it available, or None}: Apptainer --nv (needs apptainer),
    --nvccli and podman's legacy hook (need nvidia-container-cli), podman CDI (a spec)."""
    import shutil

    which = which or shutil.which
    cli = which("nvidia-container-cli")
    apptainer = which("apptainer") or which("singularity")
    specs = cdi_specs(root)
    return {"apptainer --nv": apptainer, "apptainer --nvccli": apptainer if apptainer and cli else None,
            "nvidia-container-cli": cli, "podman cdi": specs[0] if specs else None,
            "bind (devices + libraries)": "nearmetal"}
