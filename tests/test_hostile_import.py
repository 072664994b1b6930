"""`nearmetal image import` of hostile images, through the real command (issue 26): crafted
docker save archives, OCI layouts and archives, SquashFS files and root file system
directories, made here, each against victim files (checksum and mode recorded) and canary
paths outside the image. For every class the victim is unchanged, no canary appears, no
temporary tree is left in the images directory, and the outcome is a safe import (checked
inside the image) or a one-line error (non-zero exit, one stderr line, no traceback).
Images go to a temporary NEARMETAL_HOME, never the shared one."""

import hashlib
import io
import json
import os
import stat
import subprocess
import tarfile
import threading

import pytest

from conftest import assert_one_line_error, nearmetal
from nearmetal.image import sif as SIF
from test_unit_sif import make_sif

pytestmark = pytest.mark.integration


# --- crafted archives ---------------------------------------------------------------------

def _info(name, kind="file", data=b"", mode=0o644, target="", uid=0, gid=0, dev=(0, 0)):
    info = tarfile.TarInfo(name)
    info.mode, info.uid, info.gid, info.mtime = mode, uid, gid, 1_700_000_000
    info.type = {"file": tarfile.REGTYPE, "dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE,
                 "chr": tarfile.CHRTYPE, "fifo": tarfile.FIFOTYPE}[kind]
    info.linkname = target
    info.devmajor, info.devminor = dev
    info.size = len(data) if kind == "file" else 0
    return info, (io.BytesIO(data) if kind == "file" else None)


def layer(*entries) -> bytes:
    """A layer tar from (name, kind, keyword...) entries, in this order."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as t:
        for name, kind, *rest in entries:
            t.addfile(*_info(name, kind, **(rest[0] if rest else {})))
    return buf.getvalue()


BASE = layer(("etc", "dir", {"mode": 0o755}), ("etc/os-release", "file", {"data": b"ID=hostile\n"}),
             ("tmp", "dir", {"mode": 0o1777}), ("usr/bin", "dir", {"mode": 0o755}),
             ("usr/bin/tool", "file", {"data": b"#!/bin/sh\n", "mode": 0o755}))


def _add(t, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    t.addfile(info, io.BytesIO(data))


def docker_archive(path, layers, manifest=None):
    """docker save's layout: manifest.json listing l<i>/layer.tar."""
    names = [f"l{i}/layer.tar" for i in range(len(layers))]
    if manifest is None:
        manifest = json.dumps([{"Config": "config.json", "RepoTags": ["x:1"], "Layers": names}]).encode()
    with tarfile.open(path, "w") as t:
        _add(t, "config.json", b"{}")
        for name, data in zip(names, layers):
            _add(t, name, data)
        _add(t, "manifest.json", manifest)
    return path


def _blob(layout, data):
    digest = hashlib.sha256(data).hexdigest()
    (layout / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
    (layout / "blobs" / "sha256" / digest).write_bytes(data)
    return {"digest": f"sha256:{digest}", "size": len(data)}


def oci_layout(layout, layers, layer_digests=None, manifest_digest=None):
    layout.mkdir()
    (layout / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    config = _blob(layout, b'{"architecture": "amd64", "os": "linux"}')
    blobs = [_blob(layout, data) for data in layers]
    for blob, digest in zip(blobs, layer_digests or []):
        blob["digest"] = digest
    man = _blob(layout, json.dumps({"schemaVersion": 2, "config": config, "layers": [
        dict(b, mediaType="application/vnd.oci.image.layer.v1.tar") for b in blobs]}).encode())
    if manifest_digest:
        man["digest"] = manifest_digest
    (layout / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [
        dict(man, mediaType="application/vnd.oci.image.manifest.v1+json",
             platform={"architecture": "amd64", "os": "linux"})]}))
    return layout


def oci_archive(path, layout):
    with tarfile.open(path, "w") as t:
        for p in sorted(layout.rglob("*")):
            t.add(p, arcname=str(p.relative_to(layout)), recursive=False)
    return path


# --- the host side: victims, canaries, the import ------------------------------------------

def _digest(path):
    st = os.lstat(path)
    return hashlib.sha256(path.read_bytes()).hexdigest(), stat.S_IMODE(st.st_mode), st.st_nlink


