"""Image formats, one module each: dir.py (the rootfs directory, always built), squashfs.py
(a .sqfs file beside it), sif.py (a .sif file) and one per runtime that keeps images in its
own storage (podman.py).

A format is an `ImageFormat` subclass (base.py) registered with `@FORMATS.register`; its
name is its module's name. It says what it is (suffix, title, layout), how it is made from
a rootfs, how a file of it that a user names is opened, where an image directory keeps it
and what it records in image.json. An image carries one `ImageRef(format, location)` per
format it has (image/store.py); a runtime names the formats it starts (`Runtime.formats`).
`nearmetal image build --format` offers `FORMATS.names()`.
"""

from ...registry import Registry

# The rootfs directory first: every other format is made from it.
ROOTFS = "dir"
FORMATS = Registry(__name__, "image format", first=(ROOTFS, "squashfs"))


def names():
    return FORMATS.names()


def get(name):
    """An instance of format `name`; a one-line error naming the choices otherwise."""
    return FORMATS.get(name)()


def copies():
    """The formats made from an image's rootfs (every one but the rootfs itself)."""
    return tuple(n for n in names() if n != ROOTFS)


def of_path(spec):
    """The format a path names by its ending (`x.sqfs`: squashfs), or None (a name or a directory)."""
    spec = str(spec or "")
    if "." not in spec.rsplit("/", 1)[-1]:
        return None  # no ending: no format module need be imported (`nearmetal run --image NAME` stays fast)
    for name in names():
        fmt = get(name)
        if fmt.suffix and spec.endswith(fmt.suffix):
            return name
    return None


def on_host():
    """The formats whose copy is a file or directory on the host (a study can place it)."""
    return tuple(n for n in names() if get(n).layout != "storage")


def by_attr(attr):
    """The format whose older Image attribute is `attr` (Image.sqfs: squashfs), or None."""
    return next((n for n in names() if get(n).image_attr == attr), None)
