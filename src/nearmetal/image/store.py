"""Built images under home()/images, and resolving what a user names (a NAME, a rootfs or
image directory, a .sqfs) to an Image."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import NearmetalError
from ..home import subdir
from . import formats
from .beneath import Tree
from .formats.squashfs import read_inside
from .recipe import NAME_RE, kernel_bin

# image.json inside the rootfs: a rootfs directory (or .sqfs) says what it is on its own.
IN_IMAGE_JSON = "opt/nearmetal/image.json"


@dataclass
class Image:
    name: str
    rootfs: Path  # the directory image, always present (for a lone .sqfs: the .sqfs path)
    # One field per format kept outside the rootfs directory (its module's image_attr):
    sqfs: Path | None = None  # NAME.sqfs when built with --format squashfs
    sif: Path | None = None  # NAME.sif when built with --format sif, or the SIF a user named
    podman_ref: str | None = None  # "localhost/nearmetal-NAME:latest" when imported into podman
    distro: str = ""
    mpis: list[str] = field(default_factory=list)  # MPI families installed in the image
    meta: dict = field(default_factory=dict, repr=False)  # the image.json content

    def kernel_bin(self, mpi: str) -> str:
        """In-container directory of the kernels built against `mpi`."""
        if mpi not in self.mpis:
            raise NearmetalError(f"image '{self.name}' has no {mpi} (it has: {', '.join(self.mpis)}); "
                                 f"build one with `nearmetal image build --mpi {mpi}`")
        return kernel_bin(mpi)


def images_dir() -> Path:
    return subdir("images")


def resolve(spec: str) -> Image:
    """An image from a NAME under home()/images, a rootfs directory, an image directory, a
    .sqfs, or a .sif (nearmetal's, or any SIF: image/sif.py reads those)."""
    spec = str(spec)
    try:
        return _resolve(spec)
    except (OSError, RuntimeError, ValueError) as e:  # /proc/1/root, a 300-character name, ~nosuchuser, NUL
        raise NearmetalError(f"image '{spec}': {getattr(e, 'strerror', None) or e}")


def _resolve(spec):
    if spec and "/" not in spec and NAME_RE.match(spec):
        meta = read_json(images_dir() / spec / "image.json")
        if meta and (images_dir() / spec / "rootfs").is_dir():
            return image_from_dir(images_dir() / spec, meta)
    path = Path(spec).expanduser()
    if spec and path.is_dir():
        path = path.resolve()
        if (path / "image.json").is_file() and (path / "rootfs").is_dir():  # an image directory
            return image_from_dir(path, read_json(path / "image.json"))
        if (path.parent / "image.json").is_file() and path.name == "rootfs":  # rootfs of an image directory
            meta = read_json(path.parent / "image.json")
            if meta:
                return image_from_dir(path.parent, meta)
        meta = read_json(path / IN_IMAGE_JSON)
        if not meta:
            raise NearmetalError(f"{path} is not a nearmetal image: it has no /{IN_IMAGE_JSON} "
                                 "(build one with `nearmetal image build`)")
        return _image(meta, rootfs=path)
    if spec and path.is_file() and path.suffix == ".sqfs":
        return _image_from_sqfs(path.resolve())
    if spec and path.suffix == ".sif":
        if not path.is_file():
            raise NearmetalError(f"no SIF image {spec}: no such file")
        return _image_from_sif(path.resolve())
    from .recipe import build_command

    how = build_command(spec)
    if how:
        raise NearmetalError(f"no image '{spec}': build it with `{how}`")
    raise NearmetalError(f"no image '{spec}': build it with `nearmetal image build ...` or give a path")


def list_images() -> list[Image]:
    out = []
    for entry in sorted(images_dir().iterdir()):
        if entry.name.startswith(".") or not entry.is_dir():
            continue
        meta = read_json(entry / "image.json")
        if meta and (entry / "rootfs").is_dir():
            out.append(image_from_dir(entry, meta))
    return out


def read_json(path: Path) -> dict | None:
    """An image.json's content; None when missing, unreadable or not an image's."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("name") else None


def write_meta(image_dir: Path, meta: dict, formats_built):
    """image.json beside the rootfs and inside it, each replaced atomically."""
    meta["formats"] = [f for f in formats.names() if f in formats_built]
    for name in formats.names():
        formats.get(name).record(meta)
    text = json.dumps(meta, indent=2, sort_keys=False) + "\n"
    path = image_dir / "image.json"
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)
    # Inside the rootfs, resolved beneath it: an imported image's /opt may be a link to a host directory.
    with Tree(image_dir / "rootfs") as tree:
        tree.write_file(IN_IMAGE_JSON, text.encode())


def recorded_formats(image_dir: Path, meta: dict) -> list[str]:
    """The formats image.json lists whose files are there (asks no tool)."""
    return [name for name in formats.names() if formats.get(name).recorded(image_dir, meta)]


def _copies(image_dir: Path, meta: dict) -> dict:
    """Image fields of the formats an image directory has: {"sqfs": Path, ...}."""
    out = {}
    for name in formats.names():
        fmt = formats.get(name)
        if fmt.image_attr:
            out[fmt.image_attr] = fmt.locate(image_dir, meta)
    return out


def _image(meta: dict, rootfs: Path, copies=None) -> Image:
    return Image(name=meta["name"], rootfs=rootfs, distro=meta.get("distro", ""), mpis=list(meta.get("mpis", [])),
                 meta=meta, **(copies or {}))


def image_from_dir(image_dir: Path, meta: dict) -> Image:
    return _image(meta, rootfs=image_dir / "rootfs", copies=_copies(image_dir, meta))


def _image_from_sqfs(path: Path) -> Image:
    # NAME.json beside it, the image directory it sits in, the image of that name, or inside it.
    meta = read_json(path.with_suffix(".json"))
    for candidate in (path.parent / "image.json", images_dir() / path.stem / "image.json"):
        if meta:
            break
        meta = read_json(candidate)
        if meta and meta["name"] != path.stem:
            meta = None
    if not meta:
        meta = read_inside(path, IN_IMAGE_JSON)
    if not isinstance(meta, dict) or not meta.get("name"):
        raise NearmetalError(f"{path} is not a nearmetal image: no image.json beside it or inside it")
    image_dir = images_dir() / meta["name"]
    copies = {}
    if (image_dir / "rootfs").is_dir():
        rootfs = image_dir / "rootfs"
        outer = read_json(image_dir / "image.json") or {}
        if outer and outer.get("digest") == meta.get("digest"):  # the other copies are of the same image
            copies = _copies(image_dir, outer)
    else:
        rootfs = path  # a lone .sqfs: only SquashFS-capable runtimes can use it
    return _image(meta, rootfs=rootfs, copies={**copies, "sqfs": path})


def _image_from_sif(path: Path) -> Image:
    """A SIF: nearmetal's own (its image directory beside or by name, the same digest), else
    any SIF, inspected through a read-only extraction of its root file system (image/sif.py)."""
    from . import sif

    sif.primary_partition(path)  # a one-line error for a file that is not a usable SIF
    meta = read_json(path.with_suffix(".json")) or read_json(path.parent / "image.json")
    if not meta or meta.get("name") != path.stem:
        meta = read_json(images_dir() / path.stem / "image.json")
    image_dir = images_dir() / meta["name"] if meta else None
    if meta and (image_dir / "rootfs").is_dir() and meta.get("sif_digest") == sif.file_digest(path):
        image = image_from_dir(image_dir, meta)
        image.sif = path
        return image
    rootfs, digest = sif.extracted(path)
    described = rootfs.parent / "image.json"  # what the extracted copy holds, worked out once
    meta = read_json(described)
    if meta is None:
        meta = read_json(rootfs / IN_IMAGE_JSON)
        if meta:  # one of nearmetal's images whose directory is gone: its own record says what it is
            meta = dict(meta, sif_digest=digest)
        else:
            from .foreign import describe

            meta = describe(rootfs, name=foreign_name(path, digest), digest=digest, source=str(path))
            meta["sif_digest"] = digest
        tmp = described.with_name(f".image.json.tmp-{os.getpid()}")
        tmp.write_text(json.dumps(meta, indent=1))
        os.replace(tmp, described)
    return _image(meta, rootfs=rootfs, copies={"sif": path})


def foreign_name(path: Path, digest: str) -> str:
    """A short, stable name for an image given by path: its file name and 8 digest digits,
    so two different files of one name never share a name in variant ids and reports."""
    import re

    stem = re.sub(r"[^a-z0-9._-]+", "-", path.stem.lower()).strip("-._")[:40] or "image"
    return f"{stem}-{digest.split(':', 1)[-1][:8]}"
