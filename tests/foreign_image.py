"""A user's image, as nearmetal did not build it: a plain debootstrap rootfs with the MPI
runtime libraries from Debian, two MPI programs in /usr/local/bin (built on the host against
the same Debian MPIs, as a user's would be), no /opt/nearmetal, no /nm mount points. Made
once per nearmetal home (tests reuse it) as a directory and as a SIF."""

import json
import os
import shutil
import subprocess
from pathlib import Path

PACKAGES = ["libopenmpi3", "libmpich12"]
VERSION = 1


def program_name(family):
    return f"user-mpi-info-{family}"


def build(log_name="foreign-image.log"):
    """(rootfs directory, SIF path); built once per nearmetal home."""
    from nearmetal.home import subdir
    from nearmetal.image import builder, chroot
    from nearmetal.image.chroot import BuildLog
    from nearmetal.image.progress import Reporter
    from nearmetal.kernels.build import host_bin
    from nearmetal.runtimes import get

    base = subdir("test-images") / f"foreign-v{VERSION}"
    rootfs, sif = base / "rootfs", base / "user-app.sif"
    if (base / "done.json").is_file():
        return rootfs, sif
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    log = BuildLog(base / log_name, truncate=True)
    report = Reporter("foreign", False)
    cache = builder._debootstrap_cached("bookworm", log, report, {})
    chroot.run(["cp", "-a", str(cache), str(rootfs)], log, "copy")
    builder._prepare(rootfs)
    with chroot.chroot_mounts(rootfs, log):
        chroot.in_chroot(rootfs, ["apt-get", "update"], log, "apt-get update")
        chroot.in_chroot(rootfs, ["apt-get", "install", "-y", "--no-install-recommends", *PACKAGES], log,
                         "apt-get install")
        chroot.in_chroot(rootfs, ["apt-get", "clean"], log, "apt-get clean")
    builder._finish(rootfs)
    for family in ("openmpi", "mpich"):
        shutil.copy2(os.path.join(host_bin(family), "nm-mpi-info"), rootfs / "usr/local/bin" / program_name(family))
    for leftover in ("nm", "opt/nearmetal"):
        shutil.rmtree(rootfs / leftover, ignore_errors=True)
    apptainer = get("apptainer")
    subprocess.run([apptainer.path(), "build", "--force", "--mksquashfs-args", "-comp lz4", str(sif), str(rootfs)],
                   check=True, capture_output=True, env={**os.environ, **apptainer.launch_env()})
    (base / "done.json").write_text(json.dumps({"packages": PACKAGES}))
    return Path(rootfs), Path(sif)
