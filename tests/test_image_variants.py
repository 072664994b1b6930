"""A variant's image format, placement and cold starts (study/execute/image_variant.py; seed 002).
Real studies: the ranks' root file system is the copy placed in the chosen directory (the
container's own mount table says so), a SquashFS variant runs from the .sqfs, every copy is
removed when the study ends, and a cold variant's context records the dropped page cache."""

import json
import os
import sqlite3

import pytest

from conftest import nearmetal

STUDY = """
[study]
name = "img"
repetitions = 2
warmup = 0
[baseline]
mode = "hybrid"
[matrix]
mode = ["hybrid"]
runtime = ["charliecloud"]
mpi = ["mpich"]
image_format = ["default", "squashfs"]
image_place = ["", "{place}"]
cold = {cold}
[[benchmark]]
name = "root"
command = ["sh", "-c", "awk '$5 == \\"/\\"' /proc/self/mountinfo > root.txt"]
ranks = [1]
"""


def contexts(db):
    with sqlite3.connect(db) as c:
        return [json.loads(r[0]) for r in c.execute("SELECT context_json FROM contexts")]


def test_the_ranks_read_the_image_from_where_it_was_placed(tmp_path, default_image):
    place = tmp_path / "fs-under-test"
    place.mkdir()
    study = tmp_path / "s.toml"
    study.write_text(STUDY.format(place=place, cold="[false]"))
    out = nearmetal("study", study, "--db", tmp_path / "r" / "study.db", cwd=tmp_path)
    assert out.returncode == 0, out.stderr + out.stdout
    roots = {p.parent.name: p.read_text() for p in (tmp_path / "r" / "nm-runs").glob("*/root.txt")}
    assert len(roots) == 4, roots
    (line,) = [t for k, t in roots.items() if "in-fs-under-test" in k and "squashfs" not in k]
    # mountinfo: ID PARENT MAJ:MIN ROOT MOUNTPOINT ...: the bind's ROOT is the copy's path in its fs
    assert f"{place}/nearmetal-images-" in line.split(" - ")[0] or " /nearmetal-images-" in line, line
    (home,) = [t for k, t in roots.items() if k.endswith("_default")]
    assert "/nearmetal-images-" not in home and "/rootfs / " in home
    assert all(" - fuse" in t for k, t in roots.items() if "squashfs" in k)  # ch-run's squashfuse
    ctx = [c["image"] for c in contexts(tmp_path / "r" / "study.db") if "image" in c]
    paths = sorted(c["path"] for c in ctx if "path" in c)  # the default image as it is records no path
    assert len(paths) == 3 and sum(p.startswith(f"{place}/nearmetal-images-") for p in paths) == 2
    assert sum(p.endswith(".sqfs") for p in paths) == 2 and {c.get("format") for c in ctx} == {None, "dir", "squashfs"}
    assert list(place.iterdir()) == []  # the copies are gone with the study


def test_cold_runs_drop_the_page_cache_first_and_say_so(tmp_path, default_image):
    study = tmp_path / "s.toml"
    study.write_text(STUDY.format(place="/dev/shm", cold="[false, true]").replace('image_format = ["default", "squashfs"]',
                                                                             'image_format = ["squashfs"]')
                     .replace('mode = "hybrid"\n[matrix]', 'mode = "native"\n[matrix]')
                     .replace('mode = ["hybrid"]', 'mode = ["native", "hybrid"]'))
    out = nearmetal("study", study, "--db", tmp_path / "r" / "study.db", cwd=tmp_path)
    assert out.returncode == 0, out.stderr + out.stdout
    ctx = contexts(tmp_path / "r" / "study.db")
    assert len(ctx) == 6 and sum(c.get("cold_cache") is True for c in ctx) == 3  # native, hybrid x 2 places
    placed = [c["image"]["path"] for c in ctx if (c.get("image") or {}).get("place") == "/dev/shm"]
    assert len(placed) == 2 and all(p.startswith("/dev/shm/nearmetal-images-") for p in placed)
    assert not any(os.path.exists(os.path.dirname(p)) for p in placed)  # removed with the study


