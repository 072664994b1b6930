"""The fast `run` parser (cli.fast_parse_run) against argparse (cli_parser.build_parser("run"))
over a few hundred generated command lines: options in any order, `--opt=value` and `--opt
value`, --workdir, repeated --env, MPMD ':' segments, '--' placement, flags, unknown and
abbreviated options, bad choices, numbers out of range, missing values.

For every line the fast parser either returns None (argparse decides: help, abbreviations,
errors, options only argparse knows) or exactly what argparse returns, field by field, with the
program command as cmd_run sees it. Lines built only from what the fast parser knows must take
the fast path; lines with a bad value must be refused by both. (The hand-written cases of
test_cli_errors.py's fast-parser tests are included below.)
"""

import random

import pytest

from nearmetal import cli
from nearmetal.cli import fast_parse_run
from nearmetal.cli_parser import build_parser
from nearmetal.errors import NearmetalError

pytestmark = pytest.mark.unit

FIELDS = ("mode", "runtime", "image", "mpi", "ranks", "ranks_per_node", "threads", "env", "workdir", "dry_run",
          "verbose", "gpus")


def command(args):
    """The program command as cmd_run takes it from parsed arguments."""
    argv = list(args.program_argv)
    if getattr(args, "dashes_taken", False):  # the fast parser took the '--' itself
        return argv
    return argv[1:] if argv[:1] == ["--"] else argv


def argparse_run(argv):
    """argparse's Namespace for `run ARGV`, or None when it refuses the line."""
    try:
        return build_parser("run").parse_args(["run"] + list(argv))
    except SystemExit:
        return None


def assert_agree(argv, fast, slow):
    assert slow is not None, f"fast parser accepted what argparse refuses: {argv}"
    for key in FIELDS:
        assert getattr(fast, key) == getattr(slow, key), (key, argv)
    assert command(fast) == command(slow), argv
    assert (getattr(fast, "scheduler", None) or "local") == slow.scheduler
    assert cli._slurm_options(fast) == cli._slurm_options(slow) == {}
    assert fast.command == slow.command == "run"


# -- the generator ---------------------------------------------------------------------------------

VALID = {
    "--mode": ["native", "hybrid", "bind"],
    "--runtime": ["charliecloud", "bwrap", "podman"],
    "--mpi": ["openmpi", "mpich"],
    "--image": ["nm-bookworm-mpich-openmpi", "/images/x.sqfs", "", "a=b", "./rel img", "~/img"],
    "-n": ["1", "2", "16", "1000000", "007", "٣"],
    "--ranks-per-node": ["1", "4", "1000000"],
    "--threads": ["1", "8", "1024", "01"],
    "--env": ["A=1", "B=x=y", "_U=", "LONG_NAME=with space", "Ä=1", "A=1", "PATH=/a:/b", "X=-y"],
    "--workdir": ["/tmp", "rel/dir", "", "~", "a b", "/w=1"],
    "--gpus": ["all", "1", "2", "0,", "1,3", "GPU-8c3f0e4a-1b2c-4d5e-8f90-0123456789ab", "0,GPU-abc"],
}
BAD = {  # values argparse refuses for the option (and the fast parser must not take)
    "--mode": ["teleport", "", "NATIVE", "nat"],
    "--runtime": ["singularity", "", "Podman"],
    "--mpi": ["lam", "", "mvapich"],
    "-n": ["0", "1000001", "two", "1.5", "", "0x10"],
    "--ranks-per-node": ["0", "1000001", "x"],
    "--threads": ["0", "1025", "many", "99999999999999999999"],
    "--env": ["NOEQUALS", "1A=2", "=v", "A B=1", "A-B=1", ""],
    "--gpus": ["0", "none", "", "1,1", "a,b", ",", "1,,2", "GPU-", "-1"],
}
FLAGS = ["--dry-run", "-v", "--verbose"]
# Options the fast parser leaves to argparse (it may accept them or not).
DEFER = [["--scheduler", "local"], ["--scheduler=slurm"], ["--partition", "p"], ["--nodes", "2"], ["--time=5"],
         ["--account", "a"], ["--export", "ALL"], ["--mod", "bind"], ["--thread", "2"], ["--dry"], ["-n4"],
         ["--ranks", "2"], ["--dry-run=1"], ["-vv"], ["-h"], ["--help"], ["--bogus"], ["-x"], ["---mode", "bind"],
         ["--image", "-5"], ["--workdir", "-x"], ["--env", "-A=1"], ["-n", " 4"], ["-n", "+4"], ["-n", "1_0"]]
PROGRAMS = [
    ["--", "prog", "a", "b"], ["prog"], ["prog", "-x", "--mode", "bind"], ["--", "prog", "--", "x"],
    ["--", "./a.out"], ["/bin/sh", "-c", "echo $A"], ["-", "x"], ["--"], [], ["prog", ":", "prog2"],
    ["--", "atm", ":", "-n", "2", "--mode", "bind", "--", "ocn", "-c", "4"],
    ["--", "a", ":", "-n", "1", "--env", "K=V", "--", "b", ":", "--", "c"],
    ["atm", "--role", "atm", ":", "-n", "2", "--", "ocn"], ["", "x"], ["--", "-n", "3"], ["prog", "--"],
]


