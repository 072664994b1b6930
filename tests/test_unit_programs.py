"""Program benchmarks (command = [...]): study-file validation, figures of merit read from
output and files, presets, staging. No process is started."""

import os

import pytest

from nearmetal.apps import presets
from nearmetal.apps.fom import Fom, FomError, records
from nearmetal.errors import NearmetalError
from nearmetal.study.plan import study_file as config_mod
from nearmetal.study.config import program
from nearmetal.analysis.stats import direction_for_unit

pytestmark = pytest.mark.unit

HEAD = """
[study]
name = "app"
repetitions = 3
[baseline]
mode = "native"
[matrix]
mode = ["native"]
mpi = ["openmpi"]
"""


def study(bench):
    return config_mod.parse(HEAD + "[[benchmark]]\n" + bench)


def refused(bench):
    with pytest.raises(NearmetalError) as e:
        study(bench)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


# -- study files ----------------------------------------------------------------------------


def test_a_command_benchmark_with_foms():
    cfg = study('command = ["my_solver", "-i", "input.nml"]\n'
                '[[benchmark.fom]]\nname = "step_time"\nregex = \'Time per step: ([0-9.eE+-]+) s\'\nunit = "s"\n'
                '[[benchmark.fom]]\nname = "cells_per_s"\nregex = \'([0-9.]+) cells/s\'\nunit = "cells/s"\n'
                "success = 'Run completed'\n")
    b = cfg.benchmark[0]
    assert b.is_program() and b.label == "my_solver" and b.kernel is None
    assert [f.name for f in b.fom] == ["step_time", "cells_per_s"]
    assert b.fom[1].success == "Run completed"


@pytest.mark.parametrize("bench, expect", [
    ('command = ["p"]\n[[benchmark.fom]]\nname = "t"\nregex = "Time: [0-9.]+"\n', "needs a group"),
    ('command = ["p"]\npreset = "nosuch"\n', "unknown preset 'nosuch'"),
    ('command = ["p"]\n[[benchmark.fom]]\nname = "t"\nregex = "(["\n', "not a regular expression"),
    ('kernel = "latency"\ncommand = ["p"]\n', "not both or neither"),
    ('name = "x"\n', "not both or neither"),
    ('command = []\n', "expected the program"),
    ('kernel = "latency"\npreset = "osu"\n', "preset applies to command"),
    ('command = ["p"]\n[[benchmark.fom]]\nname = "t"\nregex = "(x)"\nfile = "../etc/passwd"\n', "relative path"),
    ('command = ["p"]\ninputs = ["a/x.nml", "b/x.nml"]\n', "same name"),
])
def test_bad_program_benchmarks_are_one_line_errors(bench, expect):
    assert expect in refused(bench)


def test_every_problem_is_reported_at_once():
    msg = refused('command = ["p"]\npreset = "nosuch"\n[[benchmark.fom]]\nname = "t"\nregex = "x"\n')
    assert "unknown preset" in msg and "needs a group" in msg


def test_inputs_must_exist_before_anything_runs(tmp_path):
    cfg = study(f'command = ["p"]\ninputs = ["{tmp_path}/absent.nml"]\n')
    with pytest.raises(NearmetalError, match="absent.nml does not exist"):
        program.check_inputs(cfg)


# -- figures of merit -------------------------------------------------------------------------


def fom(**kw):
    return Fom(**{"name": "t", "regex": r"Time: ([0-9.eE+-]+)", "unit": "s", **kw})


def test_the_last_match_counts_and_fortran_exponents_read():
    out = records([fom()], {"output": "Time: 5\nTime: 1.5D+00\n"})
    assert out == [{"metric": "t", "unit": "s", "value": 1.5, "point": {}}]


def test_a_missing_fom_names_itself_and_shows_the_output_end():
    with pytest.raises(FomError, match=r"FOM 't' not found in the output .*segfault"):
        records([fom()], {"output": "starting\nsegfault\n"})


def test_a_value_that_is_not_a_number_fails():
    with pytest.raises(FomError, match="is not a number"):
        records([fom(regex=r"Time: (\S+)")], {"output": "Time: fast\n"})
    with pytest.raises(FomError, match="not a finite number"):
        records([fom(regex=r"Time: (\S+)")], {"output": "Time: nan\n"})


def test_a_file_fom_reads_the_file_and_says_when_it_was_not_written():
    f = fom(file="solver.log")
    assert records([f], {"output": "", "solver.log": "Time: 2\n"})[0]["value"] == 2.0
    with pytest.raises(FomError, match="wrote no file 'solver.log'"):
        records([f], {"output": "Time: 2\n"})


def test_success_must_match():
    with pytest.raises(FomError, match="did not print what `success` asks for"):
        records([fom(success="Run completed")], {"output": "Time: 2\n"})


@pytest.mark.parametrize("unit, lower, stored, higher_is_better", [
    ("s", None, "s", False),
    ("ns/day", None, "ns/day", True),
    ("cells/s", True, "cells/s (lower is better)", False),
    ("score", False, "score (higher is better)", True),
    ("score", True, "score", False),
])
def test_direction_comes_from_the_unit_and_can_be_overridden(unit, lower, stored, higher_is_better):
    f = fom(unit=unit, lower_is_better=lower)
    assert f.stored_unit() == stored
    assert direction_for_unit(stored) is higher_is_better


