"""trace/command.py collect(): which files in the ranks' staging directory become the trace.
Under `trace --user` that directory is writable by the account the ranks run as, so what it
holds is not nearmetal's to trust: links, FIFOs, directories, hard links and sparse files
named as trace files are left out, one line each, and the rest is kept."""

import json
import os

import pytest

from nearmetal.trace import command

pytestmark = pytest.mark.unit


def _stage(tmp_path):
    stage, out = tmp_path / "stage", tmp_path / "out"
    stage.mkdir()
    out.mkdir()
    return stage, out


def test_only_regular_files_with_one_link_are_taken_each_other_entry_said_once(tmp_path, capsys):
    stage, out = _stage(tmp_path)
    (stage / "trace-h-1.nmt").write_bytes(b"rank one")
    secret = tmp_path / "secret"
    secret.write_bytes(b"root only")
    os.symlink(secret, stage / "trace-h-2.nmt")
    os.link(secret, stage / "trace-h-3.nmt")
    os.mkfifo(stage / "trace-h-4.nmt")  # opened without O_NONBLOCK, this waited for ever
    (stage / "trace-h-5.nmt").mkdir()  # os.fdopen raised IsADirectoryError: no file after it was kept
    (stage / "trace-h-6.nmt").write_bytes(b"rank six")
    (stage / "other.txt").write_bytes(b"not a trace file")
    assert command.collect(str(stage), str(out), {"argv": ["p"]}) == 2
    assert sorted(p.name for p in out.iterdir()) == ["meta.json", "trace-h-1.nmt", "trace-h-6.nmt"]
    assert (out / "trace-h-6.nmt").read_bytes() == b"rank six" and secret.read_bytes() == b"root only"
    assert json.loads((out / "meta.json").read_text()) == {"argv": ["p"]} and not stage.exists()
    said = capsys.readouterr().err.splitlines()
    assert [line.split()[2] for line in said] == [f"trace-h-{k}.nmt" for k in (2, 3, 4, 5)], said
    assert all(line.startswith("nearmetal trace: trace-h-") and " left out: " in line for line in said)


def test_another_accounts_file_is_copied_into_one_of_nearmetals_own_and_a_sparse_one_left_out(tmp_path, monkeypatch, capsys):
    stage, out = _stage(tmp_path)
    (stage / "trace-h-1.nmt").write_bytes(b"x" * 3000)
    with open(stage / "trace-h-2.nmt", "wb") as f:
        f.truncate(command.SPARSE_FROM * 4)  # a hole of 256 MiB: not copied
    monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 1)  # the files are another account's
    assert command.collect(str(stage), str(out), {}) == 1
    copied = out / "trace-h-1.nmt"
    assert copied.read_bytes() == b"x" * 3000 and not copied.is_symlink()
    assert "trace-h-2.nmt left out: a sparse file of" in capsys.readouterr().err


def test_a_studys_traced_run_keeps_its_files_and_says_what_was_left_out(tmp_path):
    from nearmetal.study.config.traced import _move

    stage, out = _stage(tmp_path)
    (stage / "trace-h-1.nmt").write_bytes(b"rank one")
    os.mkfifo(stage / "trace-h-2.nmt")
    assert _move(str(stage), str(out)) == (1, {"trace-h-2.nmt": "not a regular file with one link"})
    assert [p.name for p in out.iterdir()] == ["trace-h-1.nmt"]
