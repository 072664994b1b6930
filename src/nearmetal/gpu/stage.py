"""The host's driver libraries for a container: a staged directory of placeholders, each
library bound over its placeholder, and the image's own libcuda checked against the driver.

Why placeholders and binds, not copies: a bind shows the host's very file (same inode, what
the GPU witness checks), costs no copy of ~300 MB of driver, and works when the driver folder
is a read-only mount on another file system (where bind mode's hard links cannot go). The
staged directory (under the nearmetal home, keyed by the libraries' names) holds one empty
file per soname plus the unversioned development names (libcuda.so -> libcuda.so.1) that
some programs dlopen; it is mounted read-only at MOUNT_POINT, and every library is bound
read-only over its placeholder in LIBDIR, which goes first on LD_LIBRARY_PATH.
"""

import hashlib
import json
import os

from ..errors import NearmetalError

MOUNT_POINT = "/nm/host-gpu"
LIBDIR = f"{MOUNT_POINT}/lib"
STAGE_VERSION = 1
# Directories a CUDA image keeps a libcuda in (besides its ld.so.cache): the CUDA forward
# compatibility package, the distributions' library directories.
IMAGE_LIBCUDA_DIRS = ("/usr/local/cuda/compat", "/usr/local/cuda/compat/lib", "/usr/lib/x86_64-linux-gnu",
                      "/usr/lib64", "/usr/lib", "/lib/x86_64-linux-gnu", "/usr/local/nvidia/lib64")


def _dev_name(soname):
    """libcuda.so.1 -> libcuda.so (the name a program built against the toolkit's stub dlopens)."""
    from ..discovery.gpu_libs import split_name

    base, version = split_name(soname)
    return base if version and "." not in version else None


def stage(libraries, home_dir=None):
    """The staged placeholder directory for these libraries ({soname: {path, version}}),
    built once per set of names."""
    from ..home import subdir

    names = sorted(libraries)
    key = hashlib.sha256(json.dumps([STAGE_VERSION, names]).encode()).hexdigest()[:16]
    root = (home_dir or subdir("gpu")) / f"stage-{key}"
    if (root / "manifest.json").exists():
        return root
    tmp = root.with_name(root.name + f".tmp{os.getpid()}")
    (tmp / "lib").mkdir(parents=True, exist_ok=True)
    for soname in names:
        (tmp / "lib" / soname).touch()
        dev = _dev_name(soname)
        if dev and dev not in libraries and not (tmp / "lib" / dev).exists():
            os.symlink(soname, tmp / "lib" / dev)
    (tmp / "manifest.json").write_text(json.dumps({"libraries": names}, indent=1))
    try:
        os.rename(tmp, root)
    except OSError:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)  # a concurrent launch staged it first
    return root


def binds(libraries):
    """(host file, container path) for every library: the file its soname links to on the
    host (discovery's "file"), bound over its placeholder in LIBDIR."""
    return [(libraries[s]["file"], f"{LIBDIR}/{s}") for s in sorted(libraries)]


def _version_tuple(text):
    try:
        return tuple(int(p) for p in text.split("."))
    except (AttributeError, ValueError):
        return None


def image_libcuda(rootfs):
    """[(in-image path, version)] of the libcuda.so.VERSION files an image carries itself."""
    from ..discovery.gpu_libs import split_name

    found = []
    for d in IMAGE_LIBCUDA_DIRS:
        try:
            names = os.listdir(os.path.join(str(rootfs), d.lstrip("/")))
        except OSError:
            continue
        for name in sorted(names):
            base, version = split_name(name)
            if base == "libcuda.so" and version and "." in version:
                full = os.path.join(str(rootfs), d.lstrip("/"), name)
                if os.path.isfile(full) and not os.path.islink(full) and os.path.getsize(full) > 0:
                    found.append((f"{d}/{name}", version))
    return found


def check_image(image, driver):
    """Notes on the image's own libcuda; a one-line refusal when it carries one older than the
    host driver (a program that finds it first — DT_RPATH, a wrapper that resets
    LD_LIBRARY_PATH — fails with "CUDA driver version is insufficient" or an NVML
    "Driver/library version mismatch", far from the cause)."""
    notes = []
    want = _version_tuple(driver)
    for path, version in image_libcuda(image.rootfs):
        have = _version_tuple(version)
        if want is None or have is None or have == want:
            continue
        if have < want:
            raise NearmetalError(f"--gpus refused: image '{image.name}' carries its own {path} ({version}), older than "
                                 f"the host driver {driver}; a program that loads it fails: remove it from the image "
                                 "(the host's driver libraries are bound in)")
        notes.append(f"gpu: image '{image.name}' carries {path} ({version}, newer than the host driver {driver}): "
                     "CUDA's forward-compatibility package, used only where a program finds it first")
    return notes


def check_glibc(image, libraries, root="/"):
    """A one-line refusal when a driver library needs a GLIBC_x.y newer than the image's glibc
    (its .gnu.version_r): bound into that image it would not load, and CUDA would say only
    "no CUDA-capable device". bind mode checks the MPI's libraries the same way (elf.glibc).
    A file that is not an ELF object here is not judged (the fake driver trees of tests)."""
    from ..elf import glibc_release, read_elf
    from ..elf.glibc import glibc_requirement

    release = None
    for soname in sorted(libraries):
        file = libraries[soname]["file"]
        try:
            info = read_elf(os.path.join(root, file.lstrip("/")))
        except (NearmetalError, OSError):
            continue
        need = glibc_requirement([info])
        if need is None:
            continue
        release = release or glibc_release(image.rootfs) or (0, 0)
        if need[0] > release:
            have = f"glibc {release[0]}.{release[1]}" if release != (0, 0) else "no glibc"
            raise NearmetalError(f"--gpus refused: host driver library {soname} ({file}) needs GLIBC_{need[0][0]}."
                                 f"{need[0][1]} but image '{image.name}' has {have}: use an image whose glibc is at "
                                 f"least {need[0][0]}.{need[0][1]} (the host's driver libraries are bound in)")


def has_mount_point(image):
    """Whether the image has /nm/host-gpu (images built before GPU support lack it; runtimes
    that cannot create a mount point in a read-only image need it)."""
    return os.path.isdir(os.path.join(str(image.rootfs), MOUNT_POINT.lstrip("/")))