def test_program_records_end_with_the_wall_time():
    cfg = study('command = ["p"]\n[[benchmark.fom]]\nname = "t"\nregex = "Time: ([0-9.]+)"\nunit = "s"\n')
    out = program.records(cfg.benchmark[0], {"output": "Time: 3\n"}, 1.25)
    assert [(r["metric"], r["value"]) for r in out] == [("t", 3.0), ("wall_time", 1.25)]


def test_a_program_without_foms_still_has_its_wall_time():
    cfg = study('command = ["p"]\n')
    assert program.records(cfg.benchmark[0], {"output": ""}, 0.5) == [
        {"metric": "wall_time", "unit": "s", "value": 0.5, "point": {}}]


# -- presets --------------------------------------------------------------------------------


def test_presets_come_from_the_registry():
    assert {"osu", "gromacs", "hpcc", "qe"} <= set(presets.names())


OSU_OUT = """# OSU MPI Latency Test v7.2
# Size          Latency (us)
# Datatype: MPI_CHAR.
1                       0.27
8                       0.31
"""


def test_osu_preset_reads_the_table_per_size():
    out = presets.get("osu").records({"output": OSU_OUT})
    assert [(r["metric"], r["point"], r["value"]) for r in out] == [
        ("latency", {"size": 1}, 0.27), ("latency", {"size": 8}, 0.31)]
    assert presets.get("osu").program_version({"output": OSU_OUT}) == "v7.2"
    with pytest.raises(FomError, match="no OSU result table"):
        presets.get("osu").records({"output": "MPI_Init failed\n"})


# -- staging --------------------------------------------------------------------------------


def test_staging_makes_a_fresh_directory_with_copies(tmp_path):
    (tmp_path / "in.nml").write_text("n=1\n")
    (tmp_path / "grids").mkdir()
    (tmp_path / "grids" / "g1").write_text("g")
    work = tmp_path / "work"
    program.stage(str(work), [str(tmp_path / "in.nml"), str(tmp_path / "grids")])
    (work / "left-over").write_text("from the previous run")
    (work / "in.nml").write_text("changed by the program")
    program.stage(str(work), [str(tmp_path / "in.nml"), str(tmp_path / "grids")])
    assert sorted(os.listdir(work)) == ["grids", "in.nml"]
    assert (work / "in.nml").read_text() == "n=1\n" and (work / "grids" / "g1").read_text() == "g"


def test_staging_never_empties_through_a_link(tmp_path):
    (tmp_path / "precious").mkdir()
    (tmp_path / "precious" / "data").write_text("keep")
    os.symlink(tmp_path / "precious", tmp_path / "work")
    with pytest.raises(NearmetalError, match="symbolic link"):
        program.stage(str(tmp_path / "work"), [])
    assert (tmp_path / "precious" / "data").read_text() == "keep"


def test_outputs_read_only_the_files_named(tmp_path):
    (tmp_path / "md.log").write_text("Performance: 1\n")
    texts = program.read_outputs(str(tmp_path), ("md.log", "absent.log"), "out", "err")
    assert texts == {"output": "out\nerr", "md.log": "Performance: 1\n"}


def test_witness_lines_are_parsed_in_rank_order():
    from nearmetal.witness import parse

    err = ("noise\nnm-witness: rank=1 pid=7 program=/a library=/l.so inode=3 version=MPICH Version:\t4.0.2\n"
           "nm-witness: rank=0 pid=6 program=/a library=/l.so inode=3 version=Open MPI v4.1.4, package: x\n")
    got = parse(err)
    assert [w["rank"] for w in got] == ["0", "1"]
    assert got[0]["version"] == "Open MPI v4.1.4, package: x" and got[1]["version"] == "MPICH Version:\t4.0.2"


def test_an_image_given_by_path_gets_a_short_stable_label():
    from nearmetal.study.plan.plan import image_label, variant_id

    a = variant_id({"mode": "hybrid", "runtime": "charliecloud", "mpi": "mpich",
                    "image": "/home/u/.cache/nearmetal/images/x/rootfs"})
    assert a.startswith("hybrid/charliecloud/mpich/x-") and len(a.rsplit("/", 1)[1]) == len("x-") + 8
    assert image_label("/data/app.sif") != image_label("/other/app.sif")  # never merged
    assert image_label("/data/app.sif") == image_label("/data/app.sif") and image_label("default") == "default"


def test_large_inputs_are_linked_natively_and_placeholders_in_containers(tmp_path):
    small, big, bigdir = tmp_path / "small.nml", tmp_path / "big.dat", tmp_path / "grids"
    small.write_text("x")
    big.write_bytes(b"0" * 2000)
    bigdir.mkdir()
    (bigdir / "g").write_bytes(b"1" * 3000)
    inputs = [str(small), str(big), str(bigdir)]
    assert program.large_inputs(inputs, limit=1000) == [str(big), str(bigdir)]
    native, container = tmp_path / "n", tmp_path / "c"
    program.stage(str(native), inputs, in_container=False, limit=1000)
    assert os.readlink(native / "big.dat") == str(big) and os.readlink(native / "grids") == str(bigdir)
    assert (native / "small.nml").read_text() == "x" and not (native / "small.nml").is_symlink()
    program.stage(str(container), inputs, in_container=True, limit=1000)
    assert (container / "big.dat").stat().st_size == 0 and (container / "grids").is_dir()
    assert list((container / "grids").iterdir()) == []
