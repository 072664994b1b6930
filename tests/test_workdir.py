"""`--workdir DIR`: every rank starts in DIR natively, and in DIR mounted read-write at
/nm/work in containers. Real MPI ranks of nm-iobench write one file each into their working
directory (its default `-d .`) and name it: the files must appear in DIR on the host, named
under DIR (native) or /nm/work (containers). Where no MPI is needed, each rank runs a shell
that records its physical working directory in a new file of its own."""

import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import NEARMETAL, assert_one_line_error, local_slurm_env, nearmetal
from nearmetal.cli import fast_parse_run

FAMILIES = ("openmpi", "mpich")
RUNTIMES = ("charliecloud", "bwrap", "podman")
# `pwd -P`: the directory itself, not an inherited $PWD; mktemp with a bare template
# creates the file in the current directory.
RECORD_CWD = ["sh", "-c", 'pwd -P > "$(mktemp cwd.XXXXXX)"']
# One small file per rank, kept (-k) and printed as "# file PATH"; read back and verified.
IOBENCH = ["nm-iobench", "-p", "file-per-rank", "-L", "posix", "-x", "16", "-y", "16", "-z", "2", "-t", "1", "-k"]


@pytest.fixture
def workdir():
    # Outside /tmp on purpose: every runtime also binds the host's /tmp, so a directory
    # there would be reachable without the /nm/work mount.
    d = Path(tempfile.mkdtemp(prefix="nm-workdir-", dir="/var/tmp"))
    yield d
    subprocess.run(["rm", "-rf", str(d)], check=False)


def _cwds(directory):
    return sorted(p.read_text().strip() for p in directory.glob("cwd.*"))


def _run(*args, timeout=300, env=None):
    out = nearmetal("run", *args, timeout=timeout, env=env)
    assert out.returncode == 0, f"exit {out.returncode}\nstdout:\n{out.stdout}\nstderr:\n{out.stderr}"
    return out


def _check_iobench_files(out, directory, seen_as):
    """nm-iobench's files: named under `seen_as` by the ranks, present in `directory` on the host."""
    named = [line.split(" ", 2)[2] for line in out.stdout.splitlines() if line.startswith("# file ")]
    assert len(named) == 2, out.stdout
    assert "verify ok" in out.stdout, out.stdout
    for path in named:
        assert os.path.dirname(path) == seen_as, path
        assert (directory / os.path.basename(path)).stat().st_size > 0
    assert sorted(p.name for p in directory.iterdir()) == sorted(os.path.basename(p) for p in named)


@pytest.mark.parametrize("family", FAMILIES)
def test_native_ranks_start_in_workdir(family, workdir, host_mpis):
    out = _run("-n", "2", "--mpi", family, "--workdir", workdir, "--", *IOBENCH)
    _check_iobench_files(out, workdir, str(workdir.resolve()))


@pytest.mark.parametrize("family", FAMILIES)
def test_native_shell_ranks_start_in_workdir(family, workdir, host_mpis):
    _run("-n", "2", "--mpi", family, "--workdir", workdir, "--", *RECORD_CWD)
    assert _cwds(workdir) == [str(workdir.resolve())] * 2


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("family", FAMILIES)
def test_hybrid_ranks_start_in_mounted_workdir(family, runtime, workdir, default_image):
    out = _run("-n", "2", "--mode", "hybrid", "--runtime", runtime, "--mpi", family, "--image", default_image.name,
               "--workdir", workdir, "--", *IOBENCH)
    _check_iobench_files(out, workdir, "/nm/work")


@pytest.mark.parametrize("family", FAMILIES)
def test_bind_charliecloud_ranks_start_in_mounted_workdir(family, workdir, default_image):
    out = _run("-n", "2", "--mode", "bind", "--runtime", "charliecloud", "--mpi", family, "--image",
               default_image.name, "--workdir", workdir, "--", *IOBENCH)
    _check_iobench_files(out, workdir, "/nm/work")


def test_charliecloud_squashfs_image_workdir(workdir, default_image):
    assert default_image.sqfs and default_image.sqfs.exists()
    out = _run("-n", "2", "--mode", "hybrid", "--runtime", "charliecloud", "--mpi", "mpich",
               "--image", default_image.sqfs, "--workdir", workdir, "--", *IOBENCH)
    _check_iobench_files(out, workdir, "/nm/work")


