"""SIF reading without Apptainer (image/sif.py): the header and descriptor layout of the SIF
v2 format, written here byte for byte, and every way a file can fail to be a usable SIF."""

import struct

import pytest

from nearmetal.errors import NearmetalError
from nearmetal.image import sif

pytestmark = pytest.mark.unit


def make_sif(path, partitions, descriptors_total=None, cut=None):
    """A SIF file: header, a descriptor table, then each (fstype, parttype, payload) as data."""
    total = descriptors_total or len(partitions)
    desc_off = sif.HEADER.size
    data_off = desc_off + total * sif.DESCRIPTOR.size
    table, data = b"", b""
    for i, (fstype, parttype, payload) in enumerate(partitions):
        extra = sif.PARTITION_EXTRA.pack(fstype, parttype, b"amd64"[:3]).ljust(384, b"\0")
        table += sif.DESCRIPTOR.pack(sif.DATA_PARTITION, True, i + 1, 0, 0, data_off + len(data), len(payload),
                                     len(payload), 0, 0, 0, 0, f"part{i}".encode().ljust(128, b"\0"), extra)
        data += payload
    table = table.ljust(total * sif.DESCRIPTOR.size, b"\0")
    header = sif.HEADER.pack(b"#!/usr/bin/env run-singularity\n".ljust(32, b"\0"), sif.MAGIC, b"01\0", b"2\0\0",
                             bytes(16), 0, 0, 0, total, desc_off, total * sif.DESCRIPTOR.size, data_off, len(data))
    blob = header + table + data
    path.write_bytes(blob[:cut] if cut else blob)
    return data_off


def test_finds_the_primary_squashfs_partition(tmp_path):
    f = tmp_path / "a.sif"
    off = make_sif(f, [(sif.FS_SQUASH, 1, b"hsqs-system"), (sif.FS_SQUASH, sif.PART_PRIMSYS, b"hsqs-primary")])
    part = sif.primary_partition(f)
    assert part.offset == off + len(b"hsqs-system") and part.size == len(b"hsqs-primary") and part.arch == "amd"


@pytest.mark.parametrize("content, message", [
    (b"", "is not a SIF image (no SIF_MAGIC header)"),
    (b"x" * 4096, "is not a SIF image (no SIF_MAGIC header)"),
])
def test_not_a_sif(tmp_path, content, message):
    f = tmp_path / "x.sif"
    f.write_bytes(content)
    with pytest.raises(NearmetalError, match=message.replace("(", r"\(").replace(")", r"\)")):
        sif.primary_partition(f)


def test_truncated_sif(tmp_path):
    f = tmp_path / "t.sif"
    make_sif(f, [(sif.FS_SQUASH, sif.PART_PRIMSYS, b"hsqs" + bytes(1000))], cut=-10)
    with pytest.raises(NearmetalError, match="truncated SIF"):
        sif.primary_partition(f)
    g = tmp_path / "t2.sif"
    make_sif(g, [(sif.FS_SQUASH, sif.PART_PRIMSYS, b"hsqs")], cut=sif.HEADER.size + 10)
    with pytest.raises(NearmetalError, match="truncated SIF"):
        sif.primary_partition(g)


def test_primary_partition_that_is_not_squashfs(tmp_path):
    f = tmp_path / "c.sif"
    make_sif(f, [(sif.FS_SQUASH, sif.PART_PRIMSYS, b"ext3-not-squash")])
    with pytest.raises(NearmetalError, match="not a SquashFS file system"):
        sif.primary_partition(f)


def test_no_squashfs_root(tmp_path):
    f = tmp_path / "e.sif"
    make_sif(f, [(2, sif.PART_PRIMSYS, b"ext3 data")])  # FsExt3
    with pytest.raises(NearmetalError, match="without a SquashFS root file system"):
        sif.primary_partition(f)


def test_corrupt_descriptor_table(tmp_path):
    f = tmp_path / "d.sif"
    make_sif(f, [(sif.FS_SQUASH, sif.PART_PRIMSYS, b"hsqs")])
    blob = bytearray(f.read_bytes())
    struct.pack_into("<q", blob, 32 + 10 + 3 + 3 + 16 + 8 * 3, 10**9)  # descriptors total
    f.write_bytes(bytes(blob))
    with pytest.raises(NearmetalError, match="corrupt SIF header"):
        sif.primary_partition(f)


def test_foreign_name_is_short_stable_and_tells_files_apart(tmp_path):
    from pathlib import Path

    from nearmetal.image.store import foreign_name

    a = foreign_name(Path("/x/My App!.sif"), "sha256:0123456789abcdef")
    assert a == "my-app-01234567"
    assert foreign_name(Path("/y/My App!.sif"), "sha256:fedcba9876543210") != a


@pytest.mark.parametrize("packages, name_given, message", [
    (["hello", "Bad;x"], True, "'Bad;x' is not a Debian package name"),
    (["-x"], True, "'-x' is not a Debian package name"),
    (["a\nb"], True, "is not a Debian package name"),
    (["hello"], False, "--packages makes an image of its own: give it a --name"),
    (["p"] * 201, True, "at most 200 packages"),
    (["", "", "", ""], True, "an empty package name"),  # --packages ',,,'
    (["gromacs", " "], True, "an empty package name"),   # --packages 'gromacs, '
])
def test_extra_package_names_are_checked(packages, name_given, message):
    from nearmetal.image.recipe import check_packages

    with pytest.raises(NearmetalError, match=message.replace("(", r"\(")):
        check_packages(packages, name_given)


def test_extra_packages_come_after_the_recipes_once():
    from nearmetal.image.recipe import check_packages, packages

    assert check_packages([" gromacs", "hpcc "], True) == ["gromacs", "hpcc"]
    got = packages(["mpich"], ["hpcc", "gcc", "hpcc"])
    assert got[-1] == "hpcc" and got.count("gcc") == 1 and got.count("hpcc") == 1


def test_an_extraction_made_before_the_check_is_not_reused(tmp_path, monkeypatch):
    """A version-1 extraction (before tree_import.check_unpacked) may hold device nodes and
    setuid files as the SIF had them: extracted() must not hand it out again."""
    monkeypatch.setenv("NEARMETAL_HOME", str(tmp_path / "home"))
    f = tmp_path / "old.sif"
    make_sif(f, [(sif.FS_SQUASH, sif.PART_PRIMSYS, b"hsqs" + bytes(100))])
    digest = sif.file_digest(f)
    old = tmp_path / "home" / "sif" / digest.split(":", 1)[1][:24]
    (old / "rootfs").mkdir(parents=True)
    (old / "extracted.json").write_text('{"version": 1}')
    monkeypatch.setattr(sif.shutil, "which", lambda name: None)  # no unsquashfs: no process in the unit tier
    with pytest.raises(NearmetalError, match="needs unsquashfs"):
        sif.extracted(f)
