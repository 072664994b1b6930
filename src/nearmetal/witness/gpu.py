"""The GPU witness: which libcuda, driver and GPU each rank really used (nm-gpu-witness.c).

`run --witness --gpus ...` preloads nm-gpu-witness.so beside the MPI witness; at exit each
rank that mapped a libcuda (or is an MPI program) writes one `nm-gpu-witness: ...` line.
parse() reads those lines; from_maps() and the driver parser read what the C side reads, for
programs checked from Python; verdict() says whether a rank's libcuda is the host driver's
own file (same inode: bound, not copied) or another one (the image's).
"""

import os

from . import parse_lines, preloaded

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nm-gpu-witness.c")
PREFIX = "nm-gpu-witness: "
FIELDS = ("rank", "pid", "program", "libcuda", "inode", "libcuda_version", "driver", "gpu", "context", "visible")


def library():
    """The path, under /tmp, of a built nm-gpu-witness.so no older than its source."""
    from ..supervise import preloaded_library

    return preloaded_library("nm-gpu-witness", SOURCE)


def rank_env(env=None):
    """The ranks' environment with the GPU witness preloaded (after any LD_PRELOAD of theirs)."""
    return preloaded(env, library())


def parse(stderr):
    """[{rank, pid, program, libcuda, inode, libcuda_version, driver, gpu, context, visible}]
    from the ranks' GPU witness lines (sorted by rank); "none" where there was nothing."""
    return parse_lines(stderr, PREFIX, FIELDS)


def from_maps(text):
    """(path, inode) of the first libcuda.so* mapping in /proc/PID/maps text, or None."""
    for line in (text or "").splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and os.path.basename(parts[5]).startswith("libcuda.so"):
            try:
                return parts[5], int(parts[4])
            except ValueError:
                continue
    return None


def libcuda_version(real_name):
    """"550.54.15" from libcuda.so.550.54.15 (the real file's name); None for libcuda.so.1."""
    from ..discovery.gpu_libs import split_name

    base, version = split_name(os.path.basename(real_name))
    return version if base == "libcuda.so" and version and "." in version else None


def record(maps_text, driver_text, gpu=None):
    """The witness record for a process from its maps and the driver's version text (what the
    C witness writes, for a process read from Python); gpu: its PCI bus id, None: "none"."""
    from ..discovery.gpu import parse_driver_version

    found = from_maps(maps_text)
    path, inode = found if found else ("none", 0)
    return {"libcuda": path, "inode": str(inode), "libcuda_version": libcuda_version(path) or "none",
            "driver": parse_driver_version(driver_text) or "none", "gpu": gpu or "none"}


def verdict(rec, host_inodes):
    """One line on a witness record: the host driver's libcuda (its inode is one of
    `host_inodes`, the host's libcuda files), another libcuda (the image's), or none; and
    whether libcuda and the kernel module agree."""
    if rec.get("libcuda", "none") == "none":
        return "no libcuda loaded" + ("" if rec.get("gpu", "none").startswith("none") else f"; gpu {rec['gpu']}")
    try:
        inode = int(rec.get("inode", "0"))
    except ValueError:
        inode = 0
    whose = "the host driver's libcuda (same inode)" if inode in host_inodes else \
        f"another libcuda than the host's ({rec['libcuda']}, inode {inode})"
    match = rec.get("libcuda_version") == rec.get("driver")
    agree = "matches the kernel module" if match else \
        f"libcuda {rec.get('libcuda_version')} vs kernel module {rec.get('driver')}"
    gpu = rec.get("gpu", "none")
    used = "no GPU" if gpu.startswith("none") else f"GPU {gpu}"
    return f"{whose}, {agree}, {used}"
