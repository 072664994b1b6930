"""The inputs reported in issue 10 (and issue 14's hidden second problem), one by one: each
was a traceback, a silently accepted mistake or a wrong plan; each is now one line naming
the file and the key path, with a non-zero exit. tests/test_fuzz_inputs.py generalizes
them with a few hundred generated cases."""

import os

import pytest

from test_fuzz_inputs import LONG, SMALL_IO, invoke, sandbox, write_case  # noqa: F401  (sandbox: a fixture)

STUDY_HEAD = '[study]\nname = "x"\n{study}\n{baseline}\n[matrix]\n{matrix}\n[[benchmark]]\nkernel = "{kernel}"\n{bench}\n'
NATIVE = 'mode = ["native"]\nmpi = ["openmpi"]\n'


def study_text(**parts):
    return STUDY_HEAD.format(**{"study": "", "baseline": "", "kernel": "pingpong", "bench": "", **parts,
                                "matrix": NATIVE + parts.get("matrix", "")})


@pytest.mark.parametrize("parts, expect", [
    ({"bench": 'args = ["a\\u0000b"]'}, "benchmark[0].args[0]: contains a NUL byte"),
    ({"study": 'workdir = "/proc/1/root/x"'}, "study.workdir: /proc/1/root/x: cannot be checked (/proc/1/root/x: Permission denied)"),
    ({"study": f'workdir = "/tmp/{LONG}"'}, "study.workdir: a component is longer than 255 bytes"),
    ({"study": 'workdir = "/tmp/' + "a/" * 2000 + '"'}, "study.workdir: 2001 levels deep; at most 256"),
    ({"study": 'workdir = "~nosuchuser/x"'}, "study.workdir: no such user 'nosuchuser'"),
    ({"study": "timeout = inf"}, "study.timeout: Input should be a finite number"),
    ({"study": "timeout = 1e308"}, "study.timeout: Input should be less than or equal to 604800"),
    ({"study": "timeout = nan"}, "study.timeout: Input should be a finite number"),
    ({"study": "repetitions = true"}, "study.repetitions: Input should be a valid integer; found True"),
    ({"study": "seed = 100000000000000000000"}, "study.seed: Input should be less than"),
    ({"bench": 'env = {A = "' + "x" * (1 << 20) + '"}'}, "benchmark[0].env.A: 1048576 bytes; an argument or environment value is at most 65536"),
    ({"bench": "args = [" + ", ".join(['"' + "y" * 60000 + '"'] * 20) + "]"}, "benchmark[0]: args and env are 1200020 bytes together"),
    ({"bench": "ranks = [0]"}, "benchmark[0].ranks[0]: Input should be greater than or equal to 1"),
    ({"bench": "threads = [-1]"}, "benchmark[0].threads[0]: Input should be greater than or equal to 1"),
    ({"matrix": "ranks = [1000000000000000000000000000000]"}, "matrix.ranks[0]: Input should be less than or equal to 1000000"),
    ({"bench": "threads = [2048]"}, "benchmark[0].threads[0]: Input should be less than or equal to 1024"),
    ({"kernel": "latency", "bench": "ranks = [2, 3]"}, "benchmark[0].ranks[1]: kernel 'latency' needs exactly 2 ranks, found 3"),
    ({"kernel": "latency", "matrix": "ranks = [3]"}, "matrix.ranks[0]: kernel 'latency' needs exactly 2 ranks, found 3 (benchmark[0] uses"),
    ({"bench": 'ranks = [2, 4]\nthreads = [1]\nzips = [["ranks", "threads"]]'}, "benchmark[0].zips[0]: zipped dimensions must have equal lengths"),
    ({"matrix": 'ranks = [2, 4]\nthreads = [1, 2]\nzips = [["ranks", "threads"]]', "bench": "ranks = [2]"},
     "matrix.zips[0]: zipped dimensions must have equal lengths, found {'ranks': 1, 'threads': 2} for benchmark[0]"),
    ({"bench": 'zips = [["ranks", "bogus"]]'}, "benchmark[0]: zips[0]: unknown dimension 'bogus'"),
    ({"baseline": '[baseline]\nruntime = "nope"\nmpi = "lam"'}, "baseline.runtime: Input should be 'charliecloud', 'bwrap', "
                                                             "'podman' or 'apptainer'; found 'nope'; also baseline.mpi: "
                                                             "Input should be"),
    ({"baseline": '[baseline]\nmpi = "mpich"'}, "baseline: 'native/mpich', the baseline of variant 'native/openmpi', is not"),
    ({"matrix": 'image = ["/proc/1/root"]'},
     "matrix.image[0]: /proc/1/root: cannot be looked at (Permission denied)"),
    ({"matrix": 'image = ["~nosuchuser/img"]'}, "matrix.image[0]: no such user 'nosuchuser'"),
    ({"study": "bogus = 1\nwarmup = -1"}, "study.warmup: Input should be greater than or equal to 0; found -1; also study.bogus: unknown key"),
])
def test_reported_study_inputs(parts, expect, sandbox, capsys):
    path = write_case(sandbox, study_text(**parts))
    rc, out, err = invoke(["study", str(path), "--dry-run"], capsys)
    assert rc == 2 and len(err.strip().splitlines()) == 1, (rc, err[-500:])
    assert f"{path}: {expect}" in err, err
    assert sorted(os.listdir(sandbox / "cwd" / "a" / "b")) == [] and not os.path.exists("/tmp/" + LONG)