class Host:
    """Files outside the image that no import may change, and paths none may create."""

    def __init__(self, base):
        self.dir = base / "host"
        self.victim = self.dir / "victim.conf"
        self.vdir = self.dir / "victim-dir"
        self.vdir.mkdir(parents=True)
        self.victim.write_text("the host's own file\n")
        self.victim.chmod(0o640)
        (self.vdir / "child").write_text("a host file in a host directory\n")
        self.canaries = [self.dir / "canary", self.vdir / "canary", self.dir / "opt-canary"]
        self.home = base / "home"
        self.before = self.state()

    def state(self):
        return {"victim": _digest(self.victim), "child": _digest(self.vdir / "child"),
                "dir": sorted(os.listdir(self.dir)), "vdir": sorted(os.listdir(self.vdir)),
                "vdir_mode": stat.S_IMODE(os.lstat(self.vdir).st_mode)}

    def unchanged(self):
        assert self.state() == self.before
        for c in self.canaries:
            assert not os.path.lexists(c), f"canary {c} appeared"
        images = self.home / "images"
        if images.is_dir():
            assert not [p for p in os.listdir(images) if ".import-" in p], "a temporary import tree was left"

    def rootfs(self, name):
        return self.home / "images" / name / "rootfs"


@pytest.fixture
def host(tmp_path):
    return Host(tmp_path)


def run_import(host, source, name, *options, timeout=300):
    return nearmetal("image", "import", str(source), "--name", name, *options, timeout=timeout,
                     env={"NEARMETAL_HOME": str(host.home)})


def imported(out):
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr[-3000:]
    return out


# --- hard links -----------------------------------------------------------------------------

@pytest.mark.parametrize("how", ["relative", "absolute"])
def test_hard_link_to_a_host_file_then_remode_and_overwrite(tmp_path, host, how):
    target = str(host.victim) if how == "absolute" else "../" * 30 + str(host.victim).lstrip("/")
    evil = layer(("h", "hard", {"target": target}),
                 ("h", "file", {"data": b"overwritten by the image\n", "mode": 0o4777}))
    err = assert_one_line_error(run_import(host, docker_archive(tmp_path / "a.tar", [BASE, evil]), f"hx-hard-{how}"))
    assert ("'..'" in err) if how == "relative" else ("not a file extracted earlier" in err)
    host.unchanged()
    assert not (host.home / "images" / f"hx-hard-{how}").exists()


def test_hard_link_inside_then_a_file_of_that_name_replaces_only_the_link(tmp_path, host):
    inside = layer(("data/a", "file", {"data": b"first\n"}), ("data/b", "hard", {"target": "data/a"}),
                   ("data/b", "file", {"data": b"second\n", "mode": 0o4777}),
                   ("data/c", "hard", {"target": "/data/a"}))
    imported(run_import(host, docker_archive(tmp_path / "a.tar", [BASE, inside]), "hx-hard-inside"))
    root = host.rootfs("hx-hard-inside")
    assert (root / "data/a").read_text() == "first\n" and (root / "data/b").read_text() == "second\n"
    assert stat.S_IMODE((root / "data/b").stat().st_mode) == 0o775  # setuid and o+w cleared
    assert os.stat(root / "data/c").st_ino == os.stat(root / "data/a").st_ino  # an absolute link name: in the image
    host.unchanged()


# --- whiteouts ------------------------------------------------------------------------------

@pytest.mark.parametrize("whiteout", ["evil/.wh.child", "evil/.wh..wh..opq"])
def test_whiteouts_never_go_through_a_lower_layers_symlink(tmp_path, host, whiteout):
    lower = layer(("evil", "sym", {"target": str(host.vdir)}), ("rel", "sym", {"target": "../" * 30 + str(host.vdir)}))
    upper = layer((whiteout, "file"), (whiteout.replace("evil", "rel"), "file"))
    name = "hx-wh-opq" if "opq" in whiteout else "hx-wh"
    imported(run_import(host, docker_archive(tmp_path / "a.tar", [BASE, lower, upper]), name))
    host.unchanged()
    assert os.readlink(host.rootfs(name) / "evil") == str(host.vdir)  # the image's link, kept as a link


