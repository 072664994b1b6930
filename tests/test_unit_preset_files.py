"""Presets written as TOML files (apps/preset_file.py): lookup order, validation with one-line
errors naming the file and key, built-in names, the listing. No process is started."""

import os
import re
import shutil

import pytest

from nearmetal.apps import preset_file, preset_list, presets
from nearmetal.errors import NearmetalError
from nearmetal.study.plan import study_file as config_mod

pytestmark = pytest.mark.unit

ROOT = os.path.join(os.path.dirname(__file__), "..")
EXAMPLE = os.path.join(ROOT, "examples", "presets", "lammps.toml")


@pytest.fixture
def places(tmp_path, monkeypatch):
    """A current directory and a nearmetal home of the test's own."""
    cwd, home = tmp_path / "cwd", tmp_path / "home"
    (home / "presets").mkdir(parents=True)
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("NEARMETAL_HOME", str(home))
    return cwd, home / "presets"


def test_the_docs_example_is_the_example_file_verbatim():
    docs = open(os.path.join(ROOT, "docs", "applications.md")).read()
    blocks = re.findall(r"```toml\n(.*?)```", docs, re.S)
    assert open(EXAMPLE).read() in blocks


def test_the_example_reads_lammps_output(places):
    shutil.copy(EXAMPLE, places[0] / "lammps.toml")
    p = presets.get("lammps")
    out = "LAMMPS (2 Aug 2023)\nLoop time of 3.5 on 2 procs\n12.5 timesteps/s\n40.0 timesteps/s\nTotal wall time: 0:00:04\n"
    assert p.records({"output": out}) == [
        {"metric": "timesteps_per_s", "unit": "steps/s", "value": 40.0, "point": {}},
        {"metric": "loop_time", "unit": "s", "value": 3.5, "point": {}}]
    assert p.program_version({"output": out}) == "2 Aug 2023"
    with pytest.raises(NearmetalError, match="did not print what `success` asks for"):
        p.records({"output": "12.5 timesteps/s\nLoop time of 3.5 on 2 procs\n"})


def test_the_current_directory_comes_before_the_home(places):
    cwd, home = places
    (home / "app.toml").write_text('[[fom]]\nname = "from_home"\nregex = "t=([0-9]+)"\n')
    assert [f.name for f in presets.get("app").foms] == ["from_home"]
    (cwd / "app.toml").write_text('[[fom]]\nname = "from_cwd"\nregex = "t=([0-9]+)"\n')
    assert [f.name for f in presets.get("app").foms] == ["from_cwd"]
    assert presets.get("app").path == str(cwd / "app.toml")


def test_a_built_in_name_always_means_the_built_in(places):
    (places[0] / "gromacs.toml").write_text('[study]\nname = "a study file, not a preset"\n')
    assert presets.get("gromacs").title == "GROMACS"
    rows = {r["name"]: r for r in preset_list.entries()}
    assert rows["gromacs"]["source"] == "built-in"   # the study file in the directory is not listed
    (places[1] / "osu.toml").write_text('[[fom]]\nname = "x"\nregex = "([0-9]+)"\n')
    listed = [r for r in preset_list.entries() if r["source"] != "built-in"]
    assert listed == [{"name": "osu", "source": str(places[1] / "osu.toml"), "title": "", "foms": "", "command": [],
                       "problem": "not used: 'osu' is a built-in preset (rename the file)"}]


@pytest.mark.parametrize("text, expect", [
    ('title = "x"\n', "fom: required key is missing"),
    ('[[fom]]\nname = "x"\nregex = "no group"\n', "fom[0].regex: needs a group"),
    ('[[fom]]\nname = "x"\nregex = "(a)\\\\1"\n', "fom[0].regex:"),               # a backreference: not RE2
    ('[[fom]]\nname = "x"\nregex = "([0-9]+)"\nfile = "../etc/passwd"\n', "fom[0].file: file must be a relative path"),
    ('[[fom]]\nname = "x"\nregex = "([0-9]+)"\n[[fom]]\nname = "x"\nregex = "([0-9]+)"\n', "named twice"),
    ('success_in = "/etc/x"\n[[fom]]\nname = "x"\nregex = "([0-9]+)"\n', "success_in: success_in must be a relative path"),
    ('version = "no group"\n[[fom]]\nname = "x"\nregex = "([0-9]+)"\n', "version: needs a group"),
    ('colour = "red"\n[[fom]]\nname = "x"\nregex = "([0-9]+)"\n', "colour: unknown key"),
    ('[[fom]]\nname = "x"\nregex = "([0-9]+)"\nunit = 3\n', "fom[0].unit: Input should be a valid string"),
    ('[[fom\n', "not valid TOML"),
])
def test_a_bad_preset_file_is_one_line_naming_the_file_and_key(places, text, expect):
    path = places[0] / "app.toml"
    path.write_text(text)
    with pytest.raises(NearmetalError) as e:
        presets.get("app")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"preset file {path}: ") and expect in msg, msg


def test_a_study_refuses_an_unknown_or_broken_preset_naming_the_key(places):
    study = ('[study]\nname = "s"\nrepetitions = 3\n[baseline]\nmode = "native"\n[matrix]\nmode = ["native"]\n'
             'mpi = ["openmpi"]\n[[benchmark]]\ncommand = ["app"]\npreset = "app"\n')
    with pytest.raises(NearmetalError, match=r"benchmark\[0\]\.preset: unknown preset 'app': not a built-in one "
                                             r"\(gromacs, hpcc, osu, qe\) and no file .*app\.toml or .*presets/app\.toml"):
        config_mod.parse(study)
    (places[0] / "app.toml").write_text('[[fom]]\nname = "x"\nregex = "nothing"\n')
    with pytest.raises(NearmetalError, match=r"benchmark\[0\]\.preset: preset file .*app\.toml: fom\[0\]\.regex"):
        config_mod.parse(study)
    (places[0] / "app.toml").write_text('[[fom]]\nname = "x"\nregex = "t=([0-9]+)"\n')
    assert config_mod.parse(study).benchmark[0].preset == "app"


@pytest.mark.parametrize("name", ["../x", "a/b", ".hidden", "x.y", "", "a" * 65])
def test_a_name_that_is_not_a_plain_stem_is_never_a_path(places, name):
    (places[0].parent / "x.toml").write_text('[[fom]]\nname = "x"\nregex = "([0-9]+)"\n')
    assert preset_file.find(name) is None
    with pytest.raises(NearmetalError, match="unknown preset"):
        presets.get(name)


def test_a_link_or_a_fifo_is_refused_not_followed(places):
    target = places[0].parent / "real.toml"
    target.write_text('[[fom]]\nname = "x"\nregex = "([0-9]+)"\n')
    os.symlink(target, places[0] / "linked.toml")
    with pytest.raises(NearmetalError, match="linked.toml: a symbolic link"):
        presets.get("linked")
    os.mkfifo(places[0] / "pipe.toml")
    with pytest.raises(NearmetalError, match="pipe.toml: a FIFO"):
        presets.get("pipe")


def test_a_success_file_is_among_the_files_read(places):
    (places[0] / "app.toml").write_text('success = "done"\nsuccess_in = "run.log"\n'
                                        '[[fom]]\nname = "x"\nregex = "([0-9]+)"\nfile = "out.txt"\n')
    p = presets.get("app")
    assert p.files() == ("out.txt", "run.log")
    assert p.records({"output": "", "out.txt": "7", "run.log": "done"})[0]["value"] == 7.0
    with pytest.raises(NearmetalError, match="write in run.log"):
        p.records({"output": "done", "out.txt": "7", "run.log": ""})
