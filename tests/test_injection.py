"""No shell injection through any file nearmetal generates from user input: the sbatch
script (Slurm options from the command line and study files, env values, arguments, the job
directory), slurm.conf (the cluster directory), the hints file and FMS namelist of
`io best`, and the podman storage paths. Bad values are refused in one line before anything
is written, and nothing they smuggle in ever runs (a marker file is never created)."""

import json
import shlex
import sqlite3
import subprocess
from pathlib import Path

import pytest

from conftest import assert_one_line_error, local_slurm_env, nearmetal
from io_files import parse_hints_file
from nearmetal.cli import main
from nearmetal.errors import NearmetalError
from nearmetal.io import best as best_mod
from nearmetal.run import Plan, RunRequest
from nearmetal.slurm import batch, cluster_conf, options
from nearmetal.study.plan import study_file as study_config

# A good value per option, made bad by each payload appended to it.
GOOD = {"partition": "debug", "time": "10", "account": "proj", "export": "ALL,FOO=bar"}
CLI_FLAG = {"partition": "--partition", "time": "--time", "account": "--account", "export": "--export"}
PAYLOADS = {"newline": "\ntouch {m}", "semicolon": "; touch {m}", "substitution": "$(touch {m})",
            "backticks": "`touch {m}`"}


@pytest.fixture
def marker(tmp_path):
    m = tmp_path / "MARKER"
    yield m
    assert not m.exists(), "an injected command ran"


def bad(key, payload, marker):
    return GOOD[key] + PAYLOADS[payload].format(m=marker)


# -- command line -------------------------------------------------------------------------------

