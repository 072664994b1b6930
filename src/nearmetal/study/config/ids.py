"""Names of a study's variants and cells: the variant id (`hybrid/charliecloud/mpich/default+cold`)
that reports show and the store keeps, its parts for MPIs and images given by path, and the
run-key parts they go into (study/records.py builds the keys). Shared by planning, the
store's codec and the analysis, so it depends on nothing but placement and the networks'
default."""

import hashlib
import os

from ...models import in_container
from ...networks import DEFAULT as DEFAULT_NETWORK
from . import placement

VARIANT_DIMS = ("mode", "runtime", "mpi", "image")
# Variant dimensions that are off unless asked for: in a variant's dict (and id) only when on,
# so the ids and stored variants of studies that do not use them stay as they were.
OPTIONAL_DIMS = ("image_format", "image_place", "cold", "audit", "network", "user", "gpus")
CONTAINER_ONLY = ("runtime", "image", "image_format", "image_place")  # nothing to say for native runs


def is_set(value):
    """An optional dimension's value that asks for something (not off, not its default)."""
    return value not in (False, None, "", "default", DEFAULT_NETWORK)  # the host's network: the default


def _id_part(dim, value):
    if dim in ("image_format", "network"):
        return f"+{value}"
    if dim == "image_place":
        return f"+in-{image_label(value.rstrip('/') or '/')}"
    if dim == "user":  # account names have no '/' or '+' (privilege.name_problem)
        return f"+as-{value}"
    if dim == "gpus":  # all, N or indices/UUIDs with commas: no '/' or '+' (gpu/select.py)
        return f"+gpus-{value}"
    return f"+{dim}"


def variant_id(v):
    """A named variant's name (names have no '/'); else mode/runtime/MPI/image, unambiguous
    for any image name: mode, runtime and MPI are validated words without '/', so
    everything after the third '/' is the image, then the optional dimensions that are set
    (`+squashfs`, `+in-LABEL`, `+cold`, `+audit`, `+isolated`, `+as-NAME`, `+gpus-all`; image labels
    have no '+') and
    the placement where it is not the default (`+2-nodes`, `+4-per-node`: study/config/placement.py)."""
    if v.get("name"):
        return v["name"] + placement.id_part(v)
    extra = "".join(_id_part(d, v[d]) for d in OPTIONAL_DIMS if is_set(v.get(d))) + placement.id_part(v)
    if not in_container(v["mode"]):
        return f"{v['mode']}/{mpi_label(v['mpi'])}{extra}"
    return f"{v['mode']}/{v['runtime']}/{mpi_label(v['mpi'])}/{image_label(v['image'])}{extra}"


def mpi_label(spec):
    """FAMILY, or for FAMILY@PREFIX (an installation under a prefix) FAMILY@ and the prefix's
    label as image_label makes it: no '/' in a variant id's MPI part."""
    family, sep, prefix = spec.partition("@")
    if not sep:
        return spec
    shown = prefix.rstrip("/")
    while os.path.basename(shown) in ("usr", "local") and os.path.dirname(shown) not in ("", "/"):
        shown = os.path.dirname(shown)  # /opt/mpich-4/usr -> mpich-4
    return f"{family}@{os.path.basename(shown) or 'prefix'}-{hashlib.sha256(prefix.encode()).hexdigest()[:8]}"


def image_label(image):
    """An image as variant ids and reports show it: its name; an image given by path, its
    file or directory name (the image directory's for .../NAME/rootfs) and 8 hex digits of
    the path's SHA-256: short, stable, and two paths never share one."""
    if "/" not in image:
        return image
    path = image.rstrip("/")
    base = os.path.basename(path)
    if base == "rootfs":
        base = os.path.basename(os.path.dirname(path)) or base
    base = base.replace("+", "_")  # '+' starts the optional dimensions in a variant id
    return f"{base or 'image'}-{hashlib.sha256(image.encode()).hexdigest()[:8]}"


def key_part(text):
    """A run-key component with its separators percent-encoded ('|' between components, '#'
    before the repetition, '%' itself), so keys of any names are unambiguous; names without
    these characters are unchanged, so existing databases' keys stay valid."""
    if "%" not in text and "|" not in text and "#" not in text:
        return text
    return text.replace("%", "%25").replace("|", "%7C").replace("#", "%23")
