"""How the image is read: a cold page cache (each run reads the image from disk), a copy
placed elsewhere (image_place), another format (image_format) — seed 002's image-format and
placement factors. Evidence: the variant's dimensions and the context (cold_cache, the image's
format and path). Ablations, one per factor: a warm page cache, the image where it is, its
default format. These matter at start-up (loading the program and its libraries): their
strength is lower for long runs."""

from . import EXPLAINERS
from .base import Explainer, replaced


@EXPLAINERS.register
class Image(Explainer):
    title = "the image's format, placement or a cold page cache"

    def examine(self, slow, base):
        v, b = slow.variant, base.variant
        found = []
        if v.get("cold") and not b.get("cold"):
            found.append(self.cause("the page cache was dropped before each run (cold = true): the image was read "
                                    "from disk; the baseline's was not", 0.7, factor="warm",
                                    ablation=replaced(v, cold=None), fix="keep the image in the page cache (warm it)"))
        if v.get("image_place") and v.get("image_place") != b.get("image_place"):
            found.append(self.cause(f"the image was read from a copy in {v['image_place']}", 0.4, factor="image-in-place",
                                    ablation=replaced(v, image_place=None),
                                    fix="read the image where it is (or from RAM, /dev/shm)"))
        fmt = v.get("image_format")
        if fmt not in (None, "default") and fmt != b.get("image_format"):
            found.append(self.cause(f"the image was read as {fmt}", 0.4, factor="default-format",
                                    ablation=replaced(v, image_format=None), fix="use the image's default format"))
        return found
