"""discovery.cache.per_file: a value remembered per file while the file is unchanged."""

import os

import pytest

from nearmetal.discovery.cache import per_file

pytestmark = pytest.mark.unit


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("NEARMETAL_HOME", str(tmp_path / "home"))
    return tmp_path


def counting(value):
    calls = []

    def compute():
        calls.append(1)
        return value

    return compute, calls


def test_computed_once_while_the_file_is_unchanged(home):
    prog = home / "prog"
    prog.write_bytes(b"one")
    compute, calls = counting("openmpi")
    assert per_file("abi", str(prog), compute) == "openmpi"
    assert per_file("abi", str(prog), compute) == "openmpi"
    assert len(calls) == 1


def test_a_changed_file_is_read_again(home):
    prog = home / "prog"
    prog.write_bytes(b"one")
    per_file("abi", str(prog), lambda: "openmpi")
    prog.write_bytes(b"longer now")  # size differs even when mtime's granularity hides the write
    assert per_file("abi", str(prog), lambda: "mpich") == "mpich"


def test_none_is_remembered_and_links_share_their_target(home):
    prog = home / "prog"
    prog.write_bytes(b"x")
    os.symlink(prog, home / "alias")
    compute, calls = counting(None)
    assert per_file("abi", str(prog), compute) is None
    assert per_file("abi", str(home / "alias"), compute) is None
    assert len(calls) == 1


def test_a_missing_file_is_never_remembered(home):
    compute, calls = counting(None)
    per_file("abi", str(home / "absent"), compute)
    per_file("abi", str(home / "absent"), compute)
    assert len(calls) == 2


def test_the_table_keeps_the_most_recent_files(home):
    files = []
    for i in range(5):
        f = home / f"p{i}"
        f.write_bytes(b"x")
        files.append(f)
        per_file("abi", str(f), lambda: "openmpi", keep=3)
    compute, calls = counting("openmpi")
    per_file("abi", str(files[4]), compute, keep=3)  # kept
    per_file("abi", str(files[0]), compute, keep=3)  # dropped: read again
    assert len(calls) == 1


def test_a_damaged_table_is_rebuilt(home):
    prog = home / "prog"
    prog.write_bytes(b"x")
    (home / "home" / "cache").mkdir(parents=True)
    (home / "home" / "cache" / "abi.marshal").write_bytes(b"\x00garbage")
    assert per_file("abi", str(prog), lambda: "mpich") == "mpich"
    compute, calls = counting("other")
    assert per_file("abi", str(prog), compute) == "mpich" and not calls
