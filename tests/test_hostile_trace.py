"""`trace report` on crafted trace directories (issue 26): short and corrupt records, bad
UTF-8, symbolic links (to themselves, to /dev/zero), directories, FIFOs and devices where a
trace file is expected, deep or special meta.json, files over the size limits, a planted
report.html. Each gives a one-line error (or, for bad UTF-8, a report with the bytes
replaced), never a traceback, a hang or a write outside the directory. Unit: the reader and
command functions on files in tmp_path; integration: the real `nearmetal trace report`."""

import hashlib
import io
import os
import random
import signal
import stat
import struct

import pytest

from conftest import assert_one_line_error, nearmetal
from nearmetal.errors import NearmetalError
from nearmetal.trace import command, reader

# ------------------------------------------------------------------ a valid trace file, by hand


def _record(rtype, payload):
    body = payload + b"\0" * (-(8 + len(payload)) % 8)
    return struct.pack("<II", rtype, 8 + len(body)) + body


def _string(kind, sid, raw, layer=0):
    return _record(reader.REC_STRING, struct.pack("<IIII", kind, sid, layer, len(raw)) + raw)


def _event(seq, parent, func, layer, start=100, end=150):
    return struct.pack("<IIQQqqqqqIHBBII", reader.REC_EVENT, 80, seq, parent, start * seq, end * seq, 0, 8, 8, 7,
                       func, layer, 0, 1, 0)


def _header(version=1, header_bytes=128, clock=0, ticks=0):
    return reader.HEADER.pack(reader.MAGIC, version, header_bytes, 4242, -1, 0, 1000, 2000, b"node1", 0b11011,
                              clock, ticks)


def trace_bytes(hint_key=b"cb_nodes", end=True):
    body = (_string(1, 1, b"MPI_File_write_at_all", 3) + _string(1, 2, b"pwrite", 4) + _string(2, 1, b"/data/out.nc")
            + _event(1, 0, 1, 3) + _event(2, 1, 2, 4)
            + _record(reader.REC_RANK, struct.pack("<ii", 0, 1))
            + _record(reader.REC_HINTS, struct.pack("<IIQ", 1, len(hint_key) + 3, 1) + hint_key + b"\x002\x00")
            + (_record(reader.REC_END, struct.pack("<QQ", 2, 0)) if end else b""))
    return _header() + body


def digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


@pytest.fixture
def victim(tmp_path):
    """A file outside the trace directory that nothing may change, and its checksum."""
    path = tmp_path / "outside" / "victim.txt"
    path.parent.mkdir()
    path.write_text("precious\n")
    return path, digest(path)


def _dir(tmp_path, name="t"):
    d = tmp_path / name
    d.mkdir()
    return d


# ------------------------------------------------------------------ crafted directories (unit and CLI)

def _short_string(d):  # a string record whose frame says 8 bytes: shorter than its own fields, at the end
    (d / "trace-node1-1.nmt").write_bytes(trace_bytes(end=False) + struct.pack("<II", reader.REC_STRING, 8))


def _short_hints(d):
    (d / "trace-node1-1.nmt").write_bytes(trace_bytes(end=False) + struct.pack("<II", reader.REC_HINTS, 16)
                                          + b"\0" * 8)


def _short_rank(d):
    (d / "trace-node1-1.nmt").write_bytes(trace_bytes(end=False) + struct.pack("<II", reader.REC_RANK, 8))


def _bad_header_size(d):
    data = bytearray(trace_bytes())
    data[12:16] = struct.pack("<I", 4)  # header_bytes: inside the magic
    (d / "trace-node1-1.nmt").write_bytes(bytes(data))


def _loop(d):
    os.symlink("trace-node1-1.nmt", d / "trace-node1-1.nmt")


def _dev_zero_link(d):
    os.symlink("/dev/zero", d / "trace-node1-1.nmt")


def _directory(d):
    (d / "trace-node1-1.nmt").mkdir()


def _fifo(d):
    os.mkfifo(d / "trace-node1-1.nmt")


def _deep_meta(d):
    (d / "trace-node1-1.nmt").write_bytes(trace_bytes())
    (d / "meta.json").write_text("[" * 200_000 + "]" * 200_000)


def _nested_meta(d):  # under Python's recursion limit, over what a renderer may recurse into
    (d / "trace-node1-1.nmt").write_bytes(trace_bytes())
    (d / "meta.json").write_text('{"a": ' * 40 + "1" + "}" * 40)


def _fifo_meta(d):
    (d / "trace-node1-1.nmt").write_bytes(trace_bytes())
    os.mkfifo(d / "meta.json")


def _dev_zero_meta(d):
    (d / "trace-node1-1.nmt").write_bytes(trace_bytes())
    os.symlink("/dev/zero", d / "meta.json")


def _huge_sparse(d):
    with open(d / "trace-node1-1.nmt", "wb") as f:
        f.write(trace_bytes())
        f.truncate(reader.MAX_FILE_BYTES + 1)  # sparse: costs no disk


