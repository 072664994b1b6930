"""The parts of failing fast that need no process (issue 28, items 4 and 6): the hang limit
derived from a cell's earlier runs, a hung run's stored record, the closest-name phrase,
the plan-time checks of images and runtimes (their lookups replaced by seams: no image
store, no container start here), the new keys' validation, and how the analysis and the
reports count hung and skipped runs. tests/test_failfast.py runs the real thing."""

import shutil
from types import SimpleNamespace

import pytest

from nearmetal.closest import closest, known_names
from nearmetal.errors import NearmetalError
from nearmetal.study.execute import hang, preflight, runner
from nearmetal.study.plan import study_file as config_mod
from nearmetal.study.store import codec
from nearmetal.study.records import HUNG, OK, SKIPPED, TIMEOUT, Launched, RunResult, stored_status

pytestmark = pytest.mark.unit


# ---------------------------------------------------------------------- the hang limit

@pytest.mark.parametrize("walls, ceiling, floor, expect", [
    ([], 600, 30, (600, False)),                 # nothing to derive it from: the timeout
    ([0.4, 0.5, 0.3], 600, 30, (30, True)),      # 10x 0.4 s is 4 s: the floor
    ([0.4, 0.5, 0.3], 600, 2, (4.0, True)),      # ... a smaller floor
    ([5.0, 7.0, 6.0, 100.0], 600, 30, (65.0, True)),  # the median: one slow run does not raise it far
    ([5.0, 6.0, 7.0], 50, 30, (50, False)),      # the timeout stays the ceiling: its end is a time-out
    ([0.2], 20, 30, (20, False)),                # a floor above the timeout: the timeout
])
def test_the_hang_limit_is_ten_times_the_cells_median_at_least_the_floor_at_most_the_timeout(walls, ceiling,
                                                                                            floor, expect):
    got = hang.limit(walls, ceiling, floor)
    assert got[1] == expect[1] and got[0] == pytest.approx(expect[0])


def test_a_hung_runs_record_keeps_its_reason_and_processes_whole_and_the_output_end_before_them():
    state = [{"pid": 10, "comm": "mpiexec.hydra", "state": "S", "wchan": "do_sys_poll", "cpu_s": 0.02},
             {"pid": 12, "comm": "nm-latency", "state": "R", "wchan": "", "cpu_s": 31.5}]
    why = hang.reason(4.0, [0.4, 0.3, 0.5], 2, repeated=True)
    assert why == ("nearmetal: hung: no end after 4 s (10x the median 0.4 s of this cell's 3 earlier runs, at "
                   "least 2 s); its process tree was ended; run once more after the runs planned")
    tail = hang.stored_tail("x" * 5000 + "END", why, state, 2000)
    assert len(tail) <= 2000 and tail.startswith("x") and "xEND\n" + why in tail
    assert tail.endswith("  10 mpiexec.hydra S do_sys_poll 0.02s\n  12 nm-latency R - 31.5s")
    assert hang.stored_tail("", why, [], 2000) == why + "\n" + hang.state_lines([])[0] + "\n  (none could be read)"
    assert "not run again" in hang.reason(4.0, [0.4], 2, repeated=False)


def test_a_repeat_is_known_by_its_key_and_belongs_to_the_same_cell():
    key = "b%7Codd%23name|n=2|t=1|native/mpich#rep3"
    again = hang.repeat_key(key)
    assert hang.is_repeat(again) and not hang.is_repeat(key)
    assert hang.cell_key(again) == hang.cell_key(key) == "b%7Codd%23name|n=2|t=1|native/mpich"


@pytest.mark.parametrize("status, hung, stored", [("timeout", ("why", []), HUNG), ("timeout", None, TIMEOUT),
                                                   ("ok", None, OK)])
def test_a_run_ended_by_its_hang_limit_is_stored_hung(status, hung, stored):
    assert stored_status(Launched(status, 0 if status == "ok" else None, "", "", 1.0, hung=hung), True) == stored


# ---------------------------------------------------------------------- the closest name