def _option(rng, opt, value):
    """One option with its value, in one of the forms argparse accepts."""
    if rng.random() < 0.5:
        return [f"{opt}={value}"]
    return [opt, value]


def _line(rng, kind):
    """(argv, expectation): "fast" (the fast path must take it), "error" (both refuse),
    "defer" (the fast parser must defer; argparse decides)."""
    tokens = []
    for _ in range(rng.randint(0, 6)):
        if rng.random() < 0.2:
            tokens.append([rng.choice(FLAGS)])
        else:
            opt = rng.choice(sorted(VALID))
            tokens.append(_option(rng, opt, rng.choice(VALID[opt])))
    if kind == "error":
        opt = rng.choice(sorted(BAD))
        value = rng.choice(BAD[opt])
        bad = [f"{opt}={value}"] if value == "" or rng.random() < 0.5 else [opt, value]
        if rng.random() < 0.15:  # a value-taking option with no value before another option
            bad = [rng.choice(sorted(VALID)), rng.choice(FLAGS + ["--"])]
        tokens.insert(rng.randint(0, len(tokens)), bad)
    elif kind == "defer":
        tokens.insert(rng.randint(0, len(tokens)), list(rng.choice(DEFER)))
    argv = [t for group in tokens for t in group]
    program = list(rng.choice(PROGRAMS))
    if kind == "error" and argv and argv[-1] in VALID and not program[:1] == ["--"]:
        program = ["--"] + program  # keep the missing value missing (not the program's name)
    return argv + program


def _cases(seed=20240611, n_fast=300, n_error=80, n_defer=60):
    rng = random.Random(seed)
    cases = []
    for kind, n in (("fast", n_fast), ("error", n_error), ("defer", n_defer)):
        for i in range(n):
            argv = _line(rng, kind)
            cases.append(pytest.param(argv, kind, id=f"{kind}{i}"))
    return cases


CASES = _cases()


def test_generator_is_deterministic_and_large():
    again = _cases()
    assert [c.values for c in again] == [c.values for c in CASES]
    assert len(CASES) == 440
    lines = [tuple(c.values[0]) for c in CASES]
    assert len(set(lines)) > 400
    assert sum("--workdir" in " ".join(l) for l in lines) > 50 and sum(":" in l for l in lines) > 50


@pytest.mark.parametrize("argv, kind", CASES)
def test_fast_parser_agrees_with_argparse(argv, kind):
    fast = fast_parse_run(argv)
    slow = argparse_run(argv)
    if fast is not None:
        assert_agree(argv, fast, slow)
    if kind == "fast":
        assert fast is not None, f"well-formed line not taken by the fast parser: {argv}"
    elif kind == "error":
        assert fast is None and slow is None, argv
    else:
        assert fast is None, argv


# -- hand-written lines (including test_cli_errors.py's) ---------------------------------------------

@pytest.mark.parametrize("argv", [
    ["--", "prog", "-x"],
    ["-n", "4", "--mode", "bind", "--runtime", "podman", "--image", "img", "--mpi", "mpich", "prog", "a"],
    ["--mode=hybrid", "--threads=2", "--ranks-per-node", "2", "--env", "A=1", "--env", "B=x=y", "-v", "--dry-run",
     "--", "p"],
    ["--verbose", "-n", "1", "--", "p", "--mode", "x"],
    ["--workdir", "/scratch/run 1", "--", "p"],
    ["--workdir=", "--", "p"],
    ["-n=3", "--", "p"],
    ["--env", "A=1", "--env", "A=2", "--", "p"],
    ["--mode", "hybrid", "--mode", "bind", "--", "p"],
    ["--", "a", ":", "-n", "2", "--mode", "hybrid", "--", "b"],
    ["--image=--x", "--", "p"],
    ["-n", "1000000", "--ranks-per-node", "1000000", "--threads", "1024", "p"],
])
def test_hand_written_lines_take_the_fast_path(argv):
    fast = fast_parse_run(argv)
    assert fast is not None
    assert_agree(argv, fast, argparse_run(argv))


@pytest.mark.parametrize("argv", [
    ["--help"], ["--mod", "bind", "p"], ["-n", "0", "p"], ["--mode", "x", "p"], ["--env", "1A=2", "p"], ["--image"],
    ["--scheduler", "slurm", "--", "p"], ["--partition", "debug", "--", "p"], ["-n"], ["--threads", "--", "p"],
    ["--threads", "1025", "p"], ["-n", "1000001", "p"], ["--runtime", "singularity", "p"],
])
def test_fast_parser_defers_to_argparse(argv):
    assert fast_parse_run(argv) is None