@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("key", GOOD)
def test_bad_slurm_option_on_the_command_line_is_refused(key, payload, marker, capsys):
    rc = main(["run", "--scheduler", "slurm", "--dry-run", "--mpi", "mpich", CLI_FLAG[key], bad(key, payload, marker),
               "--", "/bin/true"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert err.startswith(f"nearmetal run: error: {CLI_FLAG[key]}: expected ")


@pytest.mark.parametrize("command", [["run", "--scheduler", "slurm", "--dry-run", "--mpi", "mpich"],
                                     ["bench", "latency", "--scheduler", "slurm", "--dry-run", "--mpi", "mpich"]])
def test_bad_slurm_option_exits_2_in_one_line(command, marker):
    out = nearmetal(*command, "--partition", bad("partition", "newline", marker), "--", "/bin/true")
    err = assert_one_line_error(out)
    assert out.returncode == 2 and "--partition: expected partition names" in err


# -- study files ---------------------------------------------------------------------------------

def study_file(tmp_path, slurm, io=False):
    lines = [f"{k} = {json.dumps(v)}" for k, v in slurm.items()]
    if io:
        body = f'[io]\ngrid = [8, 8, 1]\ndir = "{tmp_path}/target"\nmpi = ["mpich"]\n'
    else:
        body = '[matrix]\nmode = ["native"]\nmpi = ["mpich"]\n[[benchmark]]\nkernel = "pingpong"\n'
    path = tmp_path / "study.toml"
    path.write_text('[study]\nname = "inj"\nscheduler = "slurm"\n[slurm]\n' + "\n".join(lines) + "\n" + body)
    return path


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("key", GOOD)
def test_bad_slurm_value_in_a_study_file_names_the_key(tmp_path, key, payload, marker, capsys):
    path = study_file(tmp_path, {key: bad(key, payload, marker)})
    rc = main(["study", str(path), "--dry-run"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert f"{path}: slurm.{key}: expected " in err


def test_bad_slurm_value_in_study_and_io_study_files_from_the_cli(tmp_path, marker):
    err = assert_one_line_error(nearmetal("study", study_file(tmp_path, {"time": bad("time", "newline", marker)}),
                                          "--dry-run"))
    assert "slurm.time: expected a Slurm time limit" in err
    path = study_file(tmp_path, {"account": bad("account", "substitution", marker)}, io=True)
    err = assert_one_line_error(nearmetal("io", "sweep", path, "--dry-run"))
    assert "slurm.account: expected an account name" in err


def test_good_slurm_values_in_a_study_file_are_kept(tmp_path):
    values = {"partition": "debug,long", "nodes": 2, "time": "1-02:03:04", "account": "proj.a-1",
              "export": "ALL,FOO=bar,BAZ"}
    cfg = study_config.parse(study_file(tmp_path, values).read_text())
    assert cfg.slurm.model_dump() == values


# -- the rules -----------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["0", "10", "10:30", "1:02:03", "2-12", "2-12:30", "2-12:30:15", "UNLIMITED",
                                   "infinite"])
def test_slurm_time_formats_accepted(value):
    assert options.time_limit(value) == value


@pytest.mark.parametrize("value", ["", "1:2:3:4", "1-", "-1", "1h", "1-2-3", " 5", "5 ", "5\n", "\u0663",
                                   "\u0131nf\u0131n\u0131te", "1-2:3:4:5"])
def test_slurm_time_formats_refused(value):
    with pytest.raises(NearmetalError, match="--time: expected a Slurm time limit"):
        options.time_limit(value)


@pytest.mark.parametrize("check, good, bad_values", [
    (options.partition, ["debug", "debug,long", "gpu_a100-x.1"], ["", "a,,b", ",a", "a,", "a b", "-a", "a;b", "\u00e4",
                                                                  "a\n", "a#b"]),
    (options.account, ["proj", "Proj_1.x-y"], ["", "a,b", "a b", ".a", "a'b", "a\n"]),
    (options.export, ["ALL", "none", "NIL", "FOO", "ALL,FOO=bar", "FOO=,BAR=a/b:c@d+e-f.g", "all,X=1"],
     ["", "ALL,", "FOO=a b", "1FOO=x", "=x", "FOO=$(x)", "FOO=`x`", "FOO=a;b", "FOO=a#b", "FOO=a\nb", "FOO='a'",
      "FOO=a|b", "FOO=a&b", "FOO=\u00e9"]),
    (options.nodes, [1, 16, "3"], [0, -1, True, "x", "1\n", "\u0663", 1.5, None]),
])
def test_slurm_value_rules(check, good, bad_values):
    for value in good:
        assert check(value) == (int(value) if check is options.nodes else value)
    for value in bad_values:
        with pytest.raises(NearmetalError) as e:
            check(value)
        assert "\n" not in str(e.value) and ": expected " in str(e.value)


def test_unknown_slurm_key_is_refused():
    with pytest.raises(NearmetalError, match="unknown Slurm option 'qos'"):
        options.check_slurm({"qos": "high"})


# -- the batch script itself ---------------------------------------------------------------------

def sbatch_directives(text):
    """The #SBATCH lines sbatch reads: those before the first command line."""
    out = []
    for line in text.splitlines()[1:]:
        if line.strip() and not line.startswith("#"):
            break
        if line.startswith("#SBATCH"):
            out.append(line)
    return out


def request(slurm=None, **kw):
    return RunRequest("/bin/true", [], options=slurm or {}, **kw)


def test_script_refuses_what_bypassed_the_checks(tmp_path):
    """script() checks again: a RunRequest built by other code cannot smuggle a line in."""
    plan = Plan(["/bin/true"], {}, [])
    with pytest.raises(NearmetalError, match="--partition"):
        batch.script(plan, request({"partition": "debug\ntouch x"}), [request()], tmp_path)
    with pytest.raises(NearmetalError, match="not an environment variable name"):
        batch.script(Plan(["/bin/true"], {"A=B\ntouch x;X": "1"}, []), request(), [request()], tmp_path)
    with pytest.raises(NearmetalError, match="NUL"):
        batch.script(Plan(["/bin/true", "a\0b"], {}, []), request(), [request()], tmp_path)
    with pytest.raises(NearmetalError, match="the job directory"):
        batch.script(plan, request(), [request()], tmp_path / "a\ntouch x")
    with pytest.raises(NearmetalError, match="the job directory"):
        batch.script(plan, request(), [request()], tmp_path / "a b")  # sbatch would split it
    with pytest.raises(NearmetalError, match="ranks"):
        batch.script(plan, request(), [request(ranks="2\ntouch x")], tmp_path)


def test_env_values_and_arguments_cannot_break_out_of_the_script(tmp_path, marker):
    """Proof by running the generated script with bash: shlex.quote keeps newlines, $(...),
    backticks and quotes inside the word, and sbatch would read no extra directive."""
    evil = f"x'\n#SBATCH --partition=evil\ntouch {marker}; $(touch {marker}) `touch {marker}` \"'\r\t$HOME"
    out_file = tmp_path / "out"
    out_q = shlex.quote(str(out_file))
    argv = ["/bin/sh", "-c", f'printf %s "$NM_EVIL" > {out_q}; printf %s "$1" >> {out_q}', "sh", evil]
    text = batch.script(Plan(argv, {"NM_EVIL": evil}, []), request({"partition": "debug"}), [request()], tmp_path)
    assert sbatch_directives(text) == [
        "#SBATCH --job-name=nearmetal", f"#SBATCH --output={tmp_path}/job.out", f"#SBATCH --error={tmp_path}/job.err",
        "#SBATCH --export=ALL", "#SBATCH --partition=debug", "#SBATCH --ntasks=2"]
    job = tmp_path / "job.sh"
    job.write_text(text)
    done = subprocess.run(["bash", str(job)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert out_file.read_bytes().decode() == evil + evil  # bytes: read_text would turn \r into \n


# -- through a real local Slurm ------------------------------------------------------------------

@pytest.fixture(scope="module")
def slurm_env(tmp_path_factory):
    yield from local_slurm_env(tmp_path_factory, nodes=2)


def test_good_values_appear_in_the_dry_run_script(slurm_env):
    out = nearmetal("run", "--scheduler", "slurm", "--dry-run", "--mpi", "mpich", "--partition", "debug,long",
                    "--time", "1-02:03:04", "--account", "proj", "--export", "ALL,FOO=bar", "--nodes", "2", "-n", "2",
                    "--", "/bin/true", env=slurm_env)
    assert out.returncode == 0, out.stderr
    directives = sbatch_directives(out.stdout.split(":\n", 1)[1])
    for line in ("--partition=debug,long", "--time=1-02:03:04", "--account=proj", "--export=ALL,FOO=bar",
                 "--nodes=2", "--ntasks=2"):
        assert f"#SBATCH {line}" in directives


def test_real_job_with_good_values_and_a_hostile_env_value(slurm_env, tmp_path, marker):
    """One real sbatch job: good option values pass Slurm; a hostile --env value arrives intact."""
    evil = f"a\ntouch {marker}; $(touch {marker}) `touch {marker}`"
    out = nearmetal("run", "--scheduler", "slurm", "--mpi", "mpich", "-n", "1", "--partition", "debug",
                    "--time", "0-00:05:00", "--export", "ALL,NM_PROBE=ok/1", "--env", f"NM_EVIL={evil}", "--",
                    "/bin/sh", "-c", 'printf "%s|%s" "$NM_PROBE" "$NM_EVIL"', env=slurm_env, timeout=180)
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"ok/1|{evil}"


# -- slurm.conf: the cluster directory -----------------------------------------------------------

@pytest.mark.parametrize("name, expect", [
    ("file", "exists and is not a directory"),
    ("file/sub", "Not a directory"),
    ("/proc/x", "cannot create the cluster directory /proc/x"),
    ("a" * 300, "longer than 255 bytes"),
    ("a\nSlurmUser=evil", "cannot go into slurm.conf"),
    ("a%h", "cannot go into slurm.conf"),
    ("a b", "cannot go into slurm.conf"),
    ('a"b', "cannot go into slurm.conf"),
])
def test_bad_cluster_directory_is_a_one_line_error(tmp_path, name, expect):
    (tmp_path / "file").write_text("")
    d = name if name.startswith("/") else tmp_path / name
    out = nearmetal("cluster", "up", "--dir", d, timeout=60)
    err = assert_one_line_error(out)
    assert out.returncode == 2 and err.startswith("nearmetal cluster up: error: ") and expect in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]  # nothing created


def test_slurm_conf_refuses_an_unsafe_host_name(tmp_path):
    with pytest.raises(NearmetalError, match="the host name"):
        cluster_conf.render_conf(tmp_path, ["n1"], [17000, 17001], "host\nSlurmUser=evil")
    text = cluster_conf.render_conf(tmp_path, ["n1"], [17000, 17001], "host")
    assert all(line.isprintable() for line in text.splitlines())


# -- io best: hints file and FMS namelist --------------------------------------------------------

def best_result(tmp_path, **changes):
    result = {"best": "shared/mpiio io=1x1 aggr=1 read=serial", "study": "s", "variant": "native/mpich",
              "metric": "total", "hints": {"cb_config_list": "*:1", "cb_nodes": "1"}, "hints_status": {},
              "layout": "2x1"}
    return result | changes


@pytest.mark.parametrize("hints", [{"cb_nodes": "1\nstriping_factor 64"}, {"cb_nodes": "1 2"},
                                   {"cb_nodes\nx": "1"}, {"cb nodes": "1"}, {"cb_nodes": ""},
                                   {"cb_nodes": "#1"}, {"cb_nodes": "$(touch x)"}])
def test_hints_file_refuses_a_hint_that_is_not_one_line(tmp_path, hints):
    path = tmp_path / "best.hints"
    with pytest.raises(NearmetalError, match="cannot write the hints file") as e:
        best_mod.hints_file(best_result(tmp_path, hints=hints), path)
    assert "\n" not in str(e.value) and not path.exists()


def test_hints_file_and_namelist_refuse_a_value_starting_a_line(tmp_path):
    with pytest.raises(NearmetalError, match="newline or control character"):
        best_mod.hints_file(best_result(tmp_path, study="s\ncb_nodes 99"), tmp_path / "best.hints")
    with pytest.raises(NearmetalError, match="newline or control character"):
        best_mod.hints_file(best_result(tmp_path), tmp_path / "x\ncb_nodes 99" / "best.hints")
    with pytest.raises(NearmetalError, match="FMS namelist"):
        best_mod.namelist(best_result(tmp_path, study="s\n&mpp_io_nml\n  pnetcdf = .true.\n/"))
    with pytest.raises(NearmetalError, match="domain layout"):
        best_mod.namelist(best_result(tmp_path, best="file-per-rank/posix read=serial", layout="2x1\n/\n&x"))
    good = tmp_path / "best.hints"
    best_mod.hints_file(best_result(tmp_path), good)
    assert parse_hints_file(good.read_text()) == {"cb_config_list": "*:1", "cb_nodes": "1"}


def iobench_study(tmp_path, name, hint):
    """A regular study of one nm-iobench configuration whose -H hint is `hint`."""
    label = "shared/mpiio io=1x1 read=serial"
    args = ["-x", "8", "-y", "8", "-z", "1", "-t", "1", "-l", "2x1", "-p", "shared", "-L", "mpiio", "-T", "double",
            "-i", "1x1", "-H", hint, "-r", "serial"]
    path = tmp_path / "iob.toml"
    path.write_text(f'[study]\nname = "iob"\nrepetitions = 1\nwarmup = 0\nworkdir = "{tmp_path / "w"}"\n'
                    f'[matrix]\nmode = ["native"]\nmpi = ["mpich"]\nranks = [2]\n'
                    f"[[benchmark]]\nkernel = \"iobench\"\nname = {json.dumps(name)}\nargs = {json.dumps(args)}\n")
    return path


def test_io_best_refuses_a_stored_hint_that_would_inject_a_line(tmp_path):
    """End to end: a study measured for real with a hostile hint; `io best` writes no file."""
    db = tmp_path / "res" / "study.db"
    path = iobench_study(tmp_path, "shared/mpiio io=1x1 read=serial", "cb_config_list=*:1\nstriping_factor 64")
    out = nearmetal("study", path, "--db", db, "--no-progress", "--out", tmp_path / "rep", timeout=300)
    assert out.returncode == 0, out.stderr
    assert sqlite3.connect(db).execute("SELECT status FROM runs").fetchall() == [("ok",)]
    err = assert_one_line_error(nearmetal("io", "best", "--db", db))
    assert "cannot write the hints file" in err and "striping_factor 64" in err
    assert not (db.parent / "best.hints").exists() and not (db.parent / "best.nml").exists()


def test_io_best_ignores_a_label_that_is_not_canonical(tmp_path):
    """A benchmark name with a newline parses as a label (split at blanks) but is not one io
    sweep writes: it is not taken as a configuration, so it never reaches a file."""
    db = tmp_path / "study.db"
    path = iobench_study(tmp_path, "shared/mpiio\nio=1x1 read=serial", "cb_nodes=1")
    out = nearmetal("study", path, "--db", db, "--no-progress", "--out", tmp_path / "rep", timeout=300)
    assert out.returncode == 0, out.stderr
    err = assert_one_line_error(nearmetal("io", "best", "--db", db, "--study", "iob"))
    assert "has no I/O configurations" in err
    assert not (tmp_path / "best.hints").exists()


# -- podman's private storage ---------------------------------------------------------------------

def test_podman_driver_name_is_checked(monkeypatch, tmp_path):
    from nearmetal.runtimes import _podman_storage as podman_storage

    monkeypatch.setenv("NEARMETAL_HOME", str(tmp_path))
    monkeypatch.setenv("NEARMETAL_PODMAN_DRIVER", "vfs\ntouch x")
    with pytest.raises(NearmetalError, match="NEARMETAL_PODMAN_DRIVER"):
        podman_storage.podman_argv()
    assert not (tmp_path / "podman").exists() or not any((tmp_path / "podman").iterdir())
    monkeypatch.setenv("NEARMETAL_PODMAN_DRIVER", "vfs")
    assert podman_storage.podman_argv()[-2:] == ["--storage-driver", "vfs"]
    assert Path(podman_storage.conf_path()).read_text() == podman_storage.CONTAINERS_CONF