def test_whiteout_with_dot_dot_is_refused(tmp_path, host):
    rel = os.path.relpath(host.victim, "/")
    upper = layer((f"etc/../../../../../../../../../../{os.path.dirname(rel)}/.wh.victim.conf", "file"))
    err = assert_one_line_error(run_import(host, docker_archive(tmp_path / "a.tar", [BASE, upper]), "hx-wh-dots"))
    assert "'..'" in err
    host.unchanged()


def test_whiteouts_apply_to_lower_layers_only(tmp_path, host):
    """The image's own whiteouts still work: a lower file goes, the layer's own file stays."""
    lower = layer(("etc/old.conf", "file", {"data": b"old\n"}), ("opt/d/x", "file"), ("opt/d/y", "file"))
    upper = layer(("etc/new.conf", "file", {"data": b"new\n"}), ("etc/.wh.old.conf", "file"),
                  ("etc/.wh.new.conf", "file"), ("opt/d/z", "file"), ("opt/d/.wh..wh..opq", "file"))
    imported(run_import(host, docker_archive(tmp_path / "a.tar", [BASE, lower, upper]), "hx-wh-ok"))
    root = host.rootfs("hx-wh-ok")
    assert not (root / "etc/old.conf").exists() and (root / "etc/new.conf").read_text() == "new\n"
    assert sorted(os.listdir(root / "opt/d")) == ["z"]
    host.unchanged()


# --- links on the way of a later member -------------------------------------------------------

@pytest.mark.parametrize("same_layer", [True, False])
def test_a_file_through_a_symlink_lands_inside_the_image(tmp_path, host, same_layer):
    """The classic tar slip (a link, then a file through it) and a later layer's file under a
    lower layer's link: the link is read as the image sees it, beneath its root."""
    links = [("evil", "sym", {"target": str(host.vdir)}), ("rel", "sym", {"target": "../" * 30 + str(host.dir)})]
    files = [("evil/child", "file", {"data": b"pwned\n", "mode": 0o4777}),
             ("evil/canary", "file", {"data": b"pwned\n"}), ("rel/canary", "file", {"data": b"pwned\n"}),
             ("rel/victim.conf", "file", {"data": b"pwned\n"})]
    layers = [BASE, layer(*links, *files)] if same_layer else [BASE, layer(*links), layer(*files)]
    name = f"hx-slip-{same_layer}".lower()
    imported(run_import(host, docker_archive(tmp_path / "a.tar", layers), name))
    host.unchanged()
    inside = host.rootfs(name) / str(host.vdir).lstrip("/")
    assert (inside / "child").read_text() == "pwned\n" and stat.S_IMODE((inside / "child").stat().st_mode) == 0o775
    assert (host.rootfs(name) / str(host.dir).lstrip("/") / "victim.conf").read_text() == "pwned\n"


# --- members and manifests that are not what they claim ----------------------------------------

def test_dot_dot_member_is_refused(tmp_path, host):
    evil = layer(("../" * 20 + str(host.dir / "canary").lstrip("/"), "file", {"data": b"x"}))
    err = assert_one_line_error(run_import(host, docker_archive(tmp_path / "a.tar", [BASE, evil]), "hx-dots"))
    assert "'..'" in err
    host.unchanged()


@pytest.mark.parametrize("manifest, message", [
    (b"this is not json {", "manifest.json is not JSON"),
    (b'{"Layers": ["l0/layer.tar"]}', "not a docker save manifest"),
    (b'[{"Layers": ["nope/layer.tar"]}]', "nope/layer.tar is missing"),
    (b'[{"Layers": "l0/layer.tar"}]', "lists no layers"),
    (b"[" * 100000 + b"]" * 100000, "not JSON"),
])
def test_malformed_docker_manifests(tmp_path, host, manifest, message):
    out = run_import(host, docker_archive(tmp_path / "a.tar", [BASE], manifest=manifest), "hx-manifest")
    assert message in assert_one_line_error(out)
    host.unchanged()


@pytest.mark.parametrize("where", ["layer", "manifest"])
def test_oci_digest_that_climbs_out_of_the_layout_is_refused(tmp_path, host, where):
    bad = "sha256:../../../../../../../../../../etc/passwd"
    layout = oci_layout(tmp_path / "oci", [BASE], layer_digests=[bad] if where == "layer" else None,
                        manifest_digest=bad if where == "manifest" else None)
    for source in (layout, oci_archive(tmp_path / "oci.tar", layout)):
        err = assert_one_line_error(run_import(host, source, "hx-digest"))
        assert "is not sha256:<64 hex digits>" in err
    host.unchanged()


