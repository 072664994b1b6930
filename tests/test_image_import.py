"""image import: every source kind, made in the test from a debootstrap rootfs (nearmetal's
Debian 11 MPICH image, its own record removed so it is foreign): a rootfs directory, a
docker archive, an OCI layout (two layers, the second with whiteouts) and an OCI archive,
a SquashFS file and a SIF. Each import is described, listed, and runs."""

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile

import pytest

from conftest import assert_one_line_error, nearmetal

pytestmark = pytest.mark.integration


def _blob(layout, data):
    digest = hashlib.sha256(data).hexdigest()
    (layout / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
    (layout / "blobs" / "sha256" / digest).write_bytes(data)
    return {"digest": f"sha256:{digest}", "size": len(data)}


@pytest.fixture(scope="module")
def sources(tmp_path_factory, bullseye_image):
    base = tmp_path_factory.mktemp("import")
    rootfs = base / "rootfs"
    subprocess.run(["cp", "-a", f"{bullseye_image.rootfs}/.", str(rootfs)], check=True)
    for junk in ("usr/share/doc", "usr/share/locale", "usr/share/man", "usr/include", "var/cache/apt"):
        shutil.rmtree(rootfs / junk, ignore_errors=True)
    (rootfs / ".nearmetal-image.json").unlink(missing_ok=True)
    for p in rootfs.glob(".nearmetal*"):
        p.unlink()
    (rootfs / "etc" / "obsolete.conf").write_text("removed by the second layer\n")
    layer1 = base / "layer1.tar"
    with tarfile.open(layer1, "w") as t:
        t.add(rootfs, arcname=".")
    second = io.BytesIO()
    with tarfile.open(fileobj=second, mode="w") as t:
        info = tarfile.TarInfo("etc/.wh.obsolete.conf")
        t.addfile(info, io.BytesIO(b""))
        data = b"added by the second layer\n"
        info = tarfile.TarInfo("etc/added.conf")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    layer2 = gzip.compress(second.getvalue())
    # docker save: manifest.json + one layer
    docker = base / "docker.tar"
    with tarfile.open(docker, "w") as t:
        manifest = json.dumps([{"Config": "config.json", "RepoTags": ["x:1"], "Layers": ["l1/layer.tar"]}]).encode()
        for name, data in (("manifest.json", manifest), ("config.json", b"{}")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
        t.add(layer1, arcname="l1/layer.tar")
    # OCI layout: index -> manifest -> two layers
    layout = base / "oci"
    layout.mkdir()
    (layout / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    config = _blob(layout, b'{"architecture": "amd64", "os": "linux"}')
    l1 = _blob(layout, layer1.read_bytes())
    l2 = _blob(layout, layer2)
    man = _blob(layout, json.dumps({"schemaVersion": 2, "config": config, "layers": [
        dict(l1, mediaType="application/vnd.oci.image.layer.v1.tar"),
        dict(l2, mediaType="application/vnd.oci.image.layer.v1.tar+gzip")]}).encode())
    (layout / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [
        dict(man, mediaType="application/vnd.oci.image.manifest.v1+json", platform={"architecture": "amd64", "os": "linux"})]}))
    oci_archive = base / "oci.tar"
    with tarfile.open(oci_archive, "w") as t:
        for p in sorted(layout.rglob("*")):
            t.add(p, arcname=str(p.relative_to(layout)), recursive=False)
    sqfs = base / "image.sqfs"
    subprocess.run(["mksquashfs", str(rootfs), str(sqfs), "-noappend", "-comp", "lz4", "-no-progress"], check=True,
                   capture_output=True)
    return {"rootfs": rootfs, "docker": docker, "oci": layout, "oci-archive": oci_archive, "sqfs": sqfs}


def _import(source, name):
    from nearmetal.image import images_dir

    shutil.rmtree(images_dir() / name, ignore_errors=True)
    out = nearmetal("image", "import", str(source), "--name", name, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    return images_dir() / name


@pytest.mark.parametrize("kind, expect", [("rootfs", "rootfs directory"), ("docker", "docker archive"),
                                          ("oci", "OCI layout"), ("oci-archive", "OCI archive"), ("sqfs", "SquashFS")])
def test_import_each_kind_describes_lists_and_runs(sources, kind, expect):
    name = f"nm-test-imp-{kind}"
    path = _import(sources[kind], name)
    try:
        meta = json.loads((path / "image.json").read_text())
        assert meta["imported"]["kind"] == expect and meta["imported"]["from"] == str(sources[kind])
        assert meta["mpis"] == ["mpich"] and meta["glibc"] == "2.31" and meta["distro"] == "bullseye"
        assert (path / "rootfs" / "nm" / "host-mpi").is_dir() and (path / "rootfs" / "nm" / "work").is_dir()
        if kind.startswith("oci"):  # the second layer's whiteout and addition
            assert not (path / "rootfs" / "etc" / "obsolete.conf").exists()
            assert (path / "rootfs" / "etc" / "added.conf").read_text() == "added by the second layer\n"
        assert (path / "rootfs" / "tmp").stat().st_mode & 0o1000  # modes as the image had them
        listing = [l.split("\t") for l in nearmetal("image", "list", check=True).stdout.splitlines()]
        row = next(r for r in listing if r[0] == name)
        assert row[2] == "mpich" and row[-1] == f"imported from {sources[kind]}"
        out = nearmetal("run", "--mode", "hybrid", "--image", name, "--mpi", "mpich", "--", "nm-latency", "-m", "8:8")
        assert out.returncode == 0 and out.stdout.strip().splitlines()[-1].split()[0] == "8", out.stderr[-2000:]
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_import_a_sif(sources):
    from nearmetal import runtimes

    apptainer = runtimes.get("apptainer").path()
    if not apptainer:
        pytest.fail("Apptainer is needed to make the SIF (scripts/setup.sh builds it)")
    sif = sources["rootfs"].parent / "image.sif"
    subprocess.run([apptainer, "build", "--force", str(sif), str(sources["rootfs"])], check=True, capture_output=True,
                   env={"PATH": "/usr/bin:/bin", "APPTAINER_DROP_CAPS": "CAP_SYS_RESOURCE"}, timeout=600)
    path = _import(sif, "nm-test-imp-sif")
    try:
        meta = json.loads((path / "image.json").read_text())
        assert meta["imported"]["kind"] == "SIF" and meta["mpis"] == ["mpich"]
        assert meta["imported"]["from"] == str(sif)
        # the SIF is kept as the image's sif copy, and `image list` says so
        digest = "sha256:" + hashlib.sha256(sif.read_bytes()).hexdigest()
        assert meta["sif_digest"] == digest == meta["digest"]
        assert (path / "nm-test-imp-sif.sif").read_bytes() == sif.read_bytes()
        listing = [l.split("\t") for l in nearmetal("image", "list", check=True).stdout.splitlines()]
        row = next(r for r in listing if r[0] == "nm-test-imp-sif")
        assert row[3] == "dir,sif" and row[-1] == f"imported from {sif}"
        # naming the SIF's path reuses the imported image (by digest): nothing is extracted again
        from nearmetal.home import home

        cache = home() / "sif" / f"{digest.split(':', 1)[1][:24]}-v2"
        out = nearmetal("run", "--mode", "hybrid", "--runtime", "apptainer", "--image", str(sif), "--mpi", "mpich",
                        "-n", "2", "--", "nm-latency", "-m", "8:8")
        assert out.returncode == 0 and out.stdout.strip().splitlines()[-1].split()[0] == "8", out.stderr[-2000:]
        assert not cache.exists()
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_not_an_image_and_a_taken_name(tmp_path, sources):
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"not an image at all\n" * 300)
    assert "is not an image" in assert_one_line_error(nearmetal("image", "import", str(junk), "--name", "nm-x"))
    tar = tmp_path / "files.tar"
    with tarfile.open(tar, "w") as t:
        t.add(junk, arcname="junk.bin")
    assert "no image: it has neither manifest.json" in assert_one_line_error(
        nearmetal("image", "import", str(tar), "--name", "nm-x"))
    assert "exists already" in assert_one_line_error(
        nearmetal("image", "import", str(sources["rootfs"]), "--name", "nm-bullseye-mpich"))
    assert "no such file or directory" in assert_one_line_error(
        nearmetal("image", "import", str(tmp_path / "absent"), "--name", "nm-x"))
    from nearmetal.image import images_dir

    empty, name = tmp_path / "emptydir", f"nm-empty-{os.getpid()}"
    empty.mkdir()
    made = nearmetal("image", "import", str(empty), "--name", name)
    try:  # said in words, not "; ; no MPI; glibc None"
        assert made.returncode == 0 and "no MPI; no glibc found: only static programs run in it)" in made.stdout, made
        assert "None" not in made.stdout and "; ;" not in made.stdout
        err = assert_one_line_error(nearmetal("run", "--mode", "bind", "--image", name, "--", "nm-mpi-info"))
        assert f"image '{name}' has no openmpi (it has no MPI)" in err, err
    finally:
        shutil.rmtree(images_dir() / name, ignore_errors=True)
    assert assert_one_line_error(nearmetal("image", "import", str(junk), "--name", "../evil")) == (
        "nearmetal image import: error: --name '../evil': an image's name is lowercase letters, digits, '.', '_' and '-', "
        "starting with a letter or digit, at most 100")
