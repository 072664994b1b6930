"""An image format registered from outside the package (a plugin, this test) is one class plus
its registration: `image build --format` and study files offer it, a file of it that a user
names resolves through it, an image directory keeps and lists it, a runtime that declares it
starts it while the others refuse it in their own words, --user's checks read the runtime's
declaration, and a study variant places a copy of it and says it in words."""

import os
from pathlib import Path

import pytest

from nearmetal import image as image_mod
from nearmetal.errors import NearmetalError
from nearmetal.image import Image, ImageRef, formats
from nearmetal.image.formats import FORMATS
from nearmetal.image.formats.base import ImageFormat
from nearmetal.image.store import write_meta
from nearmetal.runtimes import RUNTIMES
from nearmetal.runtimes.base import Runtime
from test_unit_compose import FakeHost, launch, machine, req  # noqa: F401  (machine: autouse fixture)

pytestmark = pytest.mark.unit


class Ext3(ImageFormat):
    """An ext3 file system image beside the rootfs (the seed 002 comparison's other format)."""
    title = "ext3"
    suffix = ".ext3"

    def open(self, path, spec):
        if not path.is_file():
            return None
        meta = {"name": path.stem, "mpis": ["openmpi", "mpich"], "mpi": {"openmpi": {"version": "4.1.4"}}}
        return Image(path.stem, path, mpis=meta["mpis"], meta=meta, refs=[ImageRef(self.name, path)])

    def locate(self, image_dir, meta):
        path = image_dir / f"{meta['name']}.ext3"
        return path if self.recorded(image_dir, meta) and path.is_file() else None

    def make(self, image_dir, name, log, report, meta):
        (image_dir / f"{name}.ext3").write_bytes(b"ext3 of " + name.encode())

    def run_context(self, image, named):
        return {"ext3": str(image.location(self.name))} if named else {}


class Ext3Run(Runtime):
    """Starts ext3 images (root only) and directories (in a user namespace)."""
    binary = "ext3-run"
    formats = {"dir": ("userns",), "ext3": None}

    def path(self):
        return "/opt/ext3/bin/ext3-run"

    def wrap(self, spec):
        return [self.path(), str(self.image_source(spec)), "--", *spec.argv]


@pytest.fixture
def ext3(tmp_path):
    FORMATS.register(name="ext3")(Ext3)
    RUNTIMES.register(name="ext3run")(Ext3Run)
    try:
        yield tmp_path / "y.ext3"
    finally:
        FORMATS.unregister("ext3")
        RUNTIMES.unregister("ext3run")


def _file_host():
    """FakeHost whose images given by path come from the real store (image.resolve)."""
    host = FakeHost()
    fake_image = host.image
    host.image = lambda spec: image_mod.resolve(spec) if spec and "/" in spec else fake_image(spec)
    return host


def test_listed_offered_and_named_by_its_suffix(ext3):
    from nearmetal.cli_parser import build_parser

    assert "ext3" not in formats.names()[:-1] and formats.names()[-1] == "ext3"
    assert build_parser().parse_args(["image", "build", "--format", "ext3"]).format == "ext3"
    assert formats.of_path("/x/y.ext3") == "ext3" and formats.of_path("/x/y.sqfs") == "squashfs"
    assert formats.of_path("y") is None and "ext3" in formats.on_host() and "ext3" in formats.copies()
    assert formats.get("ext3").words(plural=True) == "ext3 files"


def test_a_named_file_resolves_through_the_format(ext3):
    with pytest.raises(NearmetalError, match=r"^no image '.*y\.ext3': build it with"):
        image_mod.resolve(str(ext3))  # no such file: the format lets the name through
    ext3.write_bytes(b"ext3")
    img = image_mod.resolve(str(ext3))
    assert img.name == "y" and img.location("ext3") == ext3 and img.location("dir") is None


def test_an_image_directory_keeps_and_lists_it(ext3, capsys):
    from nearmetal.image.cli import command

    image_dir = image_mod.images_dir() / "nm-ext"
    (image_dir / "rootfs").mkdir(parents=True)
    meta = {"name": "nm-ext", "distro": "bookworm", "mpis": ["mpich"]}
    formats.get("ext3").make(image_dir, "nm-ext", None, None, meta)
    write_meta(image_dir, meta, ["dir", "ext3"])
    assert meta["formats"] == ["dir", "ext3"]
    img = image_mod.resolve("nm-ext")
    assert img.location("ext3") == image_dir / "nm-ext.ext3" and img.location("dir") == image_dir / "rootfs"
    command(type("Args", (), {"image_command": "list"})())
    assert capsys.readouterr().out.split("\t")[3] == "dir,ext3"


def test_the_runtime_that_declares_it_starts_it(ext3):
    ext3.write_bytes(b"ext3")
    argv, _, _ = launch(req("hybrid", mpi="openmpi", runtime="ext3run", image=str(ext3)), host=_file_host())
    assert f"/opt/ext3/bin/ext3-run {ext3} -- " in argv
    argv, _, _ = launch(req("hybrid", mpi="openmpi", runtime="ext3run", image="nm-test"), host=_file_host())
    assert "/opt/ext3/bin/ext3-run /img/nm-test/rootfs -- " in argv  # a name: its first format


@pytest.mark.parametrize("runtime, message", [
    ("charliecloud", "ch-run starts directory images, SquashFS files, not ext3 files"),
    ("bwrap", "bwrap runs directory images only; use the image directory or charliecloud for .ext3"),
    ("podman", "podman runs images from its own storage, not .ext3 files"),
])
def test_the_others_refuse_it_in_their_words(ext3, runtime, message):
    ext3.write_bytes(b"ext3")
    with pytest.raises(NearmetalError) as e:
        launch(req("hybrid", mpi="openmpi", runtime=runtime, image=str(ext3)), host=_file_host())
    assert str(e.value) == message


def test_an_account_is_refused_what_the_runtime_starts_as_root_only(ext3):
    from nearmetal import privilege
    from test_unit_privilege import NM, FakeFacts

    assert privilege.runtime_problem(Ext3Run(), "ext3", NM, FakeFacts()) == (
        "ext3-run cannot start ext3 files as an unprivileged account (it starts directory images that way)")
    assert privilege.runtime_problem(Ext3Run(), "dir", NM, FakeFacts()) is None


def test_a_study_variant_places_a_copy_and_says_it(ext3, tmp_path):
    from nearmetal.analysis.answer_text import _optional_words
    from nearmetal.study.execute.image_variant import Placer
    from nearmetal.study.plan.plan import variant_id
    from test_unit_study import BASE, parse

    cfg = parse(BASE + '[matrix]\nmode = ["native", "hybrid"]\nimage_format = ["ext3"]\n[[benchmark]]\nkernel = "mpi-info"\n')
    assert cfg.matrix.image_format == ["ext3"]
    assert variant_id({"mode": "hybrid", "runtime": "ext3run", "mpi": "mpich", "image": "i", "image_format": "ext3"}) \
        == "hybrid/ext3run/mpich/i+ext3"
    assert _optional_words({"image_format": "ext3"}) == ["ext3 image"]
    ext3.write_bytes(b"ext3 bytes")
    place = tmp_path / "fast"
    place.mkdir()
    placer = Placer()
    try:
        copy = placer.image_spec({"image": str(ext3), "image_format": "ext3", "image_place": str(place)})
        assert copy.endswith(".ext3") and Path(copy).read_bytes() == b"ext3 bytes" and str(place) in copy
    finally:
        placer.close()
    assert not os.path.exists(copy) and os.listdir(place) == []
