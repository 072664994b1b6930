"""A driver library bound into an image whose glibc is older than the library needs is refused
in one line naming the library, the GLIBC_x.y it needs and the image's glibc. Real ELF files:
the fake driver tree's libcuda and libnvidia-ml are the host's libgcc_s and libz under the
driver's names (their .gnu.version_r need GLIBC_2.35 and GLIBC_2.14), and the image's
libc.so.6 is the host's, as it is (2.36) or with its release banner saying 2.31."""

import os
import shutil

import pytest

from nearmetal.errors import NearmetalError
from test_unit_gpu_compose import launch, machine  # noqa: F401  (the fake two-GPU machine and its image)

pytestmark = pytest.mark.unit

GNU = "/usr/lib/x86_64-linux-gnu"
LIB64 = "usr/local/nvidia/lib64"


def real_driver(root):
    """libcuda and libnvidia-ml of the fake tree replaced by real ELF objects."""
    for name, host in (("libcuda.so.550.54.15", "libgcc_s.so.1"), ("libnvidia-ml.so.550.54.15", "libz.so.1")):
        os.unlink(root / LIB64 / name)
        shutil.copy(os.path.realpath(f"{GNU}/{host}"), root / LIB64 / name)


def image_glibc(rootfs, release):
    """The host's libc.so.6 in the image, its banner saying `release` (same length as 2.36)."""
    data = open(f"{GNU}/libc.so.6", "rb").read()
    assert b"release version 2.36." in data, "the host is Debian 12 (glibc 2.36)"
    (rootfs / "lib/x86_64-linux-gnu").mkdir(parents=True)
    (rootfs / "lib/x86_64-linux-gnu/libc.so.6").write_bytes(
        data.replace(b"release version 2.36.", f"release version {release}.".encode()))


@pytest.mark.parametrize("runtime", ["bwrap", "charliecloud", "podman", "apptainer"])
def test_a_driver_library_needing_a_newer_glibc_than_the_images_is_refused(machine, runtime):  # noqa: F811
    home, rootfs, root = machine
    real_driver(root)
    image_glibc(rootfs, "2.31")
    with pytest.raises(NearmetalError) as e:
        launch(machine, runtime=runtime)
    assert str(e.value) == ("--gpus refused: host driver library libcuda.so.1 (/usr/local/nvidia/lib64/"
                            "libcuda.so.550.54.15) needs GLIBC_2.35 but image 'nm-test' has glibc 2.31: use an image "
                            "whose glibc is at least 2.35 (the host's driver libraries are bound in)")


def test_an_image_with_glibc_new_enough_is_planned(machine):  # noqa: F811
    home, rootfs, root = machine
    real_driver(root)
    image_glibc(rootfs, "2.36")
    text, env, notes = launch(machine, runtime="bwrap")
    assert "/nm/host-gpu/lib/libcuda.so.1" in text


def test_an_image_without_glibc_is_refused_for_real_driver_libraries(machine):  # noqa: F811
    home, rootfs, root = machine
    real_driver(root)
    with pytest.raises(NearmetalError, match=r"needs GLIBC_2\.35 but image 'nm-test' has no glibc: "):
        launch(machine, runtime="charliecloud")


def test_native_runs_are_not_judged(machine):  # noqa: F811
    home, rootfs, root = machine
    real_driver(root)
    image_glibc(rootfs, "2.31")
    text, env, notes = launch(machine, mode="native")
    assert "nm-gpuvis" in text