def test_an_image_without_the_asked_format_refuses_its_runs(tmp_path, bullseye_image):
    study = tmp_path / "s.toml"
    study.write_text(f"""
[study]
name = "img"
repetitions = 2
warmup = 0
[matrix]
mode = ["native", "hybrid"]
mpi = ["mpich"]
image = ["{bullseye_image.name}"]
image_format = ["sif"]
[[benchmark]]
kernel = "startup"
""")
    out = nearmetal("study", study, "--db", tmp_path / "r" / "study.db", cwd=tmp_path)
    assert out.returncode == 0 and "2 failed" in out.stderr, out.stderr  # failed runs, with the reason
    with sqlite3.connect(tmp_path / "r" / "study.db") as c:
        tails = [r[0] for r in c.execute("SELECT stderr_tail FROM runs WHERE variant LIKE 'hybrid%'")]
        native = [r[0] for r in c.execute("SELECT status FROM runs WHERE variant LIKE 'native%'")]
    assert native == ["ok", "ok"]
    assert len(tails) == 2 and all(f"image '{bullseye_image.name}' has no sif form: build one with "
                                   f"`nearmetal image build --format sif --name {bullseye_image.name}`" in t
                                   for t in tails), tails


@pytest.mark.unit
def test_image_dimensions_name_their_variants_and_stay_off_for_native():
    from conftest import planned_variants

    _, ids = planned_variants('image_format = ["default", "squashfs"]\nimage_place = ["", "/dev/shm"]\n'
                              'cold = [false, true]')
    assert "native/mpich" in ids and "native/mpich+cold" in ids and not any(i.startswith("native/mpich+squashfs")
                                                                            for i in ids)
    assert "hybrid/charliecloud/mpich/default+squashfs+in-shm-" in " ".join(ids)
    assert len(ids) == 2 + 8
    from nearmetal.errors import NearmetalError

    for bad, key in (('image_format = ["ext3"]', "matrix.image_format[0]"), ("cold = [1]", "matrix.cold[0]")):
        with pytest.raises(NearmetalError) as e:
            planned_variants(bad)
        assert key in str(e.value)


@pytest.mark.unit
def test_exclusions_reach_the_optional_dimensions():
    from conftest import planned_variants

    _, ids = planned_variants('image_place = ["", "/dev/shm/"]\ncold = [false, true]\n'
                              'exclude = [{mode = "native", cold = true}, {image_place = "/dev/shm/", cold = false}]',
                              '[[variant]]\nname = "named-warm"\nmode = "hybrid"\nmpi = "mpich"\n')
    assert "native/mpich+cold" not in ids and "named-warm" in ids
    placed = [i for i in ids if "+in-shm-" in i]
    assert placed and all(i.endswith("+cold") for i in placed)


@pytest.mark.unit
def test_cold_and_placement_are_refused_with_a_batch_scheduler():
    from nearmetal.errors import NearmetalError
    from nearmetal.study.plan.study_file import parse

    with pytest.raises(NearmetalError) as e:
        parse('[study]\nname = "a"\nscheduler = "slurm"\n[matrix]\nmode = ["native"]\ncold = [false, true]\n'
              '[[benchmark]]\nkernel = "startup"\n', source="a.toml")
    assert "study.scheduler: cold act on this machine" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.unit
def test_a_placed_copy_is_removed_even_when_cut_short(tmp_path, monkeypatch):
    import shutil

    from nearmetal.errors import NearmetalError
    from nearmetal.study.execute import image_variant

    source = tmp_path / "img.sqfs"
    source.write_bytes(b"x" * 4096)
    place = tmp_path / "place"
    place.mkdir()
    placer = image_variant.Placer()
    target = placer.place(str(source), str(place), "../evil/name", "squashfs")
    assert os.path.dirname(os.path.dirname(target)) == str(place) and "/../" not in target
    assert os.path.basename(target).startswith("_evil_name-") and open(target, "rb").read() == source.read_bytes()
    assert placer.place(str(source), str(place), "../evil/name", "squashfs") == target  # made once
    placer.close()
    assert list(place.iterdir()) == []

    def cut_short(src, dst, **kw):
        with open(dst, "wb") as f:
            f.write(b"partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(shutil, "copy2", cut_short)
    placer = image_variant.Placer()
    with pytest.raises(KeyboardInterrupt):
        placer.place(str(source), str(place), "img", "squashfs")
    placer.close()  # what the executor does on the way out
    assert list(place.iterdir()) == []
    with pytest.raises(NearmetalError, match="no such directory"):
        image_variant.Placer().place(str(source), str(tmp_path / "missing"), "img", "squashfs")
    assert image_variant.Placer(dry=True).place(str(source), str(place), "img", "squashfs") == str(source)
    assert list(place.iterdir()) == []