def test_the_closest_name_and_the_known_ones_in_one_phrase():
    names = ["nm-bookworm-mpich-openmpi", "default", "nm-trixie-mpich"]
    assert known_names("defualt", names, "images") == \
        "known images: default, nm-bookworm-mpich-openmpi, nm-trixie-mpich; the closest is 'default'"
    assert known_names("nm-trixie-mpch", names, "images").endswith("the closest is 'nm-trixie-mpich'")
    assert known_names("zzz", names, "images") == "known images: default, nm-bookworm-mpich-openmpi, nm-trixie-mpich"
    assert known_names("x", [], "images") == "no images here"
    many = known_names("n5", [f"n{i:02d}" for i in range(20)], "names")
    assert "(and 8 more)" in many and many.count(",") == 11
    assert closest("gromac", ["gromacs", "hpcc", "osu", "qe"]) == "gromacs" and closest("lamps", ["osu"]) is None


def test_an_unknown_preset_names_the_closest_one():
    with pytest.raises(NearmetalError, match=r"unknown preset 'gromac': .*; the closest is 'gromacs'$"):
        from nearmetal.apps import presets

        presets.get("gromac")


# ---------------------------------------------------------------------- plan-time checks

STUDY = """\
[study]
name = "f"
repetitions = 2
{extra}
[matrix]
mode = ["native", "hybrid"]
runtime = ["charliecloud", "podman"]
mpi = ["mpich"]
image = ["default", "defualt"]
[[benchmark]]
kernel = "latency"
"""


@pytest.fixture
def machine(monkeypatch):
    """Seams for this machine: which images exist, which runtimes are installed and start,
    which programs the images lack (none unless a test says so)."""
    from nearmetal import doctor, image, resolve, runtimes
    from nearmetal import program_paths as program

    have = {"nm-bookworm-mpich-openmpi"}
    m = SimpleNamespace(installed={"ch-run", "podman"}, starts={"ch-run": (True, "started"), "podman": (True, "ok")},
                        lacking=set(), links={})

    def in_image(image, name, family):
        assert family in ("openmpi", "mpich"), family  # a family, never FAMILY@/PREFIX
        if name in m.lacking:
            raise NearmetalError(f"program not found in image '{image.name}': {name}")
        return f"/usr/bin/{name}", None

    def image_of(self, spec):
        if spec is not None and spec not in have:
            raise NearmetalError(f"no image '{spec}': build it with `nearmetal image build ...` or give a path")
        return SimpleNamespace(name=spec or "nm-bookworm-mpich-openmpi")

    monkeypatch.setattr(resolve.Host, "image", image_of)
    monkeypatch.setattr(image, "list_images", lambda: [SimpleNamespace(name=n) for n in sorted(have)])
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: f"/usr/bin/{name}" if name in m.installed else None)
    monkeypatch.setattr(type(runtimes.get("apptainer")), "path", lambda self: None)
    monkeypatch.setattr(doctor, "runtime_starts", lambda rt: m.starts[rt.binary])
    monkeypatch.setattr(program, "container_program", in_image)
    # the host's MPIs and what its programs link: never this machine's (setup installs gromacs, whose
    # /usr/bin/gmx_mpi links Open MPI; a test names what a program links in m.links)
    sonames = {"openmpi": "libmpi.so.40", "mpich": "libmpich.so.12"}
    monkeypatch.setattr(resolve.Host, "installation", lambda self, spec: {"family": spec.split("@")[0],
                                                                          "soname": sonames[spec.split("@")[0]]})
    monkeypatch.setattr(resolve.Host, "installations", lambda self: {f: {"family": f} for f in sonames})
    monkeypatch.setattr(resolve.Host, "program_abi", lambda self, path: m.links.get(path))
    return m