def test_oci_blob_that_is_a_link_to_a_host_file_is_refused(tmp_path, host):
    layout = oci_layout(tmp_path / "oci", [BASE])
    index = json.loads((layout / "index.json").read_text())
    blob = layout / "blobs" / "sha256" / index["manifests"][0]["digest"].split(":")[1]
    blob.unlink()
    blob.symlink_to(host.victim)
    assert "symbolic link" in assert_one_line_error(run_import(host, layout, "hx-bloblink"))
    host.unchanged()


def test_oci_layers_apply_in_order_from_a_layout_and_an_archive(tmp_path, host):
    upper = layer(("etc/.wh.os-release", "file"), ("etc/added", "file", {"data": b"yes\n"}))
    layout = oci_layout(tmp_path / "oci", [BASE, upper])
    for name, source in (("hx-oci", layout), ("hx-oci-tar", oci_archive(tmp_path / "oci.tar", layout))):
        imported(run_import(host, source, name))
        root = host.rootfs(name)
        assert (root / "etc/added").read_text() == "yes\n" and not (root / "etc/os-release").exists()
    host.unchanged()


def test_a_layer_that_is_not_a_tar(tmp_path, host):
    out = run_import(host, docker_archive(tmp_path / "a.tar", [BASE, b"\x1f\x8b" + os.urandom(4000)]), "hx-junk")
    assert "cannot be read as a tar layer" in assert_one_line_error(out)
    host.unchanged()


# --- special files and modes ------------------------------------------------------------------

def test_device_nodes_and_fifos_are_left_out_and_listed(tmp_path, host):
    evil = layer(("dev/mem", "chr", {"mode": 0o666, "dev": (1, 1)}), ("run/pipe", "fifo", {"mode": 0o666}))
    out = imported(run_import(host, docker_archive(tmp_path / "a.tar", [BASE, evil]), "hx-dev"))
    root = host.rootfs("hx-dev")
    assert not os.path.lexists(root / "dev/mem") and not os.path.lexists(root / "run/pipe")
    assert "left out 2 device node(s)" in out.stdout and "/dev/mem (character device)" in out.stdout
    assert "2 special file(s) left out" in out.stdout
    meta = json.loads((root.parent / "image.json").read_text())
    assert meta["imported"]["left_out"] == ["/dev/mem (character device)", "/run/pipe (FIFO)"]
    host.unchanged()


def _modes_layer():
    return layer(("usr/bin/su-evil", "file", {"data": b"\x7fELF", "mode": 0o4755}),
                 ("usr/bin/sg-evil", "file", {"data": b"\x7fELF", "mode": 0o2755}),
                 ("data", "dir", {"mode": 0o777}), ("data/open", "file", {"data": b"x", "mode": 0o666}),
                 ("tmp", "dir", {"mode": 0o1777}), ("var/tmp", "dir", {"mode": 0o1777}))


def test_setuid_and_world_writable_are_cleared_sticky_tmp_kept(tmp_path, host):
    out = imported(run_import(host, docker_archive(tmp_path / "a.tar", [BASE, _modes_layer()]), "hx-modes"))
    root = host.rootfs("hx-modes")
    mode = lambda p: stat.S_IMODE(os.lstat(root / p).st_mode)  # noqa: E731
    assert (mode("usr/bin/su-evil"), mode("usr/bin/sg-evil")) == (0o755, 0o755)
    assert (mode("data"), mode("data/open")) == (0o775, 0o664)
    assert (mode("tmp"), mode("var/tmp")) == (0o1777, 0o1777)
    assert "--keep-modes keeps them" in out.stdout
    assert stat.S_IMODE(os.stat(root.parent).st_mode) == 0o755
    host.unchanged()


def test_keep_modes_keeps_them_in_a_0700_image_directory(tmp_path, host):
    imported(run_import(host, docker_archive(tmp_path / "a.tar", [BASE, _modes_layer()]), "hx-keep", "--keep-modes"))
    root = host.rootfs("hx-keep")
    assert stat.S_IMODE(os.lstat(root / "usr/bin/su-evil").st_mode) == 0o4755
    assert stat.S_IMODE(os.lstat(root / "data/open").st_mode) == 0o666
    assert stat.S_IMODE(os.stat(root.parent).st_mode) == 0o700  # no other account reaches its setuid files
    host.unchanged()


