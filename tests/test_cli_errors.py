"""Bad input: a clear one-line error, a non-zero exit, never a traceback."""

import pytest

from conftest import assert_one_line_error, nearmetal
from nearmetal.cli import fast_parse_run


@pytest.mark.parametrize("args, expect", [
    (["run", "--runtime", "singularity", "--", "nm-mpi-info"], "singularity"),
    (["run", "--mode", "teleport", "--", "nm-mpi-info"], "teleport"),
    (["run", "--mpi", "lam", "--", "nm-mpi-info"], "lam"),
    (["run", "-n", "0", "--", "nm-mpi-info"], "-n"),
    (["run", "-n", "two", "--", "nm-mpi-info"], "two"),
    (["run", "--threads", "0", "--", "nm-mpi-info"], "threads"),
    (["run", "--env", "NOEQUALS", "--", "nm-mpi-info"], "K=V"),
    (["run"], "no program"),
    (["run", "--"], "no program"),
    (["run", "--mpi", "mpich", "--", "/no/such/program"], "program not found"),
    (["run", "--mpi", "mpich", "--", "no-such-program-anywhere"], "not found"),
    (["run", "--mpi", "mpich", "--", "nm-no-such-kernel"], "nm-no-such-kernel"),
    (["run", "--mode", "hybrid", "--image", "no-such-image", "--", "nm-mpi-info"], "no-such-image"),
    (["run", "--mode", "bind", "--image", "/no/such/dir", "--", "nm-mpi-info"], "/no/such/dir"),
    (["image", "build", "--distro", "jessie"], "jessie"),
    (["image", "build", "--mpi", "openmpi,lam"], "lam"),
    (["image", "build", "--format", "qcow2"], "qcow2"),
    (["doctor", "--program", "x"], "program not found on PATH: x"),  # host programs need no --image
    (["doctor", "--image", "no-such-image"], "no-such-image"),
    (["frobnicate"], "frobnicate"),
    (["bench", "mpi-info", "-n", "2000000"], "-n: must be at most 1000000"),
    (["bench", "mpi-info", "--threads", "4096"], "--threads: must be at most 1024"),
    (["bench", "mpi-info", "--timeout", "99999999999999999999"], "--timeout: must be at most 604800"),
    (["run", "--mode", "hybrid", "--image", "/etc/passwd", "--", "nm-mpi-info"],
     "/etc/passwd is not an image: give an image name, an image directory or a file ending in .sqfs, .sif"),
    (["bench", "coupled", "-n", "2", "--", "--role", "atm", ":", "-n", "2", "--", "--role", "ocn"],
     "bench launches one program: a lone ':' separates MPMD components, which `nearmetal run` takes"),
    (["bench", "--command", "-n", "2", "--", "nm-coupled", "--role", "atm", ":", "-n", "2", "--", "nm-coupled"],
     "bench launches one program: a lone ':' separates MPMD components"),
    (["study", "/dev/zero"], "/dev/zero: not a regular file"),
    (["io", "sweep", "/dev/zero"], "/dev/zero: not a regular file"),
])
def test_bad_input_one_line(args, expect):
    out = nearmetal(*args)
    err = assert_one_line_error(out)
    assert expect in err


def test_program_missing_in_image(default_image):
    out = nearmetal("run", "--mode", "hybrid", "--mpi", "mpich", "--image", default_image.name, "--", "/opt/none")
    assert "program not found in image" in assert_one_line_error(out)


def test_hybrid_needs_mpi_in_image(bullseye_image):
    """The bullseye test image has MPICH only: hybrid with Open MPI has nothing to run."""
    out = nearmetal("run", "--mode", "hybrid", "--mpi", "openmpi", "--image", bullseye_image.name,
                    "--", "/bin/true")
    err = assert_one_line_error(out)
    assert "openmpi" in err and "image" in err


