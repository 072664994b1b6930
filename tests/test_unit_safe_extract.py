"""The safe extractor's parts in the test process (no process started): resolution beneath an
image's root (beneath.py), the modes an entry gets, OCI digests and manifests (layouts.py),
and tar layers written by safe_extract.Extractor into tmp_path, with a host directory beside
the image that nothing may reach. tests/test_hostile_import.py does the same through the
real `nearmetal image import`."""

import io
import json
import os
import stat
import tarfile

import pytest

from nearmetal.errors import NearmetalError
from nearmetal.image.beneath import Tree, split
from nearmetal.image.layouts import LayoutFiles, blob_path, oci_layers
from nearmetal.image.safe_extract import Extractor, Limits, safe_mode
from nearmetal.image.tree_import import copy_tree

pytestmark = pytest.mark.unit


@pytest.fixture
def world(tmp_path):
    root, outside = tmp_path / "rootfs", tmp_path / "host"
    root.mkdir()
    outside.mkdir()
    (outside / "victim").write_text("host\n")
    return root, outside


def test_split_drops_leading_slash_and_dots_and_refuses_dot_dot():
    assert split("/./usr//bin/", "m") == ["usr", "bin"] and split("./", "m") == []
    for bad in ("../x", "a/../../b", "a/.."):
        with pytest.raises(NearmetalError, match="'..'"):
            split(bad, "member")


def _name(fd):
    return os.readlink(f"/proc/self/fd/{fd}")


def test_links_on_the_way_are_read_as_the_image_sees_them(world):
    root, outside = world
    (root / "real").mkdir()
    (root / "abs").symlink_to(str(outside))  # an absolute link: from the image's root
    (root / "up").symlink_to("../../../../..")  # never above the root
    (root / "rel").symlink_to("real")
    with Tree(root) as tree:
        for parts, expect in ((["rel"], root / "real"), (["up"], root), (["up", "real"], root / "real")):
            fd = tree.dir_fd(parts)
            assert _name(fd) == str(expect)
            os.close(fd)
        assert tree.dir_fd(["abs"]) is None  # /host... does not exist inside the image
        fd = tree.dir_fd(["abs"], create=True)
        assert _name(fd) == str(root / str(outside).lstrip("/"))
        os.close(fd)
        assert tree.dir_fd(["rel"], follow=False) is None  # whiteouts: no link on the way at all
    assert os.listdir(outside) == ["victim"]


def test_link_loops_and_files_on_the_way_are_one_line_errors(world):
    root, _ = world
    (root / "loop").symlink_to("loop")
    (root / "file").write_text("x")
    with Tree(root) as tree:
        with pytest.raises(NearmetalError, match="more than 40 symbolic links"):
            tree.dir_fd(["loop", "x"], create=True)
        with pytest.raises(NearmetalError, match="is a file, not a directory"):
            tree.dir_fd(["file", "x"], create=True)
        assert tree.dir_fd(["file"]) is None


def test_write_file_replaces_a_planted_link_instead_of_writing_through_it(world):
    root, outside = world
    (root / "opt").mkdir()
    (root / "opt" / "image.json").symlink_to(outside / "victim")
    with Tree(root) as tree:
        tree.write_file("opt/image.json", b"{}\n")
    assert (outside / "victim").read_text() == "host\n"
    assert not (root / "opt" / "image.json").is_symlink() and (root / "opt" / "image.json").read_text() == "{}\n"


@pytest.mark.parametrize("mode, is_dir, keep, expect", [
    (0o4755, False, False, 0o755), (0o2755, False, False, 0o755), (0o666, False, False, 0o664),
    (0o777, True, False, 0o775), (0o1777, True, False, 0o1777), (0o2775, True, False, 0o2775),
    (0o4755, False, True, 0o4755), (0o777, True, True, 0o777), (0o100644, False, False, 0o644),
])
def test_modes(mode, is_dir, keep, expect):
    assert safe_mode(mode, is_dir, keep) == expect