# --- bounds ------------------------------------------------------------------------------------

def test_member_count_and_size_are_bounded(tmp_path, host):
    many = layer(*[(f"f/{i}", "file") for i in range(50)])
    err = assert_one_line_error(run_import(host, docker_archive(tmp_path / "a.tar", [BASE, many]), "hx-many",
                                           "--max-files", "20"))
    assert "more than 20 files and directories" in err and "--max-files" in err
    big = layer(("big", "file", {"data": b"\0" * 300_000}))
    err = assert_one_line_error(run_import(host, docker_archive(tmp_path / "b.tar", [BASE, big]), "hx-big",
                                           "--max-size", "100K"))
    assert "larger than 100 KiB" in err and "--max-size" in err
    host.unchanged()


# --- two imports of one name at once ----------------------------------------------------------

def test_two_imports_of_one_name_at_once(tmp_path, host):
    bulk = layer(*[(f"bulk/{i}", "file", {"data": os.urandom(2000)}) for i in range(3000)])
    source = docker_archive(tmp_path / "a.tar", [BASE, bulk])
    results = [None, None]

    def one(i):
        results[i] = run_import(host, source, "hx-race")

    threads = [threading.Thread(target=one, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ok = [r for r in results if r.returncode == 0]
    assert len(ok) == 1, [r.stderr[-500:] for r in results]
    loser = next(r for r in results if r.returncode != 0)
    err = assert_one_line_error(loser)
    assert "is being imported by another nearmetal" in err or "exists already" in err
    assert len(os.listdir(host.rootfs("hx-race") / "bulk")) == 3000
    host.unchanged()


# --- root file system directories and SquashFS files -------------------------------------------

def _hostile_rootfs(base, host):
    root = base / "rootfs"
    (root / "etc").mkdir(parents=True)
    (root / "etc/os-release").write_text("ID=hostile\n")
    (root / "usr/bin").mkdir(parents=True)
    (root / "usr/bin/su-evil").write_bytes(b"\x7fELF")
    (root / "usr/bin/su-evil").chmod(0o4755)
    (root / "tmp").mkdir()
    (root / "tmp").chmod(0o1777)
    (root / "shared").mkdir()
    (root / "shared").chmod(0o777)
    (root / "dev").mkdir()
    os.mkfifo(root / "dev/pipe")
    if os.geteuid() == 0:
        os.mknod(root / "dev/mem", 0o666 | stat.S_IFCHR, os.makedev(1, 1))
    (root / "hostlink").symlink_to(host.victim)  # a link to a host path: kept as a link, never followed
    (root / "opt").symlink_to(host.dir)  # image.json goes to /opt/nearmetal: through this, beneath the root
    (root / "nm").symlink_to(host.vdir)  # the mount points /nm/host-mpi and /nm/work too
    (root / "usr/bin/tool").write_bytes(b"#!/bin/sh\n")
    os.link(root / "usr/bin/tool", root / "usr/bin/tool2")
    return root


def _check_hostile_rootfs(host, name, out):
    root = host.rootfs(name)
    host.unchanged()
    assert not os.path.lexists(root / "dev/pipe") and not os.path.lexists(root / "dev/mem")
    assert "left out" in out.stdout and "/dev/pipe (FIFO)" in out.stdout
    assert stat.S_IMODE(os.lstat(root / "usr/bin/su-evil").st_mode) == 0o755
    assert stat.S_IMODE(os.lstat(root / "tmp").st_mode) == 0o1777
    assert stat.S_IMODE(os.lstat(root / "shared").st_mode) == 0o775
    assert os.readlink(root / "hostlink") == str(host.victim)
    inside = root / str(host.dir).lstrip("/")
    assert json.loads((inside / "nearmetal/image.json").read_text())["name"] == name
    assert (root / str(host.vdir).lstrip("/") / "host-mpi").is_dir()


def test_rootfs_directory_with_devices_setuid_and_host_links(tmp_path, host):
    source = _hostile_rootfs(tmp_path, host)
    out = imported(run_import(host, source, "hx-dir"))
    _check_hostile_rootfs(host, "hx-dir", out)
    root = host.rootfs("hx-dir")
    assert os.stat(root / "usr/bin/tool").st_ino == os.stat(root / "usr/bin/tool2").st_ino  # hard links kept
    assert stat.S_IMODE(os.lstat(source / "usr/bin/su-evil").st_mode) == 0o4755  # the source is left as it was


def test_squashfs_and_sif_with_devices_setuid_and_host_links(tmp_path, host, monkeypatch):
    source = _hostile_rootfs(tmp_path, host)
    if os.path.lexists(source / "dev/mem"):
        os.unlink(source / "dev/mem")
    (source / "etc/data.bin").write_bytes(os.urandom(4000))
    sqfs = tmp_path / "image.sqfs"
    subprocess.run(["mksquashfs", str(source), str(sqfs), "-noappend", "-no-progress", "-comp", "gzip",
                    "-p", "dev/mem c 666 root root 1 1"], check=True, capture_output=True)
    out = imported(run_import(host, sqfs, "hx-sqfs"))
    _check_hostile_rootfs(host, "hx-sqfs", out)
    assert "/dev/mem (character device)" in out.stdout
    sif = tmp_path / "image.sif"  # the same file system as a SIF's primary partition
    make_sif(sif, [(SIF.FS_SQUASH, SIF.PART_PRIMSYS, sqfs.read_bytes())])
    out = imported(run_import(host, sif, "hx-sif"))
    _check_hostile_rootfs(host, "hx-sif", out)
    assert json.loads((host.rootfs("hx-sif").parent / "image.json").read_text())["imported"]["kind"] == "SIF"
    # A SIF given to `run --image` is inspected through a read-only extraction: the same check.
    monkeypatch.setenv("NEARMETAL_HOME", str(host.home))
    copy, _ = SIF.extracted(sif)
    assert not os.path.lexists(copy / "dev/mem") and not os.path.lexists(copy / "dev/pipe")
    assert stat.S_IMODE(os.lstat(copy / "usr/bin/su-evil").st_mode) == 0o755
    assert (copy / str(host.vdir).lstrip("/") / "host-mpi").is_dir()  # /nm links to a host path: made inside
    err = assert_one_line_error(run_import(host, sqfs, "hx-sqfs-small", "--max-size", "1K"))
    assert "larger than 1 KiB" in err
    host.unchanged()


def test_describing_the_image_reads_its_files_beneath_its_root(tmp_path, host):
    """What image.json records is read from the image: its links to host files (a host
    os-release, /dev/zero for dpkg's status) are resolved beneath its root, never followed."""
    hosts_release = host.dir / "os-release"
    hosts_release.write_text('PRETTY_NAME="the host secret"\nID=host\n')
    evil = layer(("etc/.wh.os-release", "file"), ("etc/os-release", "sym", {"target": str(hosts_release)}),
                 ("var/lib/dpkg/status", "sym", {"target": "/dev/zero"}),
                 ("var/lib/dpkg/info", "sym", {"target": "/proc/self/fd"}))
    host.before = host.state()
    out = imported(run_import(host, docker_archive(tmp_path / "a.tar", [BASE, evil]), "hx-describe", timeout=120))
    meta = json.loads((host.rootfs("hx-describe").parent / "image.json").read_text())
    assert "host secret" not in json.dumps(meta) and "host secret" not in out.stdout
    host.unchanged()


def test_a_directory_holding_the_images_directory_is_refused(host):
    host.home.mkdir()
    err = assert_one_line_error(run_import(host, host.home.parent, "hx-self"))
    assert "holds nearmetal's own images directory" in err
    host.unchanged()


def test_a_killed_imports_leftovers_are_removed_by_the_next_import(tmp_path, host):
    stale = host.home / "images" / ".hx-stale.import-99999999" / "rootfs"
    stale.mkdir(parents=True)
    (stale / "half").write_text("half an image\n")
    (stale.parent / "link").symlink_to(host.vdir)  # removed as a link, never followed
    imported(run_import(host, docker_archive(tmp_path / "a.tar", [BASE]), "hx-stale"))
    assert not os.path.lexists(stale.parent)
    host.unchanged()
