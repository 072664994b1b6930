"""Image formats, one module each: dir.py (the rootfs directory, always built), squashfs.py
(a .sqfs file beside it), and one per runtime that keeps images in its own storage.

A format is an `ImageFormat` subclass registered with `@FORMATS.register`; its name is
its module's name, and `nearmetal image build --format` offers `FORMATS.names()`. A
runtime that can only start containers from one format names it (`Runtime.image_format`).
"""

from ...registry import Registry

# The rootfs directory first: every other format is made from it.
FORMATS = Registry(__name__, "image format", first=("dir", "squashfs"))


def names():
    return FORMATS.names()


def get(name):
    """An instance of format `name`; a one-line error naming the choices otherwise."""
    return FORMATS.get(name)()