@pytest.mark.parametrize("digest, ok", [
    ("sha256:" + "a" * 64, True), ("sha512:" + "0" * 128, True), ("sha256:../../../etc/passwd", False),
    ("sha256:" + "A" * 64, False), ("sha256:" + "a" * 63, False), ("md5:" + "a" * 32, False), (None, False),
    ({"x": 1}, False), ("sha256:" + "a" * 64 + "/../x", False),
])
def test_digests(digest, ok):
    if ok:
        assert blob_path(digest, "w") == "blobs/" + digest.replace(":", "/")
    else:
        with pytest.raises(NearmetalError, match="is not sha256:<64 hex digits>"):
            blob_path(digest, "w")


@pytest.mark.parametrize("index, message", [
    ("not json", "index.json is not JSON"), ("[1, 2]", "not an OCI index or manifest"),
    ('{"manifests": {}}', "lists no manifests"), ('{"manifests": [{"digest": "sha256:.."}]}', "is not sha256"),
    ('{"layers": []}', "lists no layers"), ('{"manifests": [{"digest": "sha256:' + "b" * 64 + '"}]}', "is missing"),
])
def test_malformed_oci_indexes(tmp_path, index, message):
    (tmp_path / "index.json").write_text(index)
    with pytest.raises(NearmetalError, match=message):
        oci_layers(LayoutFiles(tmp_path), tmp_path)


def _layer(*entries):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for name, kind, extra in entries:
            info = tarfile.TarInfo(name)
            info.type = {"file": tarfile.REGTYPE, "dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE,
                         "hard": tarfile.LNKTYPE, "chr": tarfile.CHRTYPE}[kind]
            data = extra.get("data", b"")
            info.mode, info.linkname, info.size = extra.get("mode", 0o644), extra.get("target", ""), len(data)
            t.addfile(info, io.BytesIO(data) if kind == "file" else None)
    buf.seek(0)
    return buf


def _extract(root, *layers, limits=None):
    ex = Extractor(root, limits)
    try:
        for layer in layers:
            ex.layer_from(layer, "layer")
        ex.finish()
    finally:
        ex.close()
    return ex


def test_hard_links_reach_only_files_inside(world):
    root, outside = world
    for target in (str(outside / "victim"), "../" * 10 + str(outside / "victim").lstrip("/")):
        with pytest.raises(NearmetalError, match="not a file extracted earlier|'..'"):
            _extract(root, _layer(("h", "hard", {"target": target}), ("h", "file", {"mode": 0o4777})))
    assert (outside / "victim").read_text() == "host\n" and (outside / "victim").stat().st_nlink == 1


def test_a_layer_writes_through_no_link_and_lists_what_it_leaves_out(world):
    root, outside = world
    ex = _extract(root, _layer(("evil", "sym", {"target": str(outside)}), ("dev/mem", "chr", {"mode": 0o666})),
                  _layer(("evil/victim", "file", {"data": b"pwned\n"}), ("evil/.wh.victim", "file", {}),
                         ("tmp", "dir", {"mode": 0o1777}), ("suid", "file", {"mode": 0o4755})))
    assert (outside / "victim").read_text() == "host\n" and os.listdir(outside) == ["victim"]
    assert (root / str(outside).lstrip("/") / "victim").read_text() == "pwned\n"
    assert ex.left_out == ["/dev/mem (character device)"] and not os.path.lexists(root / "dev/mem")
    assert stat.S_IMODE((root / "tmp").stat().st_mode) == 0o1777 and stat.S_IMODE((root / "suid").stat().st_mode) == 0o755
    assert ex.cleared == 1


def test_limits_name_their_option(world):
    root, _ = world
    with pytest.raises(NearmetalError, match=r"more than 3 files.*--max-files"):
        _extract(root, _layer(*[(f"f{i}", "file", {}) for i in range(5)]), limits=Limits(max_files=3))
    with pytest.raises(NearmetalError, match=r"larger than 1 KiB.*--max-size"):
        _extract(root, _layer(("big", "file", {"data": b"x" * 2000})), limits=Limits(max_bytes=1024))


def test_a_truncated_or_garbage_layer_is_one_line(world):
    root, _ = world
    whole = _layer(("big", "file", {"data": os.urandom(5000)})).getvalue()
    for data in (whole[:3000], b"\x1f\x8b\x08" + os.urandom(100)):
        with pytest.raises(NearmetalError) as e:
            _extract(root, io.BytesIO(data))
        assert "\n" not in str(e.value)


