"""A variant's image format, its placement and cold starts (seed 002: Singularity SquashFS vs
ext3 images on NFS, Lustre or a RAM disk; placement only matters when the page cache is cold).

- `image_format = "dir" | "squashfs" | "sif"`: the image's directory, its SquashFS file or its
  SIF file (built with `nearmetal image build --format ...`); "default": as its name or path
  says.
- `image_place = DIR`: the runs use a copy of that file (or directory) in a directory of the
  runner's own in DIR (DIR/nearmetal-images-<random suffix>/, mkdtemp), made before the variant's first run
  and removed when the study ends, so the image is read from the file system under test.
- `cold = true`: the page cache is dropped (sync, then /proc/sys/vm/drop_caches = 3) before
  each run, so the image, libraries and program come from their file system, not from memory.
  Needs root; the context of such runs says `cold_cache`.
"""

import hashlib
import os
import re
import shutil
import stat
import tempfile

from ...errors import NearmetalError

DROP_CACHES = "/proc/sys/vm/drop_caches"


def named_format(spec):
    """The format of the image file a spec names (image/formats), the rootfs directory otherwise."""
    from ...image import formats

    return formats.of_path(spec) or formats.ROOTFS


class Placer:
    """Copies of images placed for a study's runs, in a directory of this runner's own under
    each place (two studies placing the same image never share or remove each other's copy);
    close() removes them, also after a copy that was interrupted."""

    def __init__(self, dry=False):
        self.dry, self.placed, self.dirs = dry, {}, {}

    def image_spec(self, variant):
        """The image to hand to `run` for a variant (None: the default image, unchanged)."""
        spec = variant.get("image")
        fmt, place = variant.get("image_format"), variant.get("image_place")
        if not fmt and not place:
            return None if spec == "default" else spec
        from ...resolve import Host

        image = Host().image(None if spec == "default" else spec)
        fmt = fmt or named_format(spec)
        source = image.location(fmt)  # a lone SquashFS file has no directory form
        if not source:
            raise NearmetalError(f"image '{image.name}' has no {fmt} form: build one with "
                                 f"`nearmetal image build --format {fmt} --name {image.name}`")
        return self.place(str(source), place, image.name, fmt) if place else str(source)

    def place(self, source, place, name, fmt):
        """The copy of `source` in directory `place`, made on first use."""
        if self.dry:  # nothing is copied: a dry run shows the image where it is
            return source
        for target, src in self.placed.items():
            if src == source and os.path.dirname(target) == self.dirs.get(place):
                return target
        if not os.path.isdir(place):
            raise NearmetalError(f"image_place {place}: no such directory")
        from ...image import formats

        safe = re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".") or "image"  # a name from image.json
        digest = hashlib.sha256(source.encode()).hexdigest()[:8]
        try:
            if place not in self.dirs:
                self.dirs[place] = tempfile.mkdtemp(prefix="nearmetal-images-", dir=place)
            layout = formats.get(fmt)
            target = os.path.join(self.dirs[place], f"{safe}-{digest}{layout.suffix or ''}")
            self.placed[target] = source  # before copying: close() removes a copy cut short
            if layout.layout == "directory":
                shutil.copytree(source, target, symlinks=True, copy_function=_copy_regular)
            else:
                shutil.copy2(source, target)
        except OSError as e:
            self.close()
            raise NearmetalError(f"cannot place image '{name}' in {place}: {e.strerror or e}") from None
        return target

    def close(self):
        left = []
        for target in list(self.placed):
            if not _remove(target):
                left.append(target)
            self.placed.pop(target)
        for d in list(self.dirs.values()):
            try:
                os.rmdir(d)
            except OSError:
                left.append(d)
        self.dirs.clear()
        if left:
            import sys

            print(f"nearmetal: could not remove the image copies {', '.join(left)}", file=sys.stderr)


def _copy_regular(src, dst):
    """Regular files only: an image directory holds device nodes (/dev/zero, /dev/urandom)
    that reading would never finish; runtimes mount their own /dev over them."""
    if stat.S_ISREG(os.lstat(src).st_mode):
        shutil.copy2(src, dst)
    return dst


def _remove(path):
    """Remove a placed copy; True when nothing is left (read-only directories made writable)."""
    def writable_then_retry(func, p, _exc):
        try:
            os.chmod(os.path.dirname(p), 0o700)
            func(p)
        except OSError:
            pass

    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, onerror=writable_then_retry)
    elif os.path.lexists(path):
        try:
            os.unlink(path)
        except OSError:
            pass
    return not os.path.lexists(path)


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
