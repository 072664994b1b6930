"""Image builder: real debootstrap builds (minutes on a cold cache; reused from the nearmetal home)."""

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile

from nearmetal import image
from nearmetal.errors import NearmetalError
from nearmetal.home import home
from nearmetal.image import chroot
from nearmetal.runtimes._podman_storage import podman_argv, podman_env

# The set-up installs debootstrap and podman and runs as root (as CI does): a missing
# piece is a broken set-up, so these tests fail rather than skip.


@pytest.fixture(scope="session")
def bookworm_image():
    """The default bookworm image with both MPIs (as a directory)."""
    return image.build(distro="bookworm", mpis=("openmpi", "mpich"), progress=False)


def _dynamic_tags(path):
    with open(path, "rb") as fh:
        for section in ELFFile(fh).iter_sections():
            if isinstance(section, DynamicSection):
                return {tag.entry.d_tag: tag for tag in section.iter_tags()}
    return {}


def _mounts():
    return Path("/proc/self/mountinfo").read_text()


# ------------------------------------------------------------------ bad input (no build)


@pytest.mark.parametrize("kwargs, words", [
    (dict(distro="buster"), "unknown distro 'buster'"),
    (dict(distro="bookworm", mpis=("mvapich",)), "unknown MPI 'mvapich'"),
    (dict(distro="bookworm", mpis=()), "no MPI"),
    (dict(distro="bookworm", fmt="docker"), "unknown image format 'docker'"),
    (dict(distro="bookworm", name="Bad Name/x"), "bad image name"),
])
def test_bad_input(kwargs, words):
    with pytest.raises(NearmetalError, match=words) as err:
        image.build(progress=False, **kwargs)
    assert "\n" not in str(err.value)


def test_resolve_missing_name():
    with pytest.raises(NearmetalError, match=r"no image 'nm-does-not-exist': build it with `nearmetal image build"):
        image.resolve("nm-does-not-exist")
    with pytest.raises(NearmetalError, match="no image"):
        image.resolve("/nonexistent/rootfs")


def test_default_name_and_host_distro():
    assert image.default_name("bookworm", ["openmpi", "mpich"]) == "nm-bookworm-mpich-openmpi"
    assert image.default_name("trixie", ("mpich",)) == "nm-trixie-mpich"
    assert image.host_distro() == "bookworm"


def test_podman_storage_flags(tmp_path, monkeypatch):
    monkeypatch.setenv("NEARMETAL_HOME", str(tmp_path))
    argv = podman_argv()
    assert argv == ["podman", "--root", str(tmp_path / "podman/root"), "--runroot", str(tmp_path / "podman/runroot"),
                    "--storage-driver", "overlay"]
    env = podman_env()
    conf = Path(env["CONTAINERS_CONF"])
    assert conf == tmp_path / "podman/containers.conf"
    text = conf.read_text()
    assert 'default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]' in text
    assert 'runtime = "runc"' in text


# ------------------------------------------------------------------ the default image


def test_image_json(bookworm_image):
    img = bookworm_image
    meta = json.loads((img.rootfs.parent / "image.json").read_text())
    assert meta == img.meta
    assert json.loads((img.rootfs / "opt/nearmetal/image.json").read_text())["digest"] == meta["digest"]
    assert meta["name"] == img.name == "nm-bookworm-mpich-openmpi"
    assert meta["distro"] == img.distro == "bookworm"
    assert meta["mpis"] == img.mpis == ["mpich", "openmpi"]
    assert len(meta["digest"]) == 64
    assert meta["glibc"] == "2.36"
    assert "dir" in meta["formats"]
    assert meta["built"].endswith("Z")
    libs = {"mpich": "libmpich.so.12", "openmpi": "libmpi.so.40"}
    for mpi in ("mpich", "openmpi"):
        info = meta["mpi"][mpi]
        assert info["family"] == mpi
        assert info["version"] and info["version"][0].isdigit()
        assert info["library"] == f"/usr/lib/x86_64-linux-gnu/{libs[mpi]}"
        assert (img.rootfs / info["library"].lstrip("/")).exists()
        assert info["library_ldcache"] in (info["library"], "/lib/x86_64-linux-gnu/" + libs[mpi])
        assert meta["kernels"][mpi] == img.kernel_bin(mpi) == f"/opt/nearmetal/{mpi}/bin"


def test_kernels_built(bookworm_image):
    img = bookworm_image
    for mpi in ("openmpi", "mpich"):
        bindir = img.rootfs / img.kernel_bin(mpi).lstrip("/")
        for prog in ("nm-mpi-info", "nm-mpi-info-rpath", "nm-pingpong"):
            assert os.access(bindir / prog, os.X_OK), bindir / prog
        rpath = _dynamic_tags(bindir / "nm-mpi-info-rpath")
        assert "DT_RPATH" in rpath and "DT_RUNPATH" not in rpath
        assert rpath["DT_RPATH"].rpath == img.meta["mpi"][mpi]["libdir"]
        assert "DT_RPATH" not in _dynamic_tags(bindir / "nm-mpi-info")
    with pytest.raises(NearmetalError):
        image.resolve(img.name).kernel_bin("mvapich")