def test_a_program_the_image_lacks_is_refused_before_any_run_with_its_cells(machine):
    """Every container run of such a cell would fail to start: refused at once (the native
    cells would otherwise be spent first), counted per image and MPI."""
    machine.lacking = {"gmx_mpi"}
    machine.installed.add("gmx_mpi")  # on the host: its native cells are fine
    text = ('[study]\nname = "s"\n[matrix]\nmode = ["native", "hybrid", "bind"]\nruntime = ["charliecloud"]\n'
            'mpi = ["openmpi", "mpich"]\n[[benchmark]]\ncommand = ["gmx_mpi", "mdrun"]\n'
            '[[benchmark]]\nkernel = "latency"\n')
    found, _ = preflight.problems(config_mod.parse(text))
    assert found == ["program not found in image 'nm-bookworm-mpich-openmpi': gmx_mpi (2 cells, openmpi)",
                     "program not found in image 'nm-bookworm-mpich-openmpi': gmx_mpi (2 cells, mpich)"], found
    machine.lacking = set()
    assert preflight.problems(config_mod.parse(text)) == ([], [])
    # an installation of its own (FAMILY@/PREFIX) is looked up as its family's, as the run does
    assert preflight.problems(config_mod.parse(text.replace('"openmpi", "mpich"', '"openmpi@/usr"'))) == ([], [])
    # a relative program path: refused even where the image is not built yet (no image to look in)
    relative = text.replace('command = ["gmx_mpi", "mdrun"]', 'command = ["./run.sh"]').replace(
        'mpi = ["openmpi", "mpich"]', 'mpi = ["openmpi", "mpich"]\nimage = ["nm-to-be-built"]')
    found, notes = preflight.problems(config_mod.parse(relative))
    assert notes and all("nm-to-be-built" in n for n in notes)
    assert found and all(f.startswith("program path inside the image must be absolute: ./run.sh") for f in found)


def test_a_native_program_of_the_other_mpi_is_refused_and_a_missing_one_said(machine, monkeypatch, tmp_path):
    """A program of the other MPI would start as N 1-rank jobs that end "ok" with one rank's
    numbers: refused at once, as `run` refuses it. One not on this machine is said before the
    runs (they fail saying so). A relative path names a staged input: left to the run."""
    app = tmp_path / "stencil"
    app.write_text("")
    app.chmod(0o755)
    machine.links[str(app)] = "openmpi"
    text = ('[study]\nname = "s"\n[matrix]\nmode = ["native"]\nmpi = ["openmpi", "mpich"]\n'
            '[[benchmark]]\ncommand = ["PROG", "100"]\n')
    # not here: said, as an image still to be built is (seed 001 asks for gromacs), not refused
    assert preflight.problems(config_mod.parse(text.replace("PROG", str(app) + "l"))) == ([], [
        f"program not found: {app}l: its 1 cell (openmpi) fails until it is installed",
        f"program not found: {app}l: its 1 cell (mpich) fails until it is installed"])
    found, _ = preflight.problems(config_mod.parse(text.replace("PROG", str(app))))
    assert found == [f"{app} is built against Open MPI, but mpich would launch it: each rank would start alone as "
                     'a 1-rank MPI job; give its cells mpi = "openmpi" (1 cell, mpich)']
    assert preflight.problems(config_mod.parse(text.replace("PROG", "./run.sh"))) == ([], [])
    _, notes = preflight.problems(config_mod.parse(text.replace("PROG", "stencil")))  # a bare name: on PATH
    assert notes[0] == "program not found on PATH: stencil: its 1 cell (openmpi) fails until it is installed"
    # nearmetal's kernels are left to the study, which builds them for every MPI (never in a preflight)
    from nearmetal.program_paths import host_program as real

    monkeypatch.setattr("nearmetal.program_paths.host_program", lambda *a: pytest.fail(f"looked up {a}") or real(*a))
    assert preflight.problems(config_mod.parse(text.replace("PROG", "nm-latency"))) == ([], [])


def test_a_misspelt_image_is_refused_with_the_images_there_are_and_the_closest(machine):
    cfg = config_mod.parse(STUDY.format(extra=""), source="f.toml")
    with pytest.raises(NearmetalError) as e:
        preflight.check(cfg, "f.toml")
    assert str(e.value) == ("f.toml: cannot run: image 'defualt' of 2 cells: no such image (known images: default, "
                            "nm-bookworm-mpich-openmpi; the closest is 'default')")


