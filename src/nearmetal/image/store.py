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


@dataclass(frozen=True)
class ImageRef:
    """One format of an image and where it is: a host path (a directory or file), or a
    reference into a runtime's own storage (the format's layout says which)."""
    format: str
    location: Path | str


@dataclass(init=False)
class Image:
    name: str
    rootfs: Path  # what is inspected: the directory image (for a lone .sqfs: the .sqfs path)
    distro: str = ""
    mpis: list[str] = field(default_factory=list)  # MPI families installed in the image
    meta: dict = field(default_factory=dict, repr=False)  # the image.json content
    refs: dict = field(default_factory=dict)  # format name -> ImageRef, one per format it has

    def __init__(self, name, rootfs, distro="", mpis=(), meta=None, refs=None, **locations):
        """refs: ImageRefs (None: the rootfs directory alone); locations: older attribute
        names (sqfs=PATH: the formats' image_attr)."""
        self.name, self.rootfs, self.distro, self.mpis = name, rootfs, distro, list(mpis)
        self.meta = meta if meta is not None else {}  # the caller's dict: an update reaches both
        self.refs = {r.format: r for r in (refs if refs is not None else [ImageRef(formats.ROOTFS, rootfs)])}
        for attr, where in locations.items():
            setattr(self, attr, where)

    def location(self, fmt: str):
        """Where this image's copy in format `fmt` is (None: it has none)."""
        ref = self.refs.get(fmt)
        return ref.location if ref else None

    def set_location(self, fmt: str, where):
        if where is None:
            self.refs.pop(fmt, None)
        else:
            self.refs[fmt] = ImageRef(fmt, where)

    # image.sqfs, image.sif, image.podman_ref: a format's location by its older attribute name
    def __getattr__(self, attr):
        fmt = formats.by_attr(attr) if not attr.startswith("_") else None
        if fmt is None:
            raise AttributeError(f"'Image' object has no attribute '{attr}'")
        return self.location(fmt)

    def __setattr__(self, attr, value):
        if attr in _IMAGE_FIELDS:
            rootfs_ref = self.__dict__.get("refs", {}).get(formats.ROOTFS)
            if attr == "rootfs" and rootfs_ref is not None and rootfs_ref.location == self.rootfs:
                self.refs[formats.ROOTFS] = ImageRef(formats.ROOTFS, value)  # its directory moves with it
            object.__setattr__(self, attr, value)
            return
        fmt = formats.by_attr(attr)
        if fmt is None:
            raise AttributeError(f"'Image' object has no attribute '{attr}'")
        self.set_location(fmt, value)

    def kernel_bin(self, mpi: str) -> str:
        """In-container directory of the kernels built against `mpi`."""
        if mpi not in self.mpis:
            has = f"it has: {', '.join(self.mpis)}" if self.mpis else "it has no MPI"
            raise NearmetalError(f"image '{self.name}' has no {mpi} ({has}); "
                                 f"build one with `nearmetal image build --mpi {mpi}`")
        return kernel_bin(mpi)


_IMAGE_FIELDS = frozenset(("name", "rootfs", "distro", "mpis", "meta", "refs"))


def images_dir() -> Path:
    return subdir("images")


def resolve(spec: str) -> Image:
    """An image from a NAME under home()/images, a rootfs directory, an image directory, a
    .sqfs, or a .sif (nearmetal's, or any SIF: image/sif.py reads those)."""
    spec = str(spec)
    if spec == "default" and not (images_dir() / spec).is_dir():  # as study files say it
        from ..families import names
        from .recipe import default_name, host_distro

        spec = default_name(host_distro(), names())
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
        return _image_of_rootfs(meta, path)
    if spec and path.suffix:
        for name in formats.names():  # a file of a format: the format opens it
            fmt = formats.get(name)
            if fmt.suffix == path.suffix:
                image = fmt.open(path, spec)
                if image is not None:
                    return image
    from .recipe import build_command

    suffixes = [formats.get(n).suffix for n in formats.names() if formats.get(n).suffix]
    as_path = "/" in spec or spec.startswith((".", "~")) or path.suffix in suffixes
    if spec and as_path and path.exists():  # a path that is no image: say what it is, not that none has that name
        raise NearmetalError(f"{spec} is not an image: give an image name, an image directory or a file ending "
                             f"in {', '.join(suffixes)}")
    how = build_command(spec)
    if how:
        raise NearmetalError(f"no image '{spec}': build it with `{how}`")
    from ..closest import closest, known_names

    names = [i.name for i in list_images()]
    near = f" ({known_names(spec, names, 'images')})" if closest(spec, names) else ""
    raise NearmetalError(f"no image '{spec}': build it with `nearmetal image build ...` or give a path{near}")


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


def _copies(image_dir: Path, meta: dict) -> list[ImageRef]:
    """The formats an image directory has, with their locations."""
    out = []
    for name in formats.names():
        where = formats.get(name).locate(image_dir, meta)
        if where is not None:
            out.append(ImageRef(name, where))
    return out


def _image(meta: dict, rootfs: Path, copies) -> Image:
    return Image(name=meta["name"], rootfs=rootfs, distro=meta.get("distro", ""), mpis=list(meta.get("mpis", [])),
                 meta=meta, refs=copies)


def image_from_dir(image_dir: Path, meta: dict) -> Image:
    return _image(meta, rootfs=image_dir / "rootfs", copies=_copies(image_dir, meta))


def _image_of_rootfs(meta: dict, rootfs: Path) -> Image:
    """An image given as its rootfs directory alone."""
    return _image(meta, rootfs=rootfs, copies=[ImageRef(formats.ROOTFS, rootfs)])


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
    copies = []
    if (image_dir / "rootfs").is_dir():
        rootfs = image_dir / "rootfs"
        outer = read_json(image_dir / "image.json") or {}
        if outer and outer.get("digest") == meta.get("digest"):  # the other copies are of the same image
            copies = _copies(image_dir, outer)
        else:
            copies = [ImageRef(formats.ROOTFS, rootfs)]
    else:
        rootfs = path  # a lone .sqfs: only SquashFS-capable runtimes can use it
    return _image(meta, rootfs=rootfs, copies=copies)  # the format that opened the file adds it


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
        return image_from_dir(image_dir, meta)  # the format that opened the file adds it
    same = _image_of_sif_digest(sif.file_digest(path))
    if same is not None:  # imported already (`image import x.sif --name n`): not extracted again
        return same
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
    return _image(meta, rootfs=rootfs, copies=[ImageRef(formats.ROOTFS, rootfs)])


def _image_of_sif_digest(digest: str) -> Image | None:
    """The image whose SIF has this digest (an imported SIF keeps its file as its `sif`
    copy), or None."""
    for image in list_images():
        imported = image.meta.get("imported") or {}
        # imports before sif_digest was kept: the image's digest is the SIF file's
        if digest in (image.meta.get("sif_digest"), imported.get("kind") == "SIF" and image.meta.get("digest")):
            return image
    return None


def foreign_name(path: Path, digest: str) -> str:
    """A short, stable name for an image given by path: its file name and 8 digest digits,
    so two different files of one name never share a name in variant ids and reports."""
    import re

    stem = re.sub(r"[^a-z0-9._-]+", "-", path.stem.lower()).strip("-._")[:40] or "image"
    return f"{stem}-{digest.split(':', 1)[-1][:8]}"
