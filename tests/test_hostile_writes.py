"""Writes that cannot be redirected (issue 26): every file nearmetal writes into a directory it
did not create goes to a new temporary file renamed over the final name, and a final name
that is a symbolic link (or not a regular file) is refused in one line; a results database
whose path or -journal/-wal/-shm/.lock file is a link is refused; a --study name is checked
as study files' names are, so nothing lands outside results/. Each case plants a link to a
victim file (checksummed) or to a canary path outside the output directory. Unit: the
functions on files in tmp_path; integration: the real `nearmetal report` and `import`."""

import hashlib
import os

import pytest

from conftest import assert_one_line_error, nearmetal
from nearmetal import safe_write
from nearmetal.errors import NearmetalError

CSV = ("variant,metric,unit,size,value\n"
       + "".join(f"{v},t,s,{s},{1.0 + 0.01 * i + (0.5 if v == 'slow' else 0)}\n"
                 for i in range(4) for v in ("base", "slow") for s in (8, 64)))
FILES = {"html": "report.html", "md": "report.md", "csv": "points.csv", "json": "analysis.json"}


def digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


class Outside:
    """A victim file (with its checksum) and a canary path, outside every output directory."""

    def __init__(self, root):
        self.dir = root / "outside"
        self.dir.mkdir()
        self.victim = self.dir / "victim.txt"
        self.victim.write_text("precious\n")
        self.sum = digest(self.victim)
        self.canary = self.dir / "canary"

    def intact(self):
        return digest(self.victim) == self.sum and not self.canary.exists() and \
            sorted(os.listdir(self.dir)) == ["victim.txt"]


@pytest.fixture
def outside(tmp_path):
    return Outside(tmp_path)


def no_leftovers(folder):
    return not [n for n in os.listdir(folder) if n.endswith(".nearmetal-tmp")]


# ------------------------------------------------------------------ the helper (unit)

@pytest.mark.unit
def test_a_new_file_is_written_and_an_old_one_replaced(tmp_path):
    path = tmp_path / "report.md"
    safe_write.write_text(path, "one\n")
    assert path.read_text() == "one\n" and stat_mode(path) == 0o644 & ~current_umask()
    other = tmp_path / "other-name"
    os.link(path, other)  # a hard link: replaced, never written through
    safe_write.write_text(path, "two\n")
    assert path.read_text() == "two\n" and other.read_text() == "one\n" and no_leftovers(tmp_path)


def stat_mode(path):
    return os.stat(path).st_mode & 0o777


def current_umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.unit
@pytest.mark.parametrize("target", ["victim", "canary"])
def test_a_planted_link_is_refused_and_its_target_kept(target, tmp_path, outside):
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(getattr(outside, target), out / "report.html")
    with pytest.raises(NearmetalError, match=r"refusing to write report .*report.html: it is a symbolic link") as e:
        safe_write.write_text(out / "report.html", "<html>", "report")
    assert "\n" not in str(e.value) and outside.intact() and no_leftovers(out)
    assert os.readlink(out / "report.html") == str(getattr(outside, target))  # the link itself left as it was


@pytest.mark.unit
def test_a_directory_or_fifo_at_the_final_name_is_refused(tmp_path):
    (tmp_path / "points.csv").mkdir()
    os.mkfifo(tmp_path / "report.md")
    for name in ("points.csv", "report.md"):
        with pytest.raises(NearmetalError, match="exists and is not a regular file"):
            safe_write.write_text(tmp_path / name, "x")
    assert no_leftovers(tmp_path)


@pytest.mark.unit
def test_a_failed_write_leaves_nothing_behind(tmp_path):
    with pytest.raises(RuntimeError):
        with safe_write.replacing(tmp_path / "report.md") as f:
            f.write(b"half")
            raise RuntimeError("the renderer failed")
    assert os.listdir(tmp_path) == []


@pytest.mark.unit
def test_move_into_replaces_never_follows(tmp_path, outside):
    src = tmp_path / "src"
    src.write_bytes(b"trace")
    os.symlink(outside.victim, tmp_path / "dst")
    with pytest.raises(NearmetalError, match="symbolic link"):
        safe_write.move_into(src, tmp_path / "dst", "trace file")
    os.unlink(tmp_path / "dst")
    safe_write.move_into(src, tmp_path / "dst", "trace file")
    assert (tmp_path / "dst").read_bytes() == b"trace" and not src.exists() and outside.intact()


