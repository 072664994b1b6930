"""Which layers an archive holds, read as hostile input: `docker save` archives
(manifest.json) and OCI layouts (index.json -> manifest -> layers, as a directory or a tar).

Each document is JSON of a bounded size with the shape checked before use; an OCI digest
is `sha256:` + 64 or `sha512:` + 128 lowercase hex digits, so a blob's path never leaves
blobs/ (a digest `sha256:../../..` once opened host files); in a layout directory every
path is opened without following links and must be a regular file. Anything else is a
one-line error naming the file.
"""

from __future__ import annotations

import json
import os
import re
import stat
import tarfile

from ..errors import NearmetalError, one_line
from .beneath import Tree

DIGEST = re.compile(r"(sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128})\Z")
MAX_JSON = 16 << 20  # manifests and indexes are kilobytes
MAX_NESTED = 4  # indexes of indexes


def _json(fileobj, what):
    data = fileobj.read(MAX_JSON + 1)
    if len(data) > MAX_JSON:
        raise NearmetalError(f"{what} is larger than {MAX_JSON >> 20} MiB: not an image manifest")
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise NearmetalError(f"{what} is not JSON ({one_line(str(e))[:120]})") from None


def _shown(value):
    return one_line(repr(value))[:80]


class ArchiveFiles:
    """Files of a tar archive (docker save, OCI archive), by member name."""

    def __init__(self, outer: tarfile.TarFile, source, index: dict):
        self.outer, self.source, self.index = outer, source, index  # index: {normalized name: member}

    def open(self, name):
        member = self.index.get(os.path.normpath(name).lstrip("/"))
        try:
            f = self.outer.extractfile(member) if member is not None else None
        except KeyError:  # a link member whose target is not in the archive
            f = None
        except RecursionError:  # tarfile follows a member's symbolic links without a limit
            raise NearmetalError(f"{self.source}: {one_line(name)[:120]} is a loop of symbolic links in the "
                                 "archive: refused") from None
        except (tarfile.TarError, OSError) as e:
            raise NearmetalError(f"{self.source}: {one_line(name)[:120]}: {one_line(str(e))[:120]}") from None
        if f is None:
            raise NearmetalError(f"{self.source}: {one_line(name)[:120]} is missing from the archive "
                                 "(its manifest names it)")
        return f


class LayoutFiles:
    """Files of an OCI layout directory, opened beneath it without following links."""

    def __init__(self, layout):
        self.layout = layout

    def open(self, name):
        parts = name.split("/")
        with Tree(self.layout) as tree:
            parent = tree.dir_fd(parts[:-1], follow=False)
            if parent is None:
                raise NearmetalError(f"{self.layout}: {name} is missing (its index names it)")
            try:
                fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent)
            except FileNotFoundError:
                raise NearmetalError(f"{self.layout}: {name} is missing (its index names it)") from None
            except OSError:
                raise NearmetalError(f"{self.layout}: {name} is a symbolic link or unreadable: refused") from None
            finally:
                os.close(parent)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise NearmetalError(f"{self.layout}: {name} is not a regular file: refused")
        return os.fdopen(fd, "rb")


def docker_layers(files: ArchiveFiles) -> list[str]:
    """The layer files of the first image of a `docker save` archive, in order."""
    with files.open("manifest.json") as f:
        manifest = _json(f, f"{files.source}: manifest.json")
    if not isinstance(manifest, list) or not manifest or not isinstance(manifest[0], dict):
        raise NearmetalError(f"{files.source}: manifest.json is not a docker save manifest (a list of images; "
                             f"found {type(manifest).__name__})")
    layers = manifest[0].get("Layers")
    if not isinstance(layers, list) or not layers or not all(isinstance(x, str) and x for x in layers):
        raise NearmetalError(f"{files.source}: manifest.json lists no layers (its 'Layers' is {_shown(layers)})")
    return layers


def blob_path(digest, where) -> str:
    if not isinstance(digest, str) or not DIGEST.match(digest):
        raise NearmetalError(f"{where}: digest {_shown(digest)} is not sha256:<64 hex digits> or "
                             "sha512:<128 hex digits>: refused")
    algo, _, hexd = digest.partition(":")
    return f"blobs/{algo}/{hexd}"


def oci_layers(files, source) -> list[str]:
    """The layer blobs of an OCI layout's image (the linux/amd64 one of a multi-platform
    index), as paths inside the layout."""
    with files.open("index.json") as f:
        doc = _json(f, f"{source}: index.json")
    where = "index.json"
    for _ in range(MAX_NESTED + 1):
        if not isinstance(doc, dict):
            raise NearmetalError(f"{source}: {where} is not an OCI index or manifest (found {type(doc).__name__})")
        manifests = doc.get("manifests")
        if manifests is None:
            break
        if not isinstance(manifests, list) or not manifests or not all(isinstance(m, dict) for m in manifests):
            raise NearmetalError(f"{source}: {where} lists no manifests (its 'manifests' is {_shown(manifests)})")
        pick = next((m for m in manifests if isinstance(m.get("platform"), dict)
                     and m["platform"].get("architecture") == "amd64"), None)
        pick = pick or next((m for m in manifests if not m.get("platform")), manifests[0])
        where = blob_path(pick.get("digest"), f"{source}: {where}")
        with files.open(where) as f:
            doc = _json(f, f"{source}: {where}")
    else:
        raise NearmetalError(f"{source}: more than {MAX_NESTED} nested OCI indexes")
    layers = doc.get("layers")
    if not isinstance(layers, list) or not layers or not all(isinstance(x, dict) for x in layers):
        raise NearmetalError(f"{source}: its OCI manifest ({where}) lists no layers")
    return [blob_path(layer.get("digest"), f"{source}: {where}") for layer in layers]