def test_bind_refuses_abi_mismatch(default_image):
    """A program built against Open MPI cannot take the host's MPICH."""
    out = nearmetal("run", "--mode", "bind", "--mpi", "mpich", "--image", default_image.name,
                    "--", "/opt/nearmetal/openmpi/bin/nm-mpi-info")
    err = assert_one_line_error(out)
    assert "refused" in err and "libmpi.so.40" in err and "libmpich.so.12" in err


def test_native_program_of_the_other_mpi_is_refused(tmp_path):
    """mpiexec.hydra would start an Open MPI program as separate 1-rank jobs that each exit 0
    with one rank's numbers: refused before anything starts; its own MPI runs it as one job."""
    import subprocess

    src, exe = tmp_path / "size.c", tmp_path / "size"
    src.write_text('#include <mpi.h>\n#include <stdio.h>\nint main(int c, char **v) { int n; MPI_Init(&c, &v);'
                   ' MPI_Comm_size(MPI_COMM_WORLD, &n); printf("size=%d\\n", n); MPI_Finalize(); return 0; }\n')
    subprocess.run(["mpicc.openmpi", "-o", str(exe), str(src)], check=True, timeout=120)
    err = assert_one_line_error(nearmetal("run", "--mpi", "mpich", "-n", "2", "--", str(exe)))
    assert err.endswith(f"{exe} is built against Open MPI, but mpich would launch it: each rank would start alone "
                        "as a 1-rank MPI job; use --mpi openmpi")
    out = nearmetal("run", "--mpi", "openmpi", "-n", "2", "--", str(exe))
    assert out.returncode == 0 and out.stdout.split() == ["size=2", "size=2"], out.stderr


def test_a_native_program_found_on_path_is_launched_by_its_own_mpi(tmp_path):
    """No --mpi and a bare name: an MPICH program on PATH is started by hydra as one 2-rank job,
    as its full path would be (Open MPI, the default family, would have been refused)."""
    import os
    import subprocess

    src, bindir = tmp_path / "size.c", tmp_path / "bin"
    bindir.mkdir()
    src.write_text('#include <mpi.h>\n#include <stdio.h>\nint main(int c, char **v) { int n; MPI_Init(&c, &v);'
                   ' MPI_Comm_size(MPI_COMM_WORLD, &n); printf("size=%d\\n", n); MPI_Finalize(); return 0; }\n')
    subprocess.run(["mpicc.mpich", "-o", str(bindir / "nm_test_size"), str(src)], check=True, timeout=120)
    out = nearmetal("run", "-n", "2", "--", "nm_test_size", env={"PATH": f"{bindir}:{os.environ['PATH']}"})
    assert out.returncode == 0 and out.stdout.split() == ["size=2", "size=2"], out.stderr


def test_bind_refuses_old_glibc(bullseye_image):
    out = nearmetal("run", "--mode", "bind", "--mpi", "mpich", "--image", bullseye_image.name, "--", "nm-mpi-info")
    err = assert_one_line_error(out)
    assert "GLIBC_2." in err and "2.31" in err


@pytest.mark.parametrize("argv", [
    ["--", "prog", "-x"],
    ["-n", "4", "--mode", "bind", "--runtime", "podman", "--image", "img", "--mpi", "mpich", "prog", "a"],
    ["--mode=hybrid", "--threads=2", "--ranks-per-node", "2", "--env", "A=1", "--env", "B=x=y", "-v", "--dry-run", "--", "p"],
    ["--verbose", "-n", "1", "--", "p", "--mode", "x"],
])
def test_fast_run_parser_agrees_with_argparse(argv):
    from nearmetal.cli_parser import build_parser

    fast = fast_parse_run(argv)
    assert fast is not None
    slow = build_parser("run").parse_args(["run"] + argv)
    slow_prog = slow.program_argv[1:] if slow.program_argv[:1] == ["--"] else slow.program_argv
    for key in ("mode", "runtime", "image", "mpi", "ranks", "ranks_per_node", "threads", "env", "dry_run", "verbose"):
        assert getattr(fast, key) == getattr(slow, key), key
    assert fast.program_argv == slow_prog


