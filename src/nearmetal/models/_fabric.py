"""The fabric in bind mode: what the host's MPI needs of the host's network hardware.

The host MPI's transport plugins (UCX's modules, libfabric's providers) are staged with its
libraries and their loaders pointed at them (the family profile's plugin_env: UCX_MODULE_DIR,
FI_PROVIDER_PATH). What staging cannot carry is the hardware itself: the verbs devices under
/dev/infiniband (InfiniBand, RoCE, Omni-Path). When the host has them, every rank's
container gets them: runtimes that show the host's /dev (Charliecloud, bubblewrap,
Apptainer without --contain) need nothing more; the others are given each device
(RankSpec.devices: Podman's --device, Apptainer's --bind under --contain).

This machine has no high-speed fabric: the plan is tested with an injected device list
(tests/test_unit_compose.py), and says so at run time through its notes.
"""

import os

DEVICE_DIRS = ("/dev/infiniband",)


def devices(dirs=DEVICE_DIRS, listdir=os.listdir, is_dir=os.path.isdir):
    """The fabric's device files on this host (sorted), [] without a fabric."""
    out = []
    for d in dirs:
        if not is_dir(d):
            continue
        try:
            out += [os.path.join(d, name) for name in sorted(listdir(d))]
        except OSError:
            continue
    return out


def notes(found):
    if not found:
        return []
    shown = ", ".join(found[:4]) + (f" and {len(found) - 4} more" if len(found) > 4 else "")
    return [f"bind: the host's fabric devices go to every rank ({shown})"]