@pytest.mark.parametrize("runtime", ["bwrap", "podman"])
def test_container_shell_ranks_start_in_mounted_workdir(runtime, workdir, default_image):
    """Not MPI programs: the ranks need no wire-up (Charliecloud's namespace joining does:
    a rank that exits before its peer joins leaves nothing to join)."""
    _run("-n", "2", "--mode", "hybrid", "--runtime", runtime, "--mpi", "openmpi", "--image", default_image.name,
         "--workdir", workdir, "--", *RECORD_CWD)
    assert _cwds(workdir) == ["/nm/work"] * 2


def test_container_sees_workdir_as_pwd(workdir, default_image):
    """$PWD in the container names /nm/work, not the host path the launcher inherited."""
    _run("-n", "1", "--mode", "hybrid", "--runtime", "charliecloud", "--mpi", "openmpi", "--image",
         default_image.name, "--workdir", workdir, "--", "sh", "-c", 'echo "$PWD" > pwd.txt')
    assert (workdir / "pwd.txt").read_text().strip() == "/nm/work"


def test_mpmd_workdir_is_job_wide(workdir, default_image):
    """A native and a container component of one MPI_COMM_WORLD both work in DIR."""
    _run("-n", "1", "--mpi", "mpich", "--image", default_image.name, "--workdir", workdir, "--", *RECORD_CWD,
         ":", "-n", "2", "--mode", "hybrid", "--runtime", "bwrap", "--", *RECORD_CWD)
    assert _cwds(workdir) == sorted([str(workdir.resolve()), "/nm/work", "/nm/work"])