@pytest.mark.parametrize("argv", [["--help"], ["--mod", "bind", "p"], ["-n", "0", "p"], ["--mode", "x", "p"],
                                  ["--env", "1A=2", "p"], ["--image"]])
def test_fast_run_parser_defers_to_argparse(argv):
    assert fast_parse_run(argv) is None


def test_native_run_path_imports_only_what_it_uses(tmp_path):
    """`nearmetal run` sits in front of every launch and each module costs ~60 µs to load:
    a native local run (up to the exec of its launcher, discovery cached) loads no argparse, re, importlib,
    other subcommands, container runtime or choices module."""
    import os
    import subprocess
    import sys

    probe = ("import os, sys\n"  # the probe itself imports nothing more (json would load re)
             "def stop(*a):\n"
             "    print(' '.join(sorted(sys.modules))); sys.stdout.flush(); os._exit(0)\n"
             "os.execve = os.execv = stop\n"
             "sys.argv = ['nearmetal', 'run', '-n', '2', '--', '/bin/true']\n"
             "from nearmetal.cli import main\n"
             "main()\n")
    # Its own home and a plain PATH: the first run fills the discovery cache (reading ELF
    # files), the second is the hot path.
    env = dict(os.environ, NEARMETAL_HOME=str(tmp_path / "home"), PATH="/usr/local/bin:/usr/bin:/bin")
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, env=env)
    loaded = set(out.stdout.split())
    assert "nearmetal.launchers.base" in loaded and "nearmetal.supervise" in loaded  # it did get to the exec
    unwanted = {"argparse", "re", "importlib", "warnings", "nearmetal.commands", "nearmetal.choices",
                "nearmetal.cli_parser", "nearmetal.runtimes", "nearmetal.elf", "rich", "pydantic"}
    assert loaded & unwanted == set()


@pytest.mark.unit
def test_a_closed_pipe_sets_the_exit_status_of_its_own_call_only(tmp_path, capsys):
    """main() runs in-process (tests, embedding): a console whose reader went away in a call
    that then failed with an error must not turn the next call's success into 141."""
    from nearmetal import console
    from nearmetal.cli import main

    console._closed.append(object())  # a reader went away, then the command failed
    assert main(["report", "--db", str(tmp_path / "none.db")]) == 2
    assert main(["presets"]) == 0
    assert "error" in capsys.readouterr().err


