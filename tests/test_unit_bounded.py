"""Bounded work on what users hand nearmetal (issue 26, items 3 and 6): figure-of-merit and
`success` patterns decided in linear time, inputs that are only files, directories and
links and are copied within a limit, source digests that never follow links or open
special files, and the small refusals (a baseline outside the matrix, a blank --metric,
empty package names, a report of a study with nothing finished). No process is started."""

import os
import stat
import time

import pytest

from nearmetal.apps import linear, presets
from nearmetal.apps.fom import Fom, FomError, check_success, records
from nearmetal.errors import NearmetalError
from nearmetal.study.plan import study_file as config_mod
from nearmetal.study.config import input_tree, program

pytestmark = pytest.mark.unit

MB = 1 << 20


# -- patterns ------------------------------------------------------------------------------

@pytest.mark.parametrize("regex", [r"(a+)+$", r"^(a|a)*$", r"(a|aa)+$", r"^(a*)*b", r"(\w+\s?)+$"])
def test_catastrophic_patterns_are_decided_in_under_a_second_on_1_mb(regex):
    text = "a" * MB + "!"  # no match anywhere: what makes a backtracking engine explode
    fom = Fom(name="t", regex=regex, unit="s")
    t0 = time.monotonic()
    with pytest.raises(FomError, match="not found"):
        records([fom], {"output": text})
    with pytest.raises(FomError, match="did not print what `success` asks for"):
        check_success(regex, {"output": text})
    assert time.monotonic() - t0 < 1.0


def test_the_issue_case_40_as_is_decided_at_once():
    t0 = time.monotonic()
    assert not linear.found(r"(a+)+$", "a" * 40 + "!")
    assert linear.found(r"(a+)+$", "a" * 40)
    assert time.monotonic() - t0 < 1.0


@pytest.mark.parametrize("regex, why", [
    (r"(\d+) then \1", "no backreferences or lookaround"),
    (r"Time: (?=[0-9])([0-9.]+)", "no backreferences or lookaround"),
    (r"(?<!x)([0-9]+)", "no backreferences or lookaround"),
    (r"(["  , "not a regular expression"),
    ("(x)" + "(?:[ab]{0,50}c)" * 30, "pattern too complex"),
])
def test_patterns_re2_cannot_run_are_refused_in_one_line(regex, why):
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as e:
        Fom(name="t", regex=regex, unit="s")
    msg = e.value.errors()[0]["msg"]
    assert why in msg and "\n" not in msg


def test_a_study_with_a_lookahead_success_is_refused_at_validation():
    head = '[study]\nname = "app"\n[baseline]\nmode = "native"\n[matrix]\nmode = ["native"]\nmpi = ["openmpi"]\n'
    with pytest.raises(NearmetalError) as e:
        config_mod.parse(head + '[[benchmark]]\ncommand = ["p"]\nsuccess = "done(?!!)"\n')
    assert "success" in str(e.value) and "lookaround" in str(e.value) and "\n" not in str(e.value)


def test_the_last_match_counts_multiline_and_anchors_at_line_ends():
    fom = Fom(name="t", regex=r"^Time: ([0-9.]+)$", unit="s")
    assert records([fom], {"output": "Time: 1\nTime: 2.5\nTime: 9 (bad)\n"})[0]["value"] == 2.5


def test_output_that_is_not_utf8_is_still_searched():
    text = b"\xff\xfe garbage\nTime: 3.5\n".decode("utf-8", "surrogateescape")
    assert records([Fom(name="t", regex=r"Time: ([0-9.]+)", unit="s")], {"output": text})[0]["value"] == 3.5
    assert linear.last(r"Préf: (\S+)", "Préf: é1\n") == ("é1",)


def test_a_fom_past_what_the_analysis_can_compare_fails_the_run():
    from nearmetal.apps.fom import number

    assert number("1e100", "FOM 'x'") == 1e100 and number("0", "FOM 'x'") == 0
    with pytest.raises(FomError, match=r"FOM 'x': 1e\+300 is outside the range nearmetal compares"):
        number("1e300", "FOM 'x'")
    with pytest.raises(FomError, match="outside the range"):
        number("1.0D-200", "FOM 'x'")


def test_an_optional_group_that_matched_nothing_is_a_fom_error_not_a_crash():
    with pytest.raises(FomError, match="matched nothing"):
        records([Fom(name="t", regex=r"Time:( [0-9]+)?", unit="s")], {"output": "Time:\n"})