# ------------------------------------------------------------------ the writers that use it (unit)

@pytest.mark.unit
@pytest.mark.parametrize("fmt", ["md", "csv", "json"])
def test_report_formats_refuse_a_planted_link(fmt, tmp_path, outside):
    from nearmetal.report import write_report
    from synthetic import synthetic_analysis

    small = synthetic_analysis(seed=2, n_variants=2, kernels=("latency",))
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(outside.victim, out / FILES[fmt])
    with pytest.raises(NearmetalError, match="it is a symbolic link"):
        write_report(small, out, fmt)
    assert outside.intact() and no_leftovers(out)
    os.unlink(out / FILES[fmt])
    path = write_report(small, out, fmt)
    assert path.is_file() and path.stat().st_size > 100 and no_leftovers(out)


@pytest.mark.unit
def test_io_best_files_refuse_a_planted_link(tmp_path, outside):
    from nearmetal.io.best import hints_file

    result = {"hints": {"cb_nodes": "2"}, "best": "pattern=shared", "study": "s", "variant": "native",
              "metric": "write_s", "hints_status": {}}
    os.symlink(outside.victim, tmp_path / "best.hints")
    with pytest.raises(NearmetalError, match="hints file .*best.hints: it is a symbolic link"):
        hints_file(result, str(tmp_path / "best.hints"))
    assert outside.intact()
    os.unlink(tmp_path / "best.hints")
    hints_file(result, str(tmp_path / "best.hints"))
    assert (tmp_path / "best.hints").read_text().endswith("cb_nodes 2\n")


# ------------------------------------------------------------------ databases and study names (unit)

@pytest.mark.unit
@pytest.mark.parametrize("suffix", ["", "-journal", "-wal", "-shm", ".lock"])
@pytest.mark.parametrize("readonly", [False, True])
def test_a_database_or_its_files_as_links_are_refused(suffix, readonly, tmp_path, outside):
    from nearmetal.study.store.store import Store

    db = tmp_path / "study.db"
    Store(db).close()  # a real, empty nearmetal store
    if suffix == "":
        os.rename(db, tmp_path / "real.db")
        os.symlink(tmp_path / "real.db", db)
    else:
        for s in ("-wal", "-shm", ".lock"):  # a closed WAL database has no -wal or -shm; the lock file stays
            assert os.path.lexists(f"{db}{s}") == (s == ".lock")
        if suffix == ".lock":
            os.unlink(f"{db}.lock")
        os.symlink(outside.victim, f"{db}{suffix}")
    with pytest.raises(NearmetalError, match=r"refusing results database( file)? .*: it is a symbolic link") as e:
        Store(db, readonly=readonly)
    assert "\n" not in str(e.value) and outside.intact()


@pytest.mark.unit
def test_the_lock_file_is_never_followed(tmp_path, outside):
    from nearmetal.study.store.lock import lock_for_writing

    os.symlink(outside.victim, tmp_path / "study.db.lock")
    with pytest.raises(NearmetalError, match="lock file .* is a symbolic link"):
        lock_for_writing(tmp_path / "study.db", "a test")
    assert outside.intact()


@pytest.mark.unit
@pytest.mark.parametrize("name", ["../../x", "../x", "..", ".", "a/b", "/etc", ".hidden", "", "x" * 65, "a\nb",
                                  "a b", "-x"])
def test_study_names_that_could_leave_results_are_refused(name, tmp_path, monkeypatch):
    import argparse

    from nearmetal.cli_parser import study_name_arg
    from nearmetal.study.store.importer import import_csv
    from nearmetal.study.execute.runner import default_db

    monkeypatch.chdir(tmp_path)
    with pytest.raises(argparse.ArgumentTypeError, match="a study name is 1 to 64 letters"):
        study_name_arg(name)
    with pytest.raises(NearmetalError, match="a study name is 1 to 64 letters"):
        default_db(name)
    (tmp_path / "r.csv").write_text(CSV)
    with pytest.raises(NearmetalError, match="a study name is 1 to 64 letters"):
        import_csv(tmp_path / "r.csv", tmp_path / "db" / "study.db", name, "base")
    assert sorted(os.listdir(tmp_path)) == ["r.csv"]