def test_workdir_relative_path_is_made_absolute(workdir, host_mpis):
    out = subprocess.run([str(NEARMETAL), "run", "-n", "1", "--mpi", "mpich", "--workdir", workdir.name, "--",
                          *RECORD_CWD], cwd=workdir.parent, capture_output=True, text=True, timeout=120,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    assert _cwds(workdir) == [str(workdir.resolve())]


def test_dry_run_shows_workdir_and_mount(workdir, default_image):
    for runtime, flag in (("charliecloud", "--cd=/nm/work"), ("bwrap", "--chdir /nm/work"),
                          ("podman", "--workdir /nm/work")):
        out = nearmetal("run", "--dry-run", "--mode", "hybrid", "--runtime", runtime, "--mpi", "mpich",
                        "--image", default_image.name, "--workdir", workdir, "--", "nm-mpi-info")
        assert out.returncode == 0, out.stderr
        assert f"# working directory: {workdir}" in out.stdout
        assert f"{workdir} mounted read-write at /nm/work" in out.stdout
        assert flag in out.stdout, out.stdout
    native = nearmetal("run", "--dry-run", "--mpi", "mpich", "--workdir", workdir, "--", "nm-mpi-info")
    assert f"# working directory: {workdir}" in native.stdout and "/nm/work" not in native.stdout
    plain = nearmetal("run", "--dry-run", "--mpi", "mpich", "--", "nm-mpi-info")
    assert "working directory" not in plain.stdout


def test_bench_runs_in_workdir(workdir, default_image):
    out = nearmetal("bench", "mpi-info", "--mode", "hybrid", "--runtime", "bwrap", "--mpi", "openmpi",
                    "--image", default_image.name, "--workdir", workdir, "-v", timeout=300)
    assert out.returncode == 0, out.stderr
    assert f"--bind {workdir} /nm/work" in out.stderr and "--chdir /nm/work" in out.stderr


@pytest.fixture
def readonly_dir():
    """A directory this user cannot write: a read-only bind mount for root (which ignores
    permission bits), mode 0555 otherwise."""
    d = Path(tempfile.mkdtemp(prefix="nm-readonly-", dir="/var/tmp"))
    mounted = False
    try:
        if os.geteuid() == 0:
            for argv in (["mount", "--bind", str(d), str(d)], ["mount", "-o", "remount,bind,ro", str(d)]):
                done = subprocess.run(argv, capture_output=True, text=True)
                mounted = mounted or argv[1] == "--bind" and done.returncode == 0
                assert done.returncode == 0, f"{' '.join(argv)}: {done.stderr}"
        else:
            d.chmod(0o555)
        assert not os.access(d, os.W_OK), f"{d} is still writable"
        yield d
    finally:
        if mounted:
            subprocess.run(["umount", str(d)], check=False)
        d.chmod(0o755)
        d.rmdir()


@pytest.mark.parametrize("command", [["run"], ["bench", "mpi-info"]])
@pytest.mark.parametrize("case, expect", [("missing", "no such directory"), ("file", "not a directory"),
                                          ("empty", "empty path"), ("readonly", "not writable")])
def test_bad_workdir_one_line(command, case, expect, tmp_path, request):
    (tmp_path / "f").write_text("")
    path = {"missing": tmp_path / "nope", "file": tmp_path / "f", "empty": ""}.get(case)
    if case == "readonly":
        path = request.getfixturevalue("readonly_dir")
    tail = ["--", "nm-mpi-info"] if command == ["run"] else []
    out = nearmetal(*command, "--mpi", "mpich", f"--workdir={path}", *tail)
    err = assert_one_line_error(out)
    assert "--workdir" in err and expect in err, err


def test_bad_workdir_fails_before_any_rank_starts(tmp_path):
    """Nothing runs: the program would have created a file."""
    marker = tmp_path / "ran"
    out = nearmetal("run", "--mpi", "mpich", "--workdir", tmp_path / "missing", "--", "touch", marker)
    assert_one_line_error(out)
    assert not marker.exists()


@pytest.mark.parametrize("argv", [
    ["--workdir", "/x/y", "--", "prog"],
    ["--workdir=/x/y", "-n", "3", "--mode", "hybrid", "prog", "a"],
    ["-n", "1", "--workdir", "rel", "--env", "A=1", "--", "p", "--workdir", "z"],
])
def test_fast_run_parser_agrees_with_argparse_on_workdir(argv):
    from nearmetal.cli_parser import build_parser

    fast = fast_parse_run(argv)
    assert fast is not None
    slow = build_parser("run").parse_args(["run"] + argv)
    slow_prog = slow.program_argv[1:] if slow.program_argv[:1] == ["--"] else slow.program_argv
    for key in ("workdir", "mode", "ranks", "env"):
        assert getattr(fast, key) == getattr(slow, key), key
    assert fast.program_argv == slow_prog
    assert fast_parse_run(["--", "p"]).workdir is None and build_parser("run").parse_args(["run", "p"]).workdir is None


@pytest.fixture(scope="module")
def slurm_env(tmp_path_factory):
    yield from local_slurm_env(tmp_path_factory, nodes=2)


@pytest.mark.parametrize("mode", ["native", "hybrid"])
def test_slurm_batch_job_ranks_start_in_workdir(mode, slurm_env, workdir, default_image):
    """Outside an allocation: sbatch, whose srun line carries --chdir."""
    image = ["--image", default_image.name] if mode != "native" else []  # natively refused: it would be ignored
    out = _run("--scheduler", "slurm", "-n", "2", "--mode", mode, "--mpi", "mpich", *image,
               "--workdir", workdir, "-v", "--", *RECORD_CWD, env=slurm_env, timeout=180)
    assert f"--chdir={workdir}" in out.stderr
    assert _cwds(workdir) == [str(workdir.resolve()) if mode == "native" else "/nm/work"] * 2


def test_run_warns_about_a_host_input_the_container_will_not_see(workdir, default_image):
    """The new user's "cannot open input" in hybrid mode: the input sits in the launch
    directory, which the container does not show; nearmetal says so before launching, and
    not once --workdir brings it in."""
    (workdir / "input.nml").write_text("&nml x = 1 /\n")
    out = nearmetal("run", "-n", "1", "--mode", "hybrid", "--mpi", "mpich", "--image", default_image.name,
                    "--", "cat", "input.nml", cwd=workdir)
    assert out.returncode != 0
    assert out.stderr.startswith("nearmetal run: warning: 'input.nml' is a file on the host that the hybrid ranks "
                                 "in the container will not see at that path: give --workdir DIR"), out.stderr
    ok = nearmetal("run", "-n", "1", "--mode", "hybrid", "--mpi", "mpich", "--image", default_image.name,
                   "--workdir", workdir, "--", "cat", "input.nml", cwd=workdir)
    assert ok.returncode == 0 and ok.stdout == "&nml x = 1 /\n" and "warning" not in ok.stderr, ok.stderr