def _tsc_overflow(d):
    body = (_string(1, 1, b"pwrite", 4) + _record(reader.REC_CLOCK, struct.pack("<Qq", 10, 20))
            + _record(reader.REC_CLOCK, struct.pack("<Qq", 11, 1 << 61))
            + struct.pack("<IIQQqqqqqIHBBII", reader.REC_EVENT, 80, 1, 0, 1 << 62, (1 << 62) + 5, 0, 8, 8, 7, 1, 4, 0,
                          0, 0))
    (d / "trace-n-7.nmt").write_bytes(_header(version=2, clock=1, ticks=10) + body)


CRAFTED = {  # case: (build, what the one-line error says)
    "short string record": (_short_string, "corrupt record at byte"),
    "short hints record": (_short_hints, "corrupt record at byte"),
    "short rank record": (_short_rank, "corrupt record at byte"),
    "header size inside the header": (_bad_header_size, "corrupt header"),
    "link to itself (ELOOP)": (_loop, "a symbolic link: only regular files are read"),
    "link to /dev/zero": (_dev_zero_link, "a symbolic link: only regular files are read"),
    "directory": (_directory, "a directory: only regular files are read"),
    "FIFO": (_fifo, "a FIFO: only regular files are read"),
    "deep meta.json": (_deep_meta, "nested deeper than 16 levels"),
    "nested meta.json": (_nested_meta, "nested deeper than 16 levels"),
    "FIFO meta.json": (_fifo_meta, "trace metadata"),
    "meta.json link to /dev/zero": (_dev_zero_meta, "a symbolic link"),
    "file over the size limit": (_huge_sparse, "over the limit of 1024 MiB per file"),
    "clock ticks out of range": (_tsc_overflow, "event times far outside its clock readings"),
}


@pytest.fixture
def no_hang():
    """A hang (a FIFO opened for reading waits for a writer) fails the test instead."""
    def hung(signum, frame):
        raise TimeoutError("hung for 20 s")
    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.mark.unit
@pytest.mark.parametrize("case", list(CRAFTED))
def test_crafted_trace_directories_are_refused_in_one_line(case, tmp_path, no_hang):
    build, expect = CRAFTED[case]
    d = _dir(tmp_path)
    build(d)
    out = io.StringIO()
    with pytest.raises(NearmetalError) as e:
        command.report(str(d), "md", out=out)
    assert expect in str(e.value) and "\n" not in str(e.value), str(e.value)
    assert out.getvalue() == ""


@pytest.mark.unit
def test_a_device_node_where_a_trace_file_is_expected_is_not_opened(tmp_path):
    d = _dir(tmp_path)
    os.mknod(d / "trace-node1-1.nmt", stat.S_IFCHR | 0o600, os.makedev(1, 5))  # /dev/zero's numbers
    with pytest.raises(NearmetalError, match="a character device: only regular files are read"):
        reader.read(d)


@pytest.mark.unit
def test_bad_utf8_in_hints_and_names_is_replaced_not_fatal(tmp_path):
    d = _dir(tmp_path)
    (d / "trace-node1-1.nmt").write_bytes(trace_bytes(hint_key=b"cb_\xff\xfenodes"))
    (p,) = reader.read(d).processes
    assert p.hints == {"/data/out.nc": {"cb_\ufffd\ufffdnodes": "2"}}
    out = io.StringIO()
    assert command.report(str(d), "md", out=out) is None
    assert "cb_\ufffd\ufffdnodes=2" in out.getvalue()


@pytest.mark.unit
def test_the_total_of_a_directory_is_bounded(tmp_path, monkeypatch):
    d = _dir(tmp_path)
    one = trace_bytes()
    for k in range(3):
        (d / f"trace-node1-{k}.nmt").write_bytes(one)
    assert len(reader.read(d).processes) == 3
    monkeypatch.setattr(reader, "MAX_TOTAL_BYTES", 2 * len(one) + 1)
    with pytest.raises(NearmetalError, match="hold over .* the limit for one report"):
        reader.read(d)
    monkeypatch.setattr(reader, "MAX_FILES", 2)
    with pytest.raises(NearmetalError, match="3 trace files, over the limit of 2"):
        reader.read(d)


@pytest.mark.unit
def test_fuzzed_trace_files_are_read_or_refused_in_one_line(tmp_path):
    """Random byte flips, cuts and splices of a valid file: the reader and the analysis either
    work or raise NearmetalError, never struct.error, IndexError, UnicodeDecodeError..."""
    from nearmetal.trace import callpath, render

    rng = random.Random(26)
    good = trace_bytes()
    d = _dir(tmp_path)
    path = d / "trace-node1-1.nmt"
    refused = 0
    for _ in range(600):
        data = bytearray(good)
        for _ in range(rng.randint(1, 6)):
            k = rng.randrange(len(data))
            data[k] = rng.randrange(256) if rng.random() < 0.7 else rng.choice((0, 0xFF, 8, 16, 24))
        if rng.random() < 0.3:
            data = data[:rng.randrange(len(data))]
        path.write_bytes(bytes(data))
        try:
            a = callpath.analyze(reader.read(d))
            render.markdown(a)
            render.as_json(a)
        except NearmetalError as e:
            assert "\n" not in str(e)
            refused += 1
    assert 0 < refused < 600  # both outcomes were reached