def test_a_runtime_not_installed_or_not_starting_is_refused_and_skip_leaves_out_only_the_missing(machine):
    from nearmetal import runtimes

    text = STUDY.format(extra="").replace('"default", "defualt"', '"default"')
    machine.installed = {"ch-run"}
    machine.starts["ch-run"] = (False, "exit 1: ch-run: can't map user namespace")
    with pytest.raises(NearmetalError) as e:
        preflight.check(config_mod.parse(text), "f.toml")
    hint = f" ({runtimes.get('podman').install_hint})" if runtimes.get("podman").install_hint else ""
    assert str(e.value) == (
        "f.toml: cannot run: runtime charliecloud of 1 cell: it does not start a container here: exit 1: ch-run: "
        "can't map user namespace (`nearmetal doctor` checks each runtime); also runtime podman of 1 cell: podman "
        f"is not installed{hint}; [study] missing_runtimes = \"skip\" leaves such cells out instead")
    skip = config_mod.parse(text.replace("repetitions = 2", 'repetitions = 2\nmissing_runtimes = "skip"'))
    with pytest.raises(NearmetalError) as e:  # podman's cell left out; charliecloud installed yet not starting
        preflight.check(skip, "f.toml")
    assert "runtime charliecloud of 1 cell: it does not start" in str(e.value) and "podman" not in str(e.value)
    machine.starts["ch-run"] = (True, "started")
    assert preflight.problems(skip) == ([], [])


def test_runtimes_are_not_started_here_for_a_batch_scheduler(machine):
    text = STUDY.format(extra='scheduler = "slurm"').replace('"default", "defualt"', '"default"')
    machine.installed = set()
    assert preflight.problems(config_mod.parse(text)) == ([], [])  # the nodes have their own runtimes
    wrong = config_mod.parse(text.replace('image = ["default"]', 'image = ["default", "nm-bookwrom-mpich"]'))
    assert preflight.problems(wrong)[0] == ["image 'nm-bookwrom-mpich' of 2 cells: no such image (known images: "
                                            "default, nm-bookworm-mpich-openmpi; the closest is "
                                            "'nm-bookworm-mpich-openmpi')"]  # images are still checked


def test_an_image_to_be_built_first_is_said_not_refused(machine):
    """One nearmetal knows how to build (a seed's other Debian release), or a name like no
    image here (seed 001's nm-gromacs, built as its header says): its cells fail saying how."""
    text = STUDY.format(extra="").replace('"default", "defualt"', '"nm-trixie-openmpi", "nm-gromacs"')
    said = []
    preflight.check(config_mod.parse(text), "f.toml", say=said.append)
    assert said == ["image 'nm-trixie-openmpi' is not here: its 2 cells fail until "
                    "`nearmetal image build --distro trixie --mpi openmpi`",
                    "image 'nm-gromacs' is not here: its 2 cells fail until it is built (`nearmetal image build "
                    "--name nm-gromacs ...`) or imported (known images: default, nm-bookworm-mpich-openmpi)"]


# ---------------------------------------------------------------------- the keys