@pytest.mark.unit
def test_good_study_names_pass(tmp_path):
    from nearmetal.cli_parser import study_name_arg
    from nearmetal.study.execute.runner import default_db

    for name in ("s", "my-study_2.v1", "A" * 64, "0x"):
        assert study_name_arg(name) == name
        assert default_db(name) == __import__("pathlib").Path("results") / name / "study.db"


# ------------------------------------------------------------------ the real command line

@pytest.fixture
def db(tmp_path):
    """A results database made by `nearmetal import`, in a directory of its own."""
    (tmp_path / "r.csv").write_text(CSV)
    path = tmp_path / "dbdir" / "study.db"
    nearmetal("import", tmp_path / "r.csv", "--study", "s", "--baseline", "base", "--db", path, "--out",
              tmp_path / "first", check=True, timeout=300, cwd=tmp_path)
    return path


@pytest.mark.parametrize("fmt", list(FILES))
def test_report_refuses_a_link_planted_in_out(fmt, tmp_path, db, outside):
    out = tmp_path / "out"
    out.mkdir()
    for target in (outside.victim, outside.canary):
        os.symlink(target, out / FILES[fmt])
        err = assert_one_line_error(nearmetal("report", "--db", db, "--out", out, "--format", fmt, timeout=300,
                                              cwd=tmp_path))
        assert f"{FILES[fmt]}: it is a symbolic link" in err, err
        os.unlink(out / FILES[fmt])
    assert outside.intact() and os.listdir(out) == []
    ok = nearmetal("report", "--db", db, "--out", out, "--format", fmt, timeout=300, cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert (out / FILES[fmt]).is_file() and not (out / FILES[fmt]).is_symlink()


def test_report_refuses_a_link_planted_beside_the_database(tmp_path, db, outside):
    os.symlink(outside.victim, db.parent / "report.html")
    err = assert_one_line_error(nearmetal("report", "--db", db, timeout=300, cwd=tmp_path))
    assert "report.html: it is a symbolic link" in err
    assert outside.intact()


@pytest.mark.parametrize("suffix", ["-wal", "-journal", ""])
def test_report_and_import_refuse_a_database_with_a_linked_file(suffix, tmp_path, db, outside):
    if suffix:
        os.symlink(outside.victim, f"{db}{suffix}")
    else:
        os.rename(db, tmp_path / "moved.db")
        os.symlink(tmp_path / "moved.db", db)
    before = digest(tmp_path / "moved.db") if not suffix else digest(db)
    err = assert_one_line_error(nearmetal("report", "--db", db, "--out", tmp_path / "o1", timeout=300, cwd=tmp_path))
    assert "it is a symbolic link" in err and "results database" in err
    err = assert_one_line_error(nearmetal("import", tmp_path / "r.csv", "--study", "second", "--baseline", "base",
                                          "--db", db, "--out", tmp_path / "o2", timeout=300, cwd=tmp_path))
    assert "it is a symbolic link" in err
    assert outside.intact() and before == (digest(tmp_path / "moved.db") if not suffix else digest(db))
    assert not (tmp_path / "o1" / "report.html").exists() and not (tmp_path / "o2" / "report.html").exists()


@pytest.mark.parametrize("name", ["../../x", "../x", "a/../../b", ".."])
def test_import_refuses_a_study_name_that_leaves_results(name, tmp_path):
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    (work / "r.csv").write_text(CSV)
    err = assert_one_line_error(nearmetal("import", "r.csv", "--study", name, "--baseline", "base", timeout=120,
                                          cwd=work))
    assert "a study name is 1 to 64 letters" in err
    everything = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    assert everything == ["a", "a/b", "a/b/r.csv"]  # no results/, no database, no report anywhere
    err = assert_one_line_error(nearmetal("report", "--study", name, timeout=120, cwd=work))
    assert "a study name is 1 to 64 letters" in err