@pytest.mark.unit
def test_a_planted_report_html_is_refused_and_its_target_kept(tmp_path, victim):
    victim_path, before = victim
    d = _dir(tmp_path)
    (d / "trace-node1-1.nmt").write_bytes(trace_bytes())
    os.symlink(victim_path, d / "report.html")
    with pytest.raises(NearmetalError, match="report.html: it is a symbolic link"):
        from nearmetal import safe_write
        safe_write.write_text(d / "report.html", "x", "trace report")
    assert digest(victim_path) == before


@pytest.mark.unit
def test_collect_refuses_a_planted_meta_json(tmp_path, victim):
    victim_path, before = victim
    stage, out = _dir(tmp_path, "stage"), _dir(tmp_path, "out")
    (stage / "trace-node1-1.nmt").write_bytes(trace_bytes())
    os.symlink(tmp_path / "outside" / "canary", out / "meta.json")
    with pytest.raises(NearmetalError, match="meta.json: it is a symbolic link"):
        command.collect(str(stage), str(out), {"argv": ["x"]})
    assert not (tmp_path / "outside" / "canary").exists() and digest(victim_path) == before
    assert (out / "trace-node1-1.nmt").read_bytes() == trace_bytes() and not stage.exists()


@pytest.mark.unit
def test_a_study_report_skips_crafted_trace_metadata_beside_the_database(tmp_path, no_hang):
    """`report` lists the traces kept beside a database (traces/*/meta.json): a database
    handed over may come with crafted ones, skipped without hanging or reading without end."""
    from nearmetal.study.config.traced import listing

    root = tmp_path / "traces"
    good = {"study": "s", "run_key": "k", "benchmark": "b", "variant": "v", "block": 0, "status": "ok"}
    makers = {"good": lambda p: p.write_text(__import__("json").dumps(good)),
              "fifo": os.mkfifo, "zero": lambda p: os.symlink("/dev/zero", p),
              "deep": lambda p: p.write_text("[" * 100_000 + "]" * 100_000),
              "list": lambda p: p.write_text("[1, 2]"), "dir": lambda p: p.mkdir()}
    for name, make in makers.items():
        (root / name).mkdir(parents=True)
        make(root / name / "meta.json")
    (found,) = listing(tmp_path / "study.db", "s")
    assert found["run_key"] == "k" and found["dir"] == str(root / "good")


# ------------------------------------------------------------------ the real command line

@pytest.mark.parametrize("case", list(CRAFTED))
def test_trace_report_on_crafted_directories(case, tmp_path, victim):
    victim_path, before = victim
    build, expect = CRAFTED[case]
    d = _dir(tmp_path)
    build(d)
    err = assert_one_line_error(nearmetal("trace", "report", d, timeout=60, cwd=tmp_path))
    assert expect in err, err
    assert not (d / "report.html").exists() and digest(victim_path) == before


def test_trace_report_with_bad_utf8_writes_its_report(tmp_path):
    d = _dir(tmp_path)
    (d / "trace-node1-1.nmt").write_bytes(trace_bytes(hint_key=b"cb_\xff\xfenodes"))
    out = nearmetal("trace", "report", d, timeout=120, cwd=tmp_path)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert "cb_\ufffd\ufffdnodes=2" in (d / "report.html").read_text()


def test_trace_report_through_a_planted_link_is_refused(tmp_path, victim):
    victim_path, before = victim
    d = _dir(tmp_path)
    (d / "trace-node1-1.nmt").write_bytes(trace_bytes())
    for target in (victim_path, tmp_path / "outside" / "canary"):
        os.symlink(target, d / "report.html")
        err = assert_one_line_error(nearmetal("trace", "report", d, timeout=120, cwd=tmp_path))
        assert "report.html: it is a symbolic link" in err
        os.unlink(d / "report.html")
    assert digest(victim_path) == before and not (tmp_path / "outside" / "canary").exists()
    os.link(victim_path, d / "report.html")  # a hard link: replaced by the new report, its other name untouched
    assert nearmetal("trace", "report", d, timeout=120, cwd=tmp_path).returncode == 0
    assert (d / "report.html").is_file() and not (d / "report.html").is_symlink()
    assert "<html" in (d / "report.html").read_text() and digest(victim_path) == before
    assert not [n for n in os.listdir(d) if n.endswith(".nearmetal-tmp")]