def test_all_problems_are_shown(sandbox, capsys):
    """Issue 14: 'required key is missing (and 1 more problems)' hid the second problem."""
    path = write_case(sandbox, '[study]\ndescription = 3\n')
    rc, out, err = invoke(["study", str(path)], capsys)
    assert rc == 2
    assert err.strip() == (f"nearmetal study: error: {path}: study.name: required key is missing; also "
                           f"study.description: Input should be a valid string; found 3; also benchmark: "
                           f"required key is missing")


def test_io_shared_pattern_with_only_posix(sandbox, capsys):
    """io/preselect.py raised StopIteration for this space; now refused with the keys."""
    path = write_case(sandbox, SMALL_IO.replace('library = ["mpiio", "posix"]', 'library = ["posix"]'))
    rc, out, err = invoke(["io", "sweep", str(path), "--dry-run"], capsys)
    assert rc == 2 and f"{path}: io.space.pattern[1]: shared needs an MPI-IO library, but io.space.library " \
                       f"lists only posix" in err, err


def test_run_keys_are_unambiguous_and_ordinary_keys_unchanged():
    from nearmetal.study.plan.study_file import builtin_quickstart, parse
    from nearmetal.study.plan.plan import make_plan

    # Two different cells whose keys were one before ('|' inside names): the store kept 2 of 3.
    collide = study_text(baseline='[baseline]\nmode = "hybrid"', bench='name = "b"',
                         matrix='image = ["j", "i|n=2|t=1|hybrid/charliecloud/openmpi/j"]').replace(
        'mode = ["native"]', 'mode = ["hybrid"]')
    collide += '[[benchmark]]\nkernel = "pingpong"\nname = "b|n=2|t=1|hybrid/charliecloud/openmpi/i"\nimage = ["j"]\n'
    runs = make_plan(parse(collide), seed=1)
    assert len(runs) == 3 * 6 and len({r.key for r in runs}) == 18      # 3 cells x (1 warm-up + 5 blocks)
    assert "b%7Cn=2%7Ct=1%7Chybrid/charliecloud/openmpi/i|n=2|t=1|hybrid/charliecloud/openmpi/j#warmup0" in {r.key for r in runs}
    cfg, _ = builtin_quickstart()
    keys = {r.key for r in make_plan(cfg, seed=1)}
    assert "latency-runtimes|n=2|t=1|bind/podman/mpich/default#rep3" in keys          # as databases hold them
    assert "io-shared-mpiio|n=2|t=1|native/openmpi#warmup0" in keys


@pytest.mark.parametrize("path", ["/proc/1/root/x", "/tmp/" + LONG, "/tmp/" + "d/" * 3000, "a\0b", "/etc/passwd/x", "/proc/x"])
def test_check_workdir_gives_reasons_not_exceptions(path):
    from nearmetal.study.config.config import check_workdir

    why = check_workdir(path)
    assert isinstance(why, str) and why, why


def test_dry_run_creates_no_workdir_and_shows_it_resolved(tmp_path, monkeypatch, capsys):
    from nearmetal.cli import main

    (tmp_path / "a" / "b").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "a" / "b")
    f = tmp_path / "wd.toml"
    f.write_text('[study]\nname = "wd"\nworkdir = "../../outside/x"\n[matrix]\nmode = ["native"]\nmpi = ["mpich"]\n'
                 '[[benchmark]]\nkernel = "mpi-info"\n')
    assert main(["study", str(f), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"working directory {tmp_path / 'outside' / 'x'} (created when the study runs; nothing is created now)" in out
    assert not (tmp_path / "outside").exists()


@pytest.mark.parametrize("command", ["study", "report", "import"])
@pytest.mark.parametrize("out", ["/proc/nearmetal-out", "FILE"])
def test_unwritable_out_is_refused_before_anything_runs(tmp_path, capsys, command, out):
    from nearmetal.cli import main

    regular = tmp_path / "a-file"
    regular.write_text("x")
    out = str(regular) if out == "FILE" else out
    study = tmp_path / "s.toml"
    study.write_text('[study]\nname = "s"\n[matrix]\nmode = ["native"]\nmpi = ["mpich"]\n[[benchmark]]\nkernel = "mpi-info"\n')
    csv = tmp_path / "in.csv"
    csv.write_text("variant,benchmark,metric,unit,value\nnative,b,t,s,1.0\nc,b,t,s,1.1\n")
    db = tmp_path / "s.db"
    argv = {"study": ["study", str(study)], "report": ["report"],
            "import": ["import", str(csv), "--study", "s", "--baseline", "native"]}[command]
    assert main(argv + ["--db", str(db), "--out", out]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"nearmetal {command}: error: --out {out}: ") and len(err.splitlines()) == 1, err
    assert not db.exists()  # refused before the study was planned, run or imported