def test_a_reader_that_closes_the_pipe_silences_the_output_not_the_work(tmp_path):
    """`nearmetal report | head`: once head has its lines the rest of the output has nowhere
    to go; nearmetal's Console (the one every command prints through) stops printing, the
    command still writes its HTML report, and it exits 128 + SIGPIPE with nothing on stderr,
    as a Unix tool killed by SIGPIPE does (rich's own exits 1 at once, the report unwritten)."""
    import signal
    import subprocess
    import sys

    from conftest import NEARMETAL, REPO

    db = tmp_path / "s.db"
    nearmetal("import", REPO / "examples/aquaplanet_table3.csv", "--study", "aq", "--baseline", "bare-metal",
              "--db", db, "--out", tmp_path / "first", check=True)
    exe = [str(NEARMETAL)] if NEARMETAL.exists() else [sys.executable, "-m", "nearmetal.cli"]
    proc = subprocess.Popen(exe + ["report", "--db", str(db), "--out", str(tmp_path / "again")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the first line is written
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 128 + signal.SIGPIPE and err == "", err
    assert (tmp_path / "again" / "report.html").stat().st_size > 10_000


@pytest.mark.parametrize("command", [["presets"], ["doctor"]])
def test_output_that_cannot_be_written_is_one_line_not_a_traceback(command):
    """stdout on a full disk (/dev/full here): the command says so in one line and exits 2."""
    import subprocess
    import sys

    from conftest import NEARMETAL

    exe = [str(NEARMETAL)] if NEARMETAL.exists() else [sys.executable, "-m", "nearmetal.cli"]
    with open("/dev/full", "w") as full:
        out = subprocess.run(exe + command, stdout=full, stderr=subprocess.PIPE, text=True, timeout=300)
    out.stdout = ""
    err = assert_one_line_error(out)
    assert out.returncode == 2 and err == f"nearmetal {command[0]}: error: writing its output failed: No space " \
                                           "left on device", err


@pytest.mark.unit
def test_an_error_of_the_system_that_is_not_a_write_is_said_as_what_it_is(monkeypatch, capsys):
    """Only a write's errors (a full disk, a quota) read as 'writing its output failed'; any
    other one reaching main is one line naming itself, still no traceback."""
    import errno

    from nearmetal import commands
    from nearmetal.cli import main

    def busy(args):
        raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")

    monkeypatch.setattr(commands, "cmd_presets", busy)
    assert main(["presets"]) == 2
    assert capsys.readouterr().err == "nearmetal presets: error: BlockingIOError: Resource temporarily unavailable\n"


@pytest.mark.parametrize("argv, said", [
    (["run", "--mdoe", "hybrid", "--", "nm-mpi-info"],
     "nearmetal run: error: unrecognized arguments: --mdoe; the closest option is --mode (see nearmetal run --help)"),
    (["report", "--dbb", "x.db"], "nearmetal report: error: unrecognized arguments: --dbb x.db; the closest option "
                                  "is --db (see nearmetal report --help)"),
    (["doctor", "--zzz"], "nearmetal doctor: error: unrecognized arguments: --zzz (see nearmetal doctor --help)"),
    # an action's own options (io sweep, image build), and no closest by the shared '--' alone
    (["io", "sweep", "--dry-rn"], "nearmetal io sweep: error: unrecognized arguments: --dry-rn; the closest option is "
                                  "--dry-run (see nearmetal io sweep --help)"),
    (["image", "build", "--recpie", "x"], "nearmetal image build: error: unrecognized arguments: --recpie x; the "
                                          "closest option is --recipe (see nearmetal image build --help)"),
    (["report", "--bogus"], "nearmetal report: error: unrecognized arguments: --bogus (see nearmetal report --help)"),
    (["run", "--bogus", "--", "x"], "nearmetal run: error: unrecognized arguments: --bogus (see nearmetal run --help)"),
    # trace's optional positional took the misspelt option's value ("invalid choice: 'netcdf'")
    (["trace", "--layrs", "netcdf", "-n", "2", "--", "nm-iobench"], "nearmetal trace: error: unrecognized arguments: "
     "--layrs; the closest option is --layers (see nearmetal trace --help)")])
def test_a_misspelt_option_is_refused_by_its_subcommand_with_the_closest_option(argv, said):
    """It said 'nearmetal: error: unrecognized arguments: --mdoe (see nearmetal --help)': the
    top-level help, which has no --mode, and no suggestion (a new user's typo)."""
    err = assert_one_line_error(nearmetal(*argv))
    assert err == said, err


@pytest.mark.parametrize("argv, prefix", [
    (["io", "best", "--db", "/nonexistent/x.db"], "nearmetal io best: error: no results database"),
    (["trace", "report", "/nonexistent"], "nearmetal trace report: error: /nonexistent is not a trace directory"),
    (["trace", "--", "/nonexistent"], "nearmetal trace: error: program not found"),
    (["image", "import", "/nonexistent", "--name", "nm-x"], "nearmetal image import: error: "),
])
def test_an_error_names_the_command_with_its_action(argv, prefix):
    """Errors said 'nearmetal io: error' for io best and 'nearmetal image: error' for image
    import, while argparse's own errors named the action."""
    assert assert_one_line_error(nearmetal(*argv)).startswith(prefix)
