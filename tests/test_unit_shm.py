"""discovery/shm.py: /dev/shm as MPI jobs see it, and the stale segments `doctor` reports
and `doctor --clean-shm` removes. Unit: a directory of the test's stands for /dev/shm; the
'in use' answer is this process's own open file, found through the real /proc."""

import os
import re
import time
from pathlib import Path

import pytest

from nearmetal.discovery import shm

pytestmark = pytest.mark.unit


def test_stale_means_a_segment_name_of_this_account_unused_and_old(tmp_path):
    for name in ("vader_segment.h.1.0", "ucx_shm_posix_1a2b", "mpich_shar_tmpAbC123", "held.x", "notes.txt"):
        (tmp_path / name).write_bytes(b"x" * 10)
    (tmp_path / "vader_segment.h.1.held").write_bytes(b"y" * 7)
    (tmp_path / "open_mpi.0001").mkdir()  # not a regular file
    os.symlink(tmp_path / "notes.txt", tmp_path / "vader_segment.h.1.link")
    later = time.time() + 2 * shm.MIN_AGE_S
    with open(tmp_path / "vader_segment.h.1.held"):  # another job's live segment: open by a process
        assert sorted(shm.stale_segments(tmp_path, now=later)) == [
            ("mpich_shar_tmpAbC123", 10), ("ucx_shm_posix_1a2b", 10), ("vader_segment.h.1.0", 10)]
        assert shm.stale_segments(tmp_path) == []  # made just now: a job may still be starting
        assert shm.stale_segments(tmp_path, uid=os.getuid() + 1, now=later) == []  # another account's: never
        assert shm.remove_stale(tmp_path, now=later) == (3, 30)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "held.x", "notes.txt", "open_mpi.0001", "vader_segment.h.1.held", "vader_segment.h.1.link"]


def test_a_segment_made_again_after_the_check_is_not_removed(tmp_path, monkeypatch):
    """Between the check and the unlink a job may remove the stale file and make a new one
    of the same name, or open and truncate it: the new job's segment stays."""
    seg = tmp_path / "vader_segment.h.3.0"
    seg.write_bytes(b"old")
    st = seg.stat()
    checked = [(seg.name, 3, shm._identity(st))]
    seg.rename(tmp_path / "moved")  # the old inode lives on, so the new file cannot reuse its number
    seg.write_bytes(b"new job")
    monkeypatch.setattr(shm, "_stale", lambda directory, uid, now: checked)
    assert shm.remove_stale(tmp_path) == (0, 0)
    assert seg.read_bytes() == b"new job"
    st = seg.stat()
    checked[:] = [(seg.name, 7, shm._identity(st))]
    os.truncate(seg, 0)  # the same file, truncated since the check (a new job of the same name): it stays
    assert shm.remove_stale(tmp_path) == (0, 0) and seg.exists()
    checked[:] = [(seg.name, 0, shm._identity(seg.stat()))]
    assert shm.remove_stale(tmp_path) == (1, 0) and not seg.exists()


def test_in_use_is_known_by_the_file_not_its_path(tmp_path):
    """Compared as text, a segment held through another path (a /dev/shm that is a link) or
    whose name has a space looked unused, and --clean-shm removed a live job's segment."""
    real = tmp_path / "real"
    real.mkdir()
    (real / "vader_segment.h.2.a b").write_bytes(b"x")
    (real / "sm_segment.h.0.1.0").write_bytes(b"x")
    (tmp_path / "link").symlink_to(real)
    later = time.time() + 2 * shm.MIN_AGE_S
    with open(real / "vader_segment.h.2.a b"), open(real / "sm_segment.h.0.1.0"):
        assert shm.stale_segments(tmp_path / "link", now=later) == []
        assert shm.stale_segments(real, now=later) == []
    assert sorted(shm.stale_segments(tmp_path / "link", now=later)) == [("sm_segment.h.0.1.0", 1),
                                                                        ("vader_segment.h.2.a b", 1)]


def test_describe_gives_size_free_space_and_stale_count(tmp_path):
    d = shm.describe(tmp_path)
    assert d["path"] == str(tmp_path) and d["total_bytes"] >= d["free_bytes"] > 0 and d["stale_segments"] == 0
    assert shm.describe(tmp_path / "missing") is None


def test_the_keeper_removes_the_same_names_doctor_reports():
    """nm-supervise's keeper (C) and doctor (Python) name the same MPI segments (doctor also
    ch-run's join files, which only an age tells from a live job's)."""
    from nearmetal import supervise

    c = Path(supervise.__file__).with_name("nm-supervise-shm.c").read_text()
    listed = c.split("leftover_prefixes[] = {", 1)[1].split("NULL", 1)[0]
    assert tuple(re.findall(r'"([^"]+)"', listed)) == shm.SEGMENT_PREFIXES


def test_doctor_says_what_is_wrong_with_dev_shm_and_the_fix(capsys):
    from nearmetal import doctor
    from nearmetal.console import Console

    healthy = {"path": "/dev/shm", "total_bytes": 8 << 30, "free_bytes": 8 << 30, "stale_segments": 0, "stale_bytes": 0}
    doctor.render_shm(healthy, 64, Console())
    out = capsys.readouterr().out
    assert "/dev/shm: 8,192 MiB, 8,192 MiB free" in out and "hazard" not in out
    doctor.render_shm(dict(healthy, free_bytes=100 << 20, stale_segments=3, stale_bytes=12 << 20), 64, Console())
    out = " ".join(capsys.readouterr().out.split())
    assert "100 MiB free is less than a full node's ranks use (64 x 4 MiB" in out
    assert "3 MPI segments (12.0 MiB) of yours that no process uses" in out and "nearmetal doctor --clean-shm" in out