def test_mount_points(bookworm_image):
    root = bookworm_image.rootfs
    assert (root / "nm/host-mpi").is_dir()
    assert (root / "nm/work").is_dir()
    assert (root / "tmp").stat().st_mode & 0o7777 == 0o1777
    assert (root / "etc/hosts").is_file()
    assert str(root) not in _mounts(), "build mounts left behind"


def test_second_build_is_noop(bookworm_image, capsys):
    t0 = time.monotonic()
    again = image.build(distro="bookworm", mpis=("mpich", "openmpi"), progress=False)
    assert time.monotonic() - t0 < 2
    assert again.meta["built"] == bookworm_image.meta["built"]
    assert "nothing to do" in capsys.readouterr().err


def test_resolve(bookworm_image):
    by_name = image.resolve(bookworm_image.name)
    assert by_name.rootfs == bookworm_image.rootfs
    assert by_name.meta["digest"] == bookworm_image.meta["digest"]
    by_path = image.resolve(str(bookworm_image.rootfs))
    assert by_path.name == bookworm_image.name and by_path.rootfs == bookworm_image.rootfs
    assert image.resolve(str(bookworm_image.rootfs.parent)).name == bookworm_image.name
    assert bookworm_image.name in [i.name for i in image.list_images()]


def test_resolve_bare_rootfs_copy(bookworm_image, tmp_path):
    """A rootfs directory outside the nearmetal home resolves through /opt/nearmetal/image.json."""
    bare = tmp_path / "myroot"
    (bare / "opt/nearmetal").mkdir(parents=True)
    shutil.copy(bookworm_image.rootfs / "opt/nearmetal/image.json", bare / "opt/nearmetal/image.json")
    img = image.resolve(str(bare))
    assert img.rootfs == bare and img.mpis == ["mpich", "openmpi"] and img.sqfs is None


def test_squashfs(bookworm_image):
    img = image.build(distro="bookworm", fmt="squashfs", progress=False)
    assert img.sqfs == img.rootfs.parent / f"{img.name}.sqfs"
    assert "squashfs" in img.meta["formats"]
    listing = subprocess.run(["unsquashfs", "-l", str(img.sqfs)], capture_output=True, text=True, check=True).stdout
    assert "squashfs-root/opt/nearmetal/mpich/bin/nm-mpi-info" in listing
    assert "squashfs-root/nm/host-mpi" in listing
    by_sqfs = image.resolve(str(img.sqfs))
    assert by_sqfs.sqfs == img.sqfs and by_sqfs.rootfs == img.rootfs and by_sqfs.name == img.name
    # Adding a format is not a rebuild; asking again is a no-op.
    assert img.meta["digest"] == bookworm_image.meta["digest"]
    t0 = time.monotonic()
    image.build(distro="bookworm", fmt="squashfs", progress=False)
    assert time.monotonic() - t0 < 2