def test_defaults_agree():
    fast, slow = fast_parse_run(["p"]), argparse_run(["p"])
    assert_agree(["p"], fast, slow)
    # no runtime unless given (RunRequest picks the default one for a container mode): a
    # --runtime given where no container runs is refused, not ignored
    assert (fast.mode, fast.runtime, fast.ranks, fast.threads, fast.env) == ("native", None, 2, 1, [])


# -- found by this generator (src/nearmetal/cli.py, fast_parse_run) ------------------------------

@pytest.mark.parametrize("argv", [["-n", "²", "p"], ["--threads", "¹", "p"], ["-n", "9" * 5000, "p"],
                                  ["--ranks-per-node=³", "p"]])
def test_numbers_int_cannot_read_are_deferred(argv):
    assert fast_parse_run(argv) is None
    assert argparse_run(argv) is None


def test_double_dash_program_is_the_same_on_both_paths():
    argv = ["--", "--", "prog"]
    assert command(fast_parse_run(argv)) == command(argparse_run(argv)) == ["--", "prog"]


def test_report_and_explain_find_a_named_study_where_study_put_it(tmp_path, monkeypatch):
    """`report --study NAME` without --db reads results/NAME/study.db (a new user's report looked
    in the quickstart's database and suggested an unrelated study's)."""
    from nearmetal.commands import _study_db

    monkeypatch.chdir(tmp_path)
    (tmp_path / "results" / "stencil").mkdir(parents=True)
    (tmp_path / "results" / "stencil" / "study.db").write_bytes(b"")
    assert str(_study_db(None, "stencil")) == "results/stencil/study.db"
    assert str(_study_db("x.db", "stencil")) == "x.db"  # --db wins, whatever is there
    with pytest.raises(NearmetalError) as e:
        _study_db(None, "stencl")
    assert str(e.value) == ("no results database at results/stencl/study.db (where `nearmetal study` puts study "
                            "'stencl'): name one with --db (here: results/stencil/study.db)")
    with pytest.raises(NearmetalError) as e:
        _study_db(None, None)
    assert str(e.value).startswith("no results database at results/quickstart/study.db (where `nearmetal study` "
                                   "puts the quickstart): name one with --db")
    with pytest.raises(NearmetalError, match="study name '../x'"):
        _study_db(None, "../x")


@pytest.mark.parametrize("argv, said", [
    (["run", "--runtime", "apptainer", "--", "prog"],
     "nearmetal run: error: --runtime apptainer would be ignored: native mode runs no container; use --mode hybrid "
     "or --mode bind, or leave --runtime out"),
    (["run", "--mode", "native", "--image", "img", "--runtime=podman", "prog"],
     "error: --runtime podman and --image img would be ignored: native mode runs no container"),
    (["run", "--", "a", ":", "--image", "x", "--", "b"], "error: MPMD component 2: --image x would be ignored"),
    (["run", "--nodes", "2", "--time", "5", "--", "prog"],
     "nearmetal run: error: --nodes and --time: a batch scheduler's options, which this run's scheduler (local) "
     "would ignore: add --scheduler slurm, or leave them out"),
    (["bench", "latency", "--runtime", "podman"], "nearmetal bench: error: --runtime podman would be ignored"),
    (["bench", "--command", "--export", "NONE", "--", "true"], "nearmetal bench: error: --export: a batch"),
    (["bench", "latency", "--no-evidence"], "nearmetal bench: error: --no-evidence is for bench --command"),
    (["run", "--", "a", ":", "--mpi", "mpich", "--", "b"],
     "nearmetal run (MPMD component): error: unrecognized arguments: --mpi (see nearmetal run --help; a "
     "component takes -n, --mode, --runtime, --image, --threads, --env, --runtime-arg)"),
])
def test_options_a_launch_would_ignore_are_refused(argv, said, capsys):
    """A user who forgets --mode must not read native numbers under a container's name, nor a
    local run's under a Slurm job's: the option is refused in one line, before anything starts."""
    try:
        status = cli.main(argv)
    except SystemExit as e:  # argparse's own exit (the MPMD component's parser)
        status = e.code
    err = capsys.readouterr().err
    assert status == 2 and said in err and err.endswith("\n") and len(err.splitlines()) == 1 and "\\n" not in err, err


def test_io_best_finds_a_named_sweep_where_io_sweep_put_it(tmp_path, monkeypatch):
    """`io best --study climio` read results/io-tune/study.db (the built-in sweep's) and failed,
    where `report --study climio` found results/climio/study.db."""
    from types import SimpleNamespace

    from nearmetal.io import best as best_mod
    from nearmetal.io import cli as io_cli

    read = []
    monkeypatch.setattr(best_mod, "run", lambda db, study, metric, as_json=False, variant=None: read.append(str(db)))
    for study in ("climio", None):
        io_cli.best(SimpleNamespace(db=None, study=study, metric="total", json=False, variant=None))
    assert read == ["results/climio/study.db", "results/io-tune/study.db"]