def test_oci_layout_blob_paths_are_opened_without_following_links(tmp_path, world):
    _, outside = world
    layout = tmp_path / "oci"
    (layout / "blobs" / "sha256").mkdir(parents=True)
    digest = "c" * 64
    (layout / "blobs" / "sha256" / digest).symlink_to(outside / "victim")
    (layout / "index.json").write_text(json.dumps({"manifests": [{"digest": f"sha256:{digest}"}]}))
    with pytest.raises(NearmetalError, match="symbolic link"):
        oci_layers(LayoutFiles(layout), layout)


def test_a_wide_directory_copies_with_few_descriptors_open(tmp_path, world):
    """300 subdirectories copy with 64 descriptors to spare (the copy walks one at a time)."""
    import resource

    root, _ = world
    source = tmp_path / "wide"
    source.mkdir()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    for i in range(300):
        (source / f"d{i}").mkdir()
        (source / f"d{i}" / "f").write_text(str(i))
    # 64 more than the highest descriptor this process holds already (earlier tests may hold some)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(int(fd) for fd in os.listdir("/proc/self/fd")) + 64, hard))
    try:
        ex = Extractor(root)
        copy_tree(ex, source)
        ex.finish()
        ex.close()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert (root / "d299" / "f").read_text() == "299" and ex.files == 601


def test_an_opaque_whiteout_spares_what_its_own_layer_wrote_under_implicit_directories(world):
    root, _ = world
    _extract(root, _layer(("a/old/x", "file", {}), ("a/y", "file", {})),
             _layer(("a/new/z", "file", {}), ("a/.wh..wh..opq", "file", {})))
    assert sorted(os.listdir(root / "a")) == ["new"] and os.listdir(root / "a/new") == ["z"]


def test_fuzzed_layers_import_or_fail_in_one_line_and_never_reach_outside(tmp_path, world):
    """300 seeded layers of random members (names with '..', '/', whiteouts; every type; owner
    ids, modes and times out of range; links to the host): each is written or refused with a
    one-line NearmetalError, never another exception, and the host directory stays as it was."""
    import random

    _, outside = world
    rng = random.Random(26)
    names = ["a", "a/b", "/abs", "./c", "l", "l/x", "l/victim", "..x", ".wh.a", "a/.wh..wh..opq", ".wh.l",
             "d/", "é\udcff", "x" * 300, "a//b", ".", "h", "../up"]
    targets = names + [str(outside), str(outside / "victim"), "../" * 8 + str(outside).lstrip("/"), ""]
    kinds = [tarfile.DIRTYPE, tarfile.REGTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.CHRTYPE, tarfile.FIFOTYPE,
             tarfile.CONTTYPE, b"Z"]
    refused = 0
    for n in range(300):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
            for _ in range(rng.randint(1, 8)):
                info = tarfile.TarInfo(rng.choice(names))
                info.type, info.linkname = rng.choice(kinds), rng.choice(targets)
                info.uid, info.gid = (rng.choice([0, 1000, 2 ** 31, 2 ** 32 - 1, 2 ** 40]) for _ in range(2))
                info.mtime, info.mode = rng.choice([0, 1.5, 2 ** 40, -5, 1e30]), rng.randrange(0o200000)
                data = b"x" * rng.choice([0, 7])
                info.size = len(data) if info.type in (tarfile.REGTYPE, tarfile.CONTTYPE, b"Z") else 0
                t.addfile(info, io.BytesIO(data) if info.size else None)
        root = tmp_path / f"r{n}"
        root.mkdir()
        try:
            _extract(root, io.BytesIO(buf.getvalue()), limits=Limits(max_files=100, max_bytes=1 << 20))
        except NearmetalError as e:
            assert "\n" not in str(e)
            refused += 1
    assert sorted(os.listdir(outside)) == ["victim"] and (outside / "victim").read_text() == "host\n"
    assert 0 < refused < 300  # both outcomes were exercised