def test_only_a_search_whose_worst_case_is_large_goes_to_a_worker(monkeypatch):
    asked = []
    monkeypatch.setattr(linear, "_in_worker", lambda pattern, op, data: asked.append((pattern, op, len(data))))
    assert linear.found(r"(a+)+$", "a" * MB) and not asked  # 1 MiB x a few instructions: here
    linear.found(r"[ab]*a[ab]{200}c", "ab" * MB)           # 2 MiB x 207: where it can be ended
    assert asked == [(r"[ab]*a[ab]{200}c", "found", 2 * MB)]


def test_a_search_not_decided_in_time_is_a_one_line_fom_error(monkeypatch):
    def undecided(pattern, op, data):
        raise linear.Undecided(f"pattern {pattern!r} not decided within 10 s")

    monkeypatch.setattr(linear, "_in_worker", undecided)
    with pytest.raises(FomError, match=r"^FOM 't': pattern .* not decided within 10 s$"):
        records([Fom(name="t", regex=r"([ab]*a[ab]{200}c)", unit="s")], {"output": "ab" * MB})
    with pytest.raises(FomError, match=r"^`success`: pattern"):
        check_success(r"[ab]*a[ab]{200}c", {"output": "ab" * MB})


def test_presets_patterns_run_on_re2():
    for name in presets.names():
        p = presets.get(name)
        for pat in [p.success, p.version] + [f.regex for f in p.foms]:
            if pat:
                linear.compiled(pat)  # raises if a preset's pattern needed backtracking
    qe = presets.get("qe")
    t0 = time.monotonic()
    with pytest.raises(FomError):
        qe.records({"output": "JOB DONE.\n" + "\n" * MB})  # Python's re took minutes on this
    assert time.monotonic() - t0 < 1.0
    out = "Program PWSCF v.7.1 starts\n     PWSCF        :      1.23s CPU      1.45s WALL\nJOB DONE.\n"
    assert [r["value"] for r in qe.records({"output": out})] == [1.45, 1.23]
    assert qe.program_version({"output": out}) == "v.7.1"


# -- inputs --------------------------------------------------------------------------------

def _zero_device(path):
    os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 5))  # /dev/zero's numbers


def test_a_character_device_in_an_input_tree_is_refused_naming_it(tmp_path):
    tree = tmp_path / "inputs" / "deep"
    tree.mkdir(parents=True)
    (tree / "ok.txt").write_text("x")
    _zero_device(tree / "zero")
    with pytest.raises(NearmetalError) as e:
        input_tree.check(str(tmp_path / "inputs"))
    assert str(tree / "zero") in str(e.value) and "character device" in str(e.value)
    with pytest.raises(NearmetalError, match="character device"):  # a run staging it: nothing copied
        program.stage(str(tmp_path / "run"), [str(tmp_path / "inputs")])
    assert sum(f.stat().st_size for f in (tmp_path / "run").rglob("*") if f.is_file()) <= 1


@pytest.mark.parametrize("kind", ["fifo", "device", "link-to-device"])
def test_an_input_that_is_itself_special_is_refused(tmp_path, kind):
    path = tmp_path / "in"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        _zero_device(path)
    else:
        _zero_device(tmp_path / "zero")
        os.symlink(tmp_path / "zero", path)
    with pytest.raises(NearmetalError, match="FIFO|character device"):
        input_tree.check(str(path))
    with pytest.raises(NearmetalError, match="FIFO|character device"):
        program.stage(str(tmp_path / "run"), [str(path)])


def test_a_study_naming_an_input_tree_with_a_device_is_refused_at_validation(tmp_path):
    (tmp_path / "inputs").mkdir()
    _zero_device(tmp_path / "inputs" / "zero")
    head = '[study]\nname = "app"\n[baseline]\nmode = "native"\n[matrix]\nmode = ["native"]\nmpi = ["openmpi"]\n'
    with pytest.raises(NearmetalError) as e:
        cfg = config_mod.parse(head + f'[[benchmark]]\ncommand = ["p"]\ninputs = ["{tmp_path}/inputs"]\n')
        config_mod.check_runnable(cfg)
    assert f"input {tmp_path}/inputs/zero is a character device" in str(e.value) and "\n" not in str(e.value)


def test_links_inside_a_tree_are_copied_as_links_and_modes_kept(tmp_path):
    src = tmp_path / "in"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "run.sh").write_text("echo\n")
    os.chmod(src / "sub" / "run.sh", 0o751)
    os.symlink("/dev/zero", src / "zero-link")  # copied as the link it is, never read
    os.symlink("sub", src / "dir-link")
    program.stage(str(tmp_path / "run"), [str(src)])
    out = tmp_path / "run" / "in"
    assert os.readlink(out / "zero-link") == "/dev/zero" and os.readlink(out / "dir-link") == "sub"
    assert (out / "sub" / "run.sh").read_text() == "echo\n"
    assert stat.S_IMODE(os.stat(out / "sub" / "run.sh").st_mode) == 0o751