def test_podman(bookworm_image):
    img = image.build(distro="bookworm", fmt="podman", progress=False)
    assert img.podman_ref == f"localhost/nearmetal-{img.name}:latest"
    assert "podman" in img.meta["formats"]
    env = {**os.environ, **podman_env()}
    out = subprocess.run([*podman_argv(), "run", "--rm", img.podman_ref, "/bin/true"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    out = subprocess.run([*podman_argv(), "run", "--rm", img.podman_ref, "test", "-x",
                          "/opt/nearmetal/mpich/bin/nm-mpi-info"], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert image.resolve(img.name).podman_ref == img.podman_ref


# ------------------------------------------------------------------ other distros


@pytest.mark.parametrize("distro, glibc", [("bullseye", "2.31"), ("trixie", "2.41")])
def test_other_distros(distro, glibc, bookworm_image):
    img = image.build(distro=distro, mpis=("mpich",), progress=False)
    assert img.name == f"nm-{distro}-mpich" and img.mpis == ["mpich"]
    assert img.meta["glibc"] == glibc
    version = tuple(map(int, img.meta["glibc"].split(".")))
    bookworm = tuple(map(int, bookworm_image.meta["glibc"].split(".")))
    assert version < bookworm if distro == "bullseye" else version > bookworm
    assert (img.rootfs / "opt/nearmetal/mpich/bin/nm-mpi-info").is_file()
    assert not (img.rootfs / "opt/nearmetal/openmpi").exists()
    assert img.meta["mpi"]["mpich"]["library"] == "/usr/lib/x86_64-linux-gnu/libmpich.so.12"
    with pytest.raises(NearmetalError, match="has no openmpi"):
        img.kernel_bin("openmpi")


# ------------------------------------------------------------------ failures leave nothing behind


def test_failed_debootstrap(tmp_path, monkeypatch):
    monkeypatch.setenv("NEARMETAL_HOME", str(tmp_path))
    monkeypatch.setenv("NEARMETAL_MIRROR", "http://127.0.0.1:9/debian")
    with pytest.raises(NearmetalError, match=r"^debootstrap bookworm failed: .*\(log: .*nm-bookworm-mpich\.build\.log\)$"):
        image.build(distro="bookworm", mpis=("mpich",), progress=False)
    assert not (tmp_path / "images/nm-bookworm-mpich").exists()
    assert not list((tmp_path / "images").glob(".nm-bookworm-mpich.build-*"))
    assert not list((tmp_path / "cache/debootstrap").glob(".bookworm.tmp-*"))
    assert (tmp_path / "images/nm-bookworm-mpich.build.log").is_file()


def test_interrupted_build_unmounts_and_cleans(bookworm_image, tmp_path, monkeypatch):
    """Ctrl-C during apt-get install: nothing mounted on the host, no half image left."""
    cache = home() / "cache/debootstrap/bookworm"
    monkeypatch.setenv("NEARMETAL_HOME", str(tmp_path))
    (tmp_path / "cache/debootstrap").mkdir(parents=True)
    subprocess.run(["cp", "-a", str(cache), str(tmp_path / "cache/debootstrap/bookworm")], check=True)
    real_chroot = chroot.in_chroot

    def interrupting_chroot(rootfs, argv, log, what):
        if argv[:2] == ["apt-get", "install"]:
            # chroot commands mount /proc and /dev in a namespace of their own (nm-supervise
            # --chroot): never in nearmetal's, so nothing is left to unmount however it ends
            assert f"{rootfs}/dev " not in _mounts() and f"{rootfs}/proc " not in _mounts()
            raise KeyboardInterrupt
        return real_chroot(rootfs, argv, log, what)

    monkeypatch.setattr(chroot, "in_chroot", interrupting_chroot)
    with pytest.raises(KeyboardInterrupt):
        image.build(distro="bookworm", mpis=("mpich",), progress=False)
    assert str(tmp_path) not in _mounts()
    assert not (tmp_path / "images/nm-bookworm-mpich").exists()
    assert not list((tmp_path / "images").glob(".nm-bookworm-mpich.*-*"))
    assert os.path.exists("/dev/null") and os.path.exists("/dev/zero")


# -- --packages: the user's application from Debian, in an image of its own ------------------

def test_extra_packages_are_installed_recorded_and_kept(tmp_path):
    from conftest import nearmetal

    out = nearmetal("image", "build", "--mpi", "mpich", "--name", "nm-test-pkgs", "--packages", "hello", timeout=900)
    assert out.returncode == 0, out.stderr
    built = image.resolve("nm-test-pkgs")
    assert list(built.meta["extra_packages"]) == ["hello"] and built.meta["extra_packages"]["hello"]
    assert "hello" in built.meta["packages"]
    run = nearmetal("run", "--mode", "hybrid", "--mpi", "mpich", "--image", "nm-test-pkgs", "-n", "1", "--", "hello")
    assert run.returncode == 0 and run.stdout.strip() == "Hello, world!", run.stderr
    # built again without --packages (e.g. to add a format): the same image, not a rebuild
    again = nearmetal("image", "build", "--mpi", "mpich", "--name", "nm-test-pkgs", "--format", "squashfs",
                      timeout=900)
    assert again.returncode == 0, again.stderr
    after = image.resolve("nm-test-pkgs")
    assert after.meta["digest"] == built.meta["digest"] and after.meta["built"] == built.meta["built"]
    assert after.sqfs is not None
    listing = [line.split("\t") for line in nearmetal("image", "list", check=True).stdout.splitlines()]
    assert ["nm-test-pkgs", "bookworm", "mpich", "dir,squashfs", "hello"] == [r for r in listing
                                                                              if r[0] == "nm-test-pkgs"][0][:5]
    # a package Debian does not have: apt's own word as the one error line (after the build's
    # progress lines), no traceback, and no image left behind
    bad = nearmetal("image", "build", "--mpi", "mpich", "--name", "nm-test-nopkg", "--packages", "no-such-package-nm",
                    timeout=900)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    last = bad.stderr.strip().splitlines()[-1]
    assert last.startswith("nearmetal image build: error: apt-get install failed") and "no-such-package-nm" in last
    assert not (image.images_dir() / "nm-test-nopkg").exists()
