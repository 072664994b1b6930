"""A variant's image format, its placement and cold starts (seed 002: Singularity SquashFS vs
ext3 images on NFS, Lustre or a RAM disk; placement only matters when the page cache is cold).

- `image_format = "dir" | "squashfs" | "sif"`: the image's directory, its SquashFS file or its
  SIF file (built with `nearmetal image build --format ...`); "default": as its name or path
  says.
- `image_place = DIR`: the runs use a copy of that file (or directory) in DIR, made once per
  study and removed when the study ends, so the image is read from the file system under test.
- `cold = true`: the page cache is dropped (sync, then /proc/sys/vm/drop_caches = 3) before
  each run, so the image, libraries and program come from their file system, not from memory.
  Needs root; the context of such runs says `cold_cache`.
"""

import hashlib
import os
import shutil
import stat

from ..errors import NearmetalError

SUFFIX = {"dir": "", "squashfs": ".sqfs", "sif": ".sif"}
ATTR = {"dir": "rootfs", "squashfs": "sqfs", "sif": "sif"}
DROP_CACHES = "/proc/sys/vm/drop_caches"


def named_format(spec):
    return "squashfs" if str(spec).endswith(".sqfs") else "sif" if str(spec).endswith(".sif") else "dir"


class Placer:
    """Copies of images placed for a study's runs; close() removes them."""

    def __init__(self, dry=False):
        self.dry, self.placed = dry, {}

    def image_spec(self, variant):
        """The image to hand to `run` for a variant (None: the default image, unchanged)."""
        spec = variant.get("image")
        fmt, place = variant.get("image_format"), variant.get("image_place")
        if not fmt and not place:
            return None if spec == "default" else spec
        from ..resolve import Host

        image = Host().image(None if spec == "default" else spec)
        fmt = fmt or named_format(spec)
        source = getattr(image, ATTR[fmt], None)
        if fmt == "dir" and str(source).endswith((".sqfs", ".sif")):
            source = None  # a lone SquashFS or SIF file has no directory form
        if not source:
            raise NearmetalError(f"image '{image.name}' has no {fmt} form: build one with "
                                 f"`nearmetal image build --format {fmt} --name {image.name}`")
        return self.place(str(source), place, image.name, fmt) if place else str(source)

    def place(self, source, place, name, fmt):
        """The copy of `source` in directory `place` (made now unless it exists unchanged)."""
        if self.dry:  # nothing is copied: a dry run shows the image where it is
            return source
        digest = hashlib.sha256(source.encode()).hexdigest()[:8]
        target = os.path.join(place, "nearmetal-images", f"{name}-{digest}{SUFFIX[fmt]}")
        if target in self.placed:
            return target
        if not os.path.isdir(place):
            raise NearmetalError(f"image_place {place}: no such directory")
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if os.path.lexists(target):
                _remove(target)
            if fmt == "dir":
                shutil.copytree(source, target, symlinks=True, copy_function=_copy_regular)
            else:
                shutil.copy2(source, target)
        except OSError as e:
            _remove(target)
            raise NearmetalError(f"cannot place image '{name}' in {place}: {e.strerror or e}") from None
        self.placed[target] = source
        return target

    def close(self):
        for target in list(self.placed):
            _remove(target)
            self.placed.pop(target)
            try:
                os.rmdir(os.path.dirname(target))  # the nearmetal-images directory, when empty
            except OSError:
                pass


def _copy_regular(src, dst):
    """Regular files only: an image directory holds device nodes (/dev/zero, /dev/urandom)
    that reading would never finish; runtimes mount their own /dev over them."""
    if stat.S_ISREG(os.lstat(src).st_mode):
        shutil.copy2(src, dst)
    return dst


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        os.unlink(path)


def check_cold():
    """None when the page cache can be dropped here, else why not."""
    if os.geteuid() != 0:
        return "cold = true drops the page cache before each run, which needs root"
    if not os.access(DROP_CACHES, os.W_OK):
        return f"cold = true: {DROP_CACHES} is not writable here (a container without it?)"
    return None


def drop_caches():
    """Write dirty pages out, then drop the page cache, dentries and inodes."""
    os.sync()
    try:
        with open(DROP_CACHES, "w") as f:
            f.write("3\n")
    except OSError as e:
        raise NearmetalError(f"cannot drop the page cache ({DROP_CACHES}: {e.strerror})") from None
