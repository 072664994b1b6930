"""What an image format provides (see formats/__init__.py)."""

from __future__ import annotations

from pathlib import Path


class ImageFormat:
    name = ""               # the registry sets it: the module's name
    title = ""              # in sentences: "SquashFS" (a SquashFS file, SquashFS images)
    suffix = None           # the file name's ending of one of its files (".sqfs"); None: it has none
    # Where its copy lives: "directory" (the rootfs), "file" (one file beside it) or "storage"
    # (inside a runtime's own storage, named by a reference: not a host path).
    layout = "file"
    # A file of it that a user names stands for a whole image, with a directory (its image
    # directory, or an extraction): a runtime that does not start this format starts that
    # image in its own, and doctor shows the file with the directory it inspected. Otherwise
    # a runtime that does not start it refuses it.
    stands_for_image = False
    # The Image attribute that reads this format's location, kept for scripts written
    # against the separate fields of older versions (Image.sqfs); None: none.
    image_attr = None
    in_build_tree = True    # made inside the temporary build tree, before it is swapped into place
    # The `image import` source kind (importer.KINDS) that is a file of this format: such an
    # import keeps the file as the image's copy in this format (keep(), kept()). None: none.
    kept_from = None

    def words(self, plural=False):
        """"SquashFS file", "directory images": what users read."""
        return f"{self.title} {'file' if self.layout == 'file' else 'image'}{'s' if plural else ''}"

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
        """Where an image directory keeps it: a host path, or a reference (None: not built)."""
        return None

    def open(self, path: Path, spec: str):
        """The Image a file of this format that a user named stands for (it ends in
        `suffix`); None: not this format's to open (the name is then looked up as usual)."""
        return None

    def run_context(self, image, named: bool) -> dict:
        """What a study stores with the runs of `image` about this format (named: the user
        named a file of it); part of the stored context's identity, so it stays as it was."""
        return {}

    def make(self, image_dir: Path, name: str, log, report, meta: dict):
        """Make this format of the image in image_dir (its rootfs is complete)."""
        raise NotImplementedError

    def keep(self, source: Path, image_dir: Path, name: str) -> Path:
        """Copy an imported file of this format into image_dir as the image's copy; its path.
        A copy, not a link: the user's file may change in place later."""
        import shutil

        from ...errors import NearmetalError

        copy = image_dir / f"{name}{self.suffix}"
        try:
            shutil.copyfile(source, copy)
        except OSError as e:
            raise NearmetalError(f"{source}: cannot copy it into the image: {e.strerror or e}") from None
        return copy

    def kept(self, meta: dict, copy: Path, digest: str):
        """Record the copy keep() made (digest: the copy's SHA-256) in image.json's meta."""

    def discard(self, name: str, log):
        """A rebuild dropped this format: remove what lives outside the image directory."""

    def record(self, meta: dict):
        """This format's own keys in image.json, once meta["formats"] is final."""
