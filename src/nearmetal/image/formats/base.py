"""What an image format provides (see formats/__init__.py)."""

from __future__ import annotations

from pathlib import Path


class ImageFormat:
    name = ""               # the registry sets it: the module's name
    image_attr = None       # the Image field that carries this format's copy (None: the rootfs itself)
    in_build_tree = True    # made inside the temporary build tree, before it is swapped into place

    def available(self) -> bool:
        """Whether this host can make it (a rebuild keeps only the formats it can remake)."""
        return True

    def recorded(self, image_dir: Path, meta: dict) -> bool:
        """image.json lists it (and its file, if any, is there): cheap, asks no tool."""
        return self.name in meta.get("formats", [])

    def present(self, image_dir: Path, meta: dict) -> bool:
        """Really there, so a build asking for it has nothing to add."""
        return self.recorded(image_dir, meta)

    def locate(self, image_dir: Path, meta: dict):
        """The value of Image.<image_attr> for an image directory (None: not built)."""
        return None

    def make(self, image_dir: Path, name: str, log, report, meta: dict):
        """Make this format of the image in image_dir (its rootfs is complete)."""
        raise NotImplementedError

    def discard(self, name: str, log):
        """A rebuild dropped this format: remove what lives outside the image directory."""

    def record(self, meta: dict):
        """This format's own keys in image.json, once meta["formats"] is final."""
