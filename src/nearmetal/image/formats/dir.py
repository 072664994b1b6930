"""The rootfs directory: what the build itself produces, and what every other format is
made from; bwrap and Charliecloud run it as it is."""

from . import FORMATS
from .base import ImageFormat


@FORMATS.register
class Dir(ImageFormat):
    title = "directory"
    layout = "directory"

    def recorded(self, image_dir, meta):
        return True  # an image directory without its rootfs is not an image

    def present(self, image_dir, meta):
        return (image_dir / "rootfs").is_dir()

    def locate(self, image_dir, meta):
        return image_dir / "rootfs"

    def make(self, image_dir, name, log, report, meta):
        pass  # the build itself