def test_a_copy_stops_at_its_limit_with_a_one_line_error(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    (src / "a").write_bytes(b"x" * 3000)
    with pytest.raises(NearmetalError) as e:
        input_tree.copy(str(src), str(tmp_path / "out"), limit=2000)
    assert "more than 2000 bytes to copy, the copy limit" in str(e.value) and "\n" not in str(e.value)
    assert (tmp_path / "out" / "a").stat().st_size <= 2000 + (1 << 20)


def test_a_proc_file_that_says_it_is_empty_is_copied_within_the_limit(tmp_path):
    # /proc files report size 0: measured small, so copied, and their content is bounded by the copy
    with pytest.raises(NearmetalError, match="copy limit"):
        input_tree.copy("/proc/self/maps", str(tmp_path / "maps"), limit=10)


# -- source digests ------------------------------------------------------------------------

def _recipe(tmp_path):
    r = tmp_path / "build.sh"
    r.write_text("make\n")
    return str(r)


def test_the_source_digest_hashes_links_as_text_and_never_reads_through_them(tmp_path):
    from nearmetal.image import app_build

    src = tmp_path / "src"
    src.mkdir()
    (src / "main.c").write_text("int main(){}\n")
    os.symlink("/proc/kmsg", src / "kmsg")     # reading it blocks forever
    os.symlink("/dev/zero", src / "zero")      # reading it never ends
    os.symlink("/", src / "root")              # walking it never ends in time
    t0 = time.monotonic()
    first = app_build.digest(_recipe(tmp_path), str(src))
    assert time.monotonic() - t0 < 5
    os.remove(src / "zero")
    os.symlink("/dev/null", src / "zero")
    assert app_build.digest(_recipe(tmp_path), str(src)) != first  # the link's target is what counts


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_special_file_in_the_source_is_refused(tmp_path, kind):
    from nearmetal.image import app_build

    src = tmp_path / "src"
    src.mkdir()
    os.mkfifo(src / "x") if kind == "fifo" else _zero_device(src / "x")
    with pytest.raises(NearmetalError) as e:
        app_build.digest(_recipe(tmp_path), str(src))
    assert str(src / "x") in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("source", ["/", "/proc", "/sys", "/dev", "/run"])
def test_system_directories_are_refused_as_sources(tmp_path, source):
    from nearmetal.image import app_build

    with pytest.raises(NearmetalError, match="a system directory"):
        app_build.check(_recipe(tmp_path), source)


def test_the_source_walk_is_bounded(tmp_path, monkeypatch):
    from nearmetal.image import app_build

    src = tmp_path / "src"
    src.mkdir()
    for i in range(5):
        (src / f"f{i}").write_bytes(b"y" * 100)
    monkeypatch.setattr(app_build, "MAX_SOURCE_FILES", 4)
    with pytest.raises(NearmetalError, match="more than 4 files"):
        app_build.digest(_recipe(tmp_path), str(src))
    monkeypatch.setattr(app_build, "MAX_SOURCE_FILES", 100)
    monkeypatch.setattr(app_build, "MAX_SOURCE_BYTES", 250)
    with pytest.raises(NearmetalError, match="to digest, the limit"):
        app_build.digest(_recipe(tmp_path), str(src))


def test_a_recipe_that_is_a_link_to_a_device_is_refused(tmp_path):
    from nearmetal.image import app_build

    os.symlink("/dev/zero", tmp_path / "build.sh")
    (tmp_path / "src").mkdir()
    with pytest.raises(NearmetalError, match="not a regular file"):
        app_build.digest(str(tmp_path / "build.sh"), str(tmp_path / "src"))


# -- the regression and the wrong successes ------------------------------------------------

BASE = """
[study]
name = "b"
repetitions = 2
[baseline]
{baseline}
[matrix]
{matrix}
mpi = ["openmpi"]
ranks = [2]
[[benchmark]]
kernel = "pingpong"
"""


@pytest.mark.parametrize("baseline, matrix, expect", [
    ('mode = "bind"', 'mode = ["native"]', "is not in the study's matrix"),
    ('mode = "hybrid"\nruntime = "podman"', 'mode = ["native"]', "is not in the study's matrix"),
    ('mode = "bind"', 'mode = ["native", "bind"]\nruntime = ["charliecloud", "bwrap"]', "needs its runtime"),
    ('mode = "bind"\nruntime = "podman"', 'mode = ["native", "bind"]\nruntime = ["podman"]\nimage = ["a", "b"]',
     "needs its image"),
])
def test_a_container_baseline_outside_the_matrix_is_refused_in_one_line(baseline, matrix, expect):
    with pytest.raises(NearmetalError) as e:
        config_mod.parse(BASE.format(baseline=baseline, matrix=matrix), source="s.toml")
    assert expect in str(e.value) and "\n" not in str(e.value)


def test_a_container_baseline_of_native_variants_takes_the_matrix_runtime_and_image():
    from nearmetal.study.plan.plan import baseline_of, variant_id

    cfg = config_mod.parse(BASE.format(baseline='mode = "bind"',
                                       matrix='mode = ["native", "bind"]\nruntime = ["charliecloud"]'))
    native = {"mode": "native", "runtime": None, "mpi": "openmpi", "image": None}
    assert variant_id(baseline_of(cfg, native)) == "bind/charliecloud/openmpi/default"


@pytest.mark.parametrize("metric", [" ", "", "a\tb", "a\nb"])
def test_a_blank_or_unprintable_metric_is_refused_before_the_database(tmp_path, metric):
    from nearmetal.study.store.importer import import_csv

    csv = tmp_path / "r.csv"
    csv.write_text("variant,value\nnative,1\nhybrid,2\n")
    with pytest.raises(NearmetalError) as e:
        import_csv(str(csv), tmp_path / "r.db", "s", "native", metric=metric)
    assert "--metric" in str(e.value) or "'metric' column" in str(e.value)
    assert not (tmp_path / "r.db").exists()


@pytest.mark.parametrize("by, expect", [
    ({"planned": 4}, "no finished runs in study 's': 4 planned; run it first"),
    ({"failed": 2, "timeout": 1}, "no finished runs in study 's': 2 failed, 1 timeout; see why"),
    ({}, "no finished runs in study 's': no runs"),
])
def test_a_report_of_a_study_with_nothing_finished_is_an_error(by, expect):
    from nearmetal.commands import _require_finished

    with pytest.raises(NearmetalError, match=expect):
        _require_finished({"study": {"name": "s"}, "runs": {"by_status": by}})
    _require_finished({"study": {"name": "s"}, "runs": {"by_status": {"ok": 1, "failed": 3}}})


def test_an_inputs_provenance_digest_never_reads_through_links_or_devices(tmp_path, monkeypatch):
    from nearmetal.study.execute.provenance import file_digest, input_digest

    monkeypatch.setenv("NEARMETAL_HOME", str(tmp_path / "home"))  # the digest cache
    tree = tmp_path / "in"
    tree.mkdir()
    (tree / "n.txt").write_text("7\n")
    os.symlink("/dev/zero", tree / "zero")
    os.symlink("/proc/kmsg", tree / "kmsg")
    os.mkfifo(tree / "fifo")
    t0 = time.monotonic()
    first = input_digest(str(tree))
    assert first.startswith("sha256:") and time.monotonic() - t0 < 5
    os.remove(tree / "zero")
    os.symlink("/dev/null", tree / "zero")
    assert input_digest(str(tree)) != first  # a link counts by its target's name
    assert file_digest("/dev/zero") is None


def test_a_last_match_among_very_many_goes_to_a_worker(monkeypatch):
    """`last` walks every match in Python (microseconds each): a pattern that matches at every
    byte of a few MiB would take seconds here, with nothing to end it."""
    asked = []
    monkeypatch.setattr(linear, "_in_worker", lambda pattern, op, data: asked.append((pattern, op, len(data))))
    t0 = time.monotonic()
    linear.last(r"(x*)", "b" * (2 * MB))
    assert asked == [(r"(x*)", "last", 2 * MB)]
    assert time.monotonic() - t0 < 5
    assert linear.last(r"t=(\d+)", "t=1\n" * 1000 + "t=2\n") == ("2",) and len(asked) == 1  # few matches: here


def test_a_results_database_that_is_a_fifo_is_refused_not_waited_on(tmp_path):
    """A database handed over (or a --db path) may be a FIFO: opening it for its header
    blocked until a writer came, for ever."""
    import signal

    from nearmetal.study.store.store import Store

    fifo = tmp_path / "study.db"
    os.mkfifo(fifo)

    def late(signum, frame):
        raise TimeoutError("the FIFO's open blocked")

    previous = signal.signal(signal.SIGALRM, late)
    signal.setitimer(signal.ITIMER_REAL, 2)
    try:
        for readonly in (True, False):
            with pytest.raises(NearmetalError, match="a FIFO: only regular files are read"):
                Store(fifo, readonly=readonly, what="study 'x'")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