def _docker_archive(path, members, compress=None):
    """A `docker save`-like archive: (name, bytes) regular members, or (name, '->target') links."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for name, data in members:
            ti = tarfile.TarInfo(name)
            if isinstance(data, str):
                ti.type, ti.linkname = tarfile.SYMTYPE, data[2:]
                t.addfile(ti)
            else:
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
    raw = buf.getvalue()
    path.write_bytes(compress(raw) if compress else raw)


def test_a_loop_of_links_in_a_docker_archive_is_one_line(tmp_path):
    from nearmetal.image import importer

    src = tmp_path / "loop.tar"
    _docker_archive(src, [("manifest.json", json.dumps([{"Layers": ["a/layer.tar"]}]).encode()),
                          ("a/layer.tar", "->../b/layer.tar"), ("b/layer.tar", "->../a/layer.tar")])
    assert importer.kind_of(src) == "docker archive"
    with pytest.raises(NearmetalError, match="loop of symbolic links"):
        importer._unpack("docker archive", src, tmp_path / "rootfs", None, Limits())


def test_a_corrupt_xz_docker_archive_is_one_line(tmp_path):
    import lzma
    import random

    from nearmetal.image import importer

    rnd = random.Random(7)
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as t:
        data = " ".join(str(rnd.random()) for _ in range(40000)).encode()
        ti = tarfile.TarInfo("big")
        ti.size = len(data)
        t.addfile(ti, io.BytesIO(data))
    src = tmp_path / "img.tar.xz"
    _docker_archive(src, [("manifest.json", json.dumps([{"Layers": ["l.tar"]}]).encode()),
                          ("l.tar", layer.getvalue())], compress=lzma.compress)
    blob = bytearray(src.read_bytes())
    for i in range(len(blob) * 2 // 3, len(blob) * 2 // 3 + 32):  # inside the layer's data
        blob[i] ^= 0xFF
    src.write_bytes(blob)
    with pytest.raises(NearmetalError, match="corrupt"):
        importer._unpack("docker archive", src, tmp_path / "rootfs", None, Limits())
    head = bytearray(src.read_bytes())
    for i in range(100, 132):  # before manifest.json's header is read
        head[i] ^= 0xFF
    src.write_bytes(head)
    with pytest.raises(NearmetalError, match="is not an image"):
        importer.kind_of(src)


def test_stale_import_trees_are_only_this_names(tmp_path):
    from nearmetal.image.importer import stale_imports

    for n in (".a.import-123", ".a.import-x.import-456", ".a.import.lock", ".ab.import-7"):
        (tmp_path / n).mkdir()
    assert [p.name for p in stale_imports(tmp_path, "a")] == [".a.import-123"]


def test_an_images_ld_so_cache_is_read_bounded(tmp_path):
    """Describing or running an imported image reads its /etc/ld.so.cache: a crafted one may
    be gigabytes (zeros compress well) or a FIFO (a rootfs directory given to --image)."""
    from nearmetal.elf.ldcache import MAX_CACHE_BYTES, read_ld_so_cache

    big = tmp_path / "ld.so.cache"
    with open(big, "wb") as f:
        f.truncate(MAX_CACHE_BYTES + 1)  # sparse: no disk used
    with pytest.raises(NearmetalError, match="larger than"):
        read_ld_so_cache(big)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(NearmetalError, match="not a regular file"):
        read_ld_so_cache(fifo)
    assert read_ld_so_cache(tmp_path / "missing") == []


def _deep_layer(depth):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for i in range(1, depth + 1):
            ti = tarfile.TarInfo("/".join(["d"] * i))
            ti.type, ti.mode = tarfile.DIRTYPE, 0o755
            t.addfile(ti)
    buf.seek(0)
    return buf


def test_a_tree_thousands_deep_is_one_line_and_can_be_removed(world, tmp_path):
    """A layer 1,200 directories deep, then a whiteout of its top: shutil.rmtree recursed once
    per level (RecursionError, and the import's own clean-up failed the same way)."""
    from nearmetal.image.beneath import MAX_DEPTH
    from nearmetal.image.chroot import remove_tree

    root, outside = world
    ex = Extractor(root)
    try:
        with pytest.raises(NearmetalError, match=f"more than {MAX_DEPTH} directories deep"):
            ex.layer_from(_deep_layer(1200), "layer")  # refused before any whiteout could remove it
    finally:
        ex.close()
    deep = tmp_path / "deep"  # as unsquashfs may leave one: made here level by level
    deep.mkdir()
    fd = os.open(deep, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(1200):
        os.mkdir("d", dir_fd=fd)
        (open("f", "w", opener=lambda p, f: os.open(p, f, dir_fd=fd))).close()
        below = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = below
    os.close(fd)
    remove_tree(deep)
    assert not deep.exists() and os.listdir(outside) == ["victim"]