@pytest.mark.parametrize("body, words", [
    ('[study]\nname = "s"\nhang_floor_s = 0\n[[benchmark]]\nkernel = "latency"\n',
     "study.hang_floor_s: Input should be greater than 0"),
    ('[study]\nname = "s"\nkeep_going = "yes"\n[[benchmark]]\nkernel = "latency"\n',
     "study.keep_going: Input should be a valid boolean"),
    ('[study]\nname = "s"\n[[benchmark]]\nkernel = "latency"\nkeep_going = true\n',
     "keep_going applies to command = [...] benchmarks, not to a kernel"),
])
def test_the_new_keys_are_validated(body, words):
    with pytest.raises(NearmetalError, match=words.replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")):
        config_mod.parse(body, source="s.toml")


def test_keep_going_of_a_benchmark_overrides_the_studys():
    from nearmetal.study.execute.stops import keep_going as _keep_going

    cfg = config_mod.parse('[study]\nname = "s"\nkeep_going = true\n[[benchmark]]\ncommand = ["a"]\n'
                           '[[benchmark]]\ncommand = ["b"]\nkeep_going = false\n')
    assert [_keep_going(cfg, b) for b in cfg.benchmark] == [True, False]
    assert config_mod.parse('[study]\nname = "s"\n[[benchmark]]\ncommand = ["a"]\n').study.keep_going is False


# ---------------------------------------------------------------------- analysis and reports

def test_each_stopped_cell_of_a_benchmark_is_counted_with_its_own_reason(tmp_path):
    """Two cells of one benchmark stopped (each after a run that was not one MPI job): two
    entries, each with its cell's count and reason, not one labelled by the first cell."""
    from nearmetal.analysis.analyze import analyze
    from nearmetal.report.summaries import failures_summary

    text = '[study]\nname = "p"\nrepetitions = 3\nwarmup = 0\n[matrix]\nmode = ["native"]\n' \
           'mpi = ["mpich", "openmpi"]\n[[benchmark]]\nname = "w"\ncommand = ["w"]\n'
    cfg = config_mod.parse(text)
    store, sid, _ = runner.open_study(cfg, text, tmp_path / "p.db", resume=False, say=lambda m: None)
    with store:
        for row in store.pending(sid):
            why = f"skipped: the cell of benchmark 'w' on {row['variant']} stopped after a run: not one MPI job\nmore"
            codec.store_result(store, row["id"], RunResult.skipped("t", why))
        analysis = analyze(store, n_boot=20)
    got = sorted((s["runs"], s["why"]) for s in analysis["runs"]["skipped"])
    assert got == [(3, "skipped: the cell of benchmark 'w' on native/mpich stopped after a run: not one MPI job"),
                   (3, "skipped: the cell of benchmark 'w' on native/openmpi stopped after a run: not one MPI job")]
    head, _ = failures_summary(analysis)
    assert "3 runs of w skipped: the cell of benchmark 'w' on native/mpich" in head
    from nearmetal.analysis.analyze import _first_line

    long = "skipped: " + "word " * 400 + "(keep_going = true runs them anyway)\nthe output"
    assert _first_line(long).endswith("word …") and len(_first_line(long)) <= 1202  # never mid-word
    assert _first_line(long[:300]) == long[:300]
    assert "3 runs of w skipped: the cell of benchmark 'w' on native/openmpi" in head


def test_hung_and_skipped_runs_are_counted_not_analysed_and_the_reports_say_why(tmp_path):
    from nearmetal.analysis.analyze import analyze
    from nearmetal.report.summaries import failures_summary

    text = '[study]\nname = "p"\nrepetitions = 2\nwarmup = 0\n[matrix]\nmode = ["native"]\nmpi = ["mpich"]\n' \
           '[[benchmark]]\nname = "a"\ncommand = ["a"]\n[[benchmark]]\nname = "b"\ncommand = ["b"]\n'
    cfg = config_mod.parse(text)
    store, sid, _ = runner.open_study(cfg, text, tmp_path / "p.db", resume=False, say=lambda m: None)
    with store:
        rec = [{"metric": "wall_time", "unit": "s", "value": 1.0, "point": {}}]
        for row in store.pending(sid):
            if row["benchmark"] == "b":
                result = RunResult.skipped("t", "skipped: benchmark 'b' stopped after its first run\nits output")
            elif row["block"] == 0:
                result = RunResult(HUNG, None, [], {}, None, "t", 30.0, "out\nnearmetal: hung: no end", rec)
            else:
                result = RunResult(OK, 0, [], {}, None, "t", 1.0, None, rec)
            codec.store_result(store, row["id"], result)
        analysis = analyze(store, n_boot=20)
        assert len(store.records(sid)) == 1  # only the ok run's
    runs = analysis["runs"]
    assert runs["by_status"] == {"hung": 1, "ok": 1, SKIPPED: 2}
    assert [f["status"] for f in runs["failures"]] == ["hung"] and "hung: no end" in runs["failures"][0]["stderr_tail"]
    assert runs["skipped"] == [{"benchmark": "b", "runs": 2,
                                "why": "skipped: benchmark 'b' stopped after its first run"}]
    head, first = failures_summary(analysis)
    assert head.startswith("1 of 4 runs failed, timed out or hung (hung 1, ok 1, skipped 2).")
    assert "2 runs of b skipped: benchmark 'b' stopped after its first run" in head and first["status"] == "hung"


def test_a_resumed_study_skips_the_runs_its_stopped_benchmark_left_planned(tmp_path):
    """Interrupted while its runs were being stored skipped: on resume the rest are stored
    skipped with the same reason, none is started (this tier forbids processes)."""
    from nearmetal.study.execute.executor import Executor

    text = '[study]\nname = "p"\nrepetitions = 3\nwarmup = 0\n[matrix]\nmode = ["native"]\nmpi = ["mpich"]\n' \
           '[[benchmark]]\nname = "a"\ncommand = ["a"]\n'
    cfg = config_mod.parse(text)
    store, sid, _ = runner.open_study(cfg, text, tmp_path / "p.db", resume=False, say=lambda m: None)
    with store:
        first, second, third = store.pending(sid)
        codec.store_result(store, first["id"], RunResult("failed", 0, [], {}, None, "t", 0.1,
                                                         "nearmetal: FOM 'x' not found", []))
        codec.store_result(store, second["id"], RunResult.skipped("t", "skipped: benchmark 'a' stopped ..."))
        assert Executor(cfg, store, sid, progress=False).run_all() == (1, 1)
        rows = {r["id"]: (r["status"], r["stderr_tail"]) for r in store.runs(sid)}
    assert rows[third["id"]] == ("skipped", "skipped: benchmark 'a' stopped ...")


def test_a_misspelt_kernel_is_named_once_with_the_closest():
    with pytest.raises(NearmetalError) as e:
        config_mod.parse('[study]\nname = "k"\n[matrix]\nmode = ["native"]\nmpi = ["mpich"]\n'
                         '[[benchmark]]\nkernel = "latencyy"\n', source="k.toml")
    said = str(e.value)
    assert said.endswith("the closest is 'latency')") and said.count("'latencyy'") == 1, said


def test_a_pattern_re2_refuses_is_quoted_as_written():
    """Not with the multi-line flag nearmetal puts before it: '(missing ): (a', not '(?m)(a'."""
    from nearmetal.apps.linear import compiled

    with pytest.raises(ValueError) as e:
        compiled("(a")
    assert "(?m)" not in str(e.value) and "missing ): (a;" in str(e.value), str(e.value)


def test_an_io_study_file_given_to_study_says_which_command_runs_it():
    with pytest.raises(NearmetalError, match=r"an I/O study file .*run it with `nearmetal io sweep io\.toml`"):
        config_mod.parse('[study]\nname = "io"\n[io]\nlibraries = ["posix"]\n', source="io.toml")


def test_explain_skips_the_runs_a_stopped_cell_left_in_the_list_it_read(tmp_path, monkeypatch):
    """explain runs the pending runs it read once: a run that stops its cell (its ranks were
    not one MPI job) leaves the rest of that list skipped, as the study's loop does, not
    launched only to be thrown away (a review found 4 launches and 4 'other runs skipped')."""
    import time

    from nearmetal.explain import stage
    from nearmetal.study.execute.executor import Executor

    text = '[study]\nname = "p"\nrepetitions = 4\nwarmup = 0\n[matrix]\nmode = ["native"]\nmpi = ["mpich"]\n' \
           '[[benchmark]]\nname = "a"\ncommand = ["a"]\n'
    cfg = config_mod.parse(text)
    store, sid, _ = runner.open_study(cfg, text, tmp_path / "p.db", resume=False, say=lambda m: None)
    launched = []

    def one_launch(self, spec):  # the seam: this tier starts no process
        launched.append(spec.key)
        self._history()
        codec.store_result(self.store, spec.run_id, RunResult("failed", 0, [], {}, None, "t", 0.1, "lone", []))
        self._stops.stop(self.store, self.study_id, spec, "not one MPI job", "", "t", cell=True)
        return "failed"

    monkeypatch.setattr(Executor, "run", one_launch)
    with store:
        assert stage._run_pending(cfg, store, sid, time.monotonic() + 60, lambda m: None, None)
        statuses = sorted(r["status"] for r in store.runs(sid))
    assert len(launched) == 1 and statuses == ["failed", SKIPPED, SKIPPED, SKIPPED], (launched, statuses)
