"""Shared fixtures: the real CLI, the real images (built once, reused from the nearmetal home)."""

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NEARMETAL = REPO / ".venv" / "bin" / "nearmetal"

os.environ.setdefault("USER", "root" if os.geteuid() == 0 else str(os.getuid()))


def nearmetal(*args, env=None, timeout=600, check=False, cwd=None):
    """Run the installed `nearmetal` command as a user would (from `cwd`, else here); returns CompletedProcess."""
    full_env = dict(os.environ, **(env or {}))
    exe = str(NEARMETAL) if NEARMETAL.exists() else None
    argv = [exe] if exe else [sys.executable, "-m", "nearmetal.cli"]
    out = subprocess.run(argv + [str(a) for a in args], capture_output=True, text=True, timeout=timeout,
                         env=full_env, stdin=subprocess.DEVNULL, cwd=cwd)
    if check and out.returncode != 0:
        raise AssertionError(f"nearmetal {' '.join(map(str, args))} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    return out


def ranks_json(stdout):
    """nm-mpi-info --json lines, sorted by rank."""
    rows = [json.loads(l) for l in stdout.splitlines() if l.startswith("{")]
    return sorted(rows, key=lambda r: r["rank"])


def assert_one_line_error(out):
    assert out.returncode != 0, out.stdout
    err = out.stderr.strip()
    assert "Traceback" not in err, err
    assert len(err.splitlines()) == 1, err
    assert "error" in err
    return err


def assert_runs_ok(db):
    """{run_key: status} of every run in the study database `db`, asserting that each ended ok
    but for at most one mishap the study itself handles: a measured run that hung, whose repeat
    (`KEY~again`) ended ok, or a warm-up that timed out (no earlier run bounds a warm-up; it is
    not analysed). Why one is allowed: MPICH 4.0.2 over UCX's TCP transport deadlocks in
    MPI_Finalize now and then here (about 1 run in 150 on a loaded 2-core machine: one rank waits
    in UCX for a disconnect while the other already sits in the PMI barrier); a study ends such a
    run at 10x its cell's median, stores it hung with its processes' state and runs it again."""
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT run_key, status, warmup, stderr_tail FROM runs").fetchall()
    keys = {key: status for key, status, _, _ in rows}
    handled = [key for key, status, warmup, _ in rows
               if (status, bool(warmup)) in (("hung", False), ("timeout", True))]
    unhandled = [(key, status, (tail or "")[-1500:]) for key, status, _, tail in rows
                 if status != "ok" and key not in handled]
    repeats_ok = all(keys.get(f"{key}~again") == "ok" for key in handled if keys[key] == "hung")
    assert not unhandled and len(handled) <= 1 and repeats_ok, unhandled or [(k, keys[k]) for k in handled]
    return keys


@pytest.fixture(scope="session")
def host_mpis():
    from nearmetal.discovery.mpi import discover

    found = discover()
    assert set(found) >= {"openmpi", "mpich"}, f"both MPI families must be installed, found {list(found)}"
    return found


@pytest.fixture(scope="session")
def default_image():
    """The host distro's default image with both MPIs: directory, SquashFS and podman formats."""
    from nearmetal import image

    img = None
    for fmt in ("dir", "squashfs", "podman"):
        img = image.build(fmt=fmt, progress=False)
    return image.resolve(img.name)


@pytest.fixture(scope="session")
def bullseye_image():
    from nearmetal import image

    return image.build(distro="bullseye", mpis=("mpich",), progress=False)


@pytest.fixture(scope="session")
def trixie_image():
    from nearmetal import image

    return image.build(distro="trixie", mpis=("mpich",), progress=False)


def local_slurm_env(tmp_path_factory, nodes):
    """Generator for module fixtures: a real local Slurm cluster (nearmetal cluster up) with
    `nodes` slurmd, yielding its client environment; always brought down afterwards."""
    from nearmetal.slurm import cluster

    d = tmp_path_factory.mktemp("slurm")
    cl = cluster.up(nodes=nodes, dir=d)
    try:
        yield cl.env()
    finally:
        cluster.down(dir=d)


# -- test tiers ------------------------------------------------------------------------------
# `unit`: pure Python, no process started, no MPI, no container (pytest -m unit, seconds);
# everything not marked unit is `integration` (pytest -m integration, or -m "not unit").
# docs/testing.md describes both.

def pytest_sessionstart(session):
    # matplotlib builds its font cache on first import, running `fc-list`: on a fresh
    # machine that would count as a process started by whichever unit test first draws a
    # figure. Build it here, before any test's guard is in place.
    try:
        import matplotlib.font_manager  # noqa: F401
    except ImportError:
        pass


def pytest_collection_modifyitems(config, items):
    integration = pytest.mark.integration
    for item in items:
        if item.get_closest_marker("unit") is None and item.get_closest_marker("integration") is None:
            item.add_marker(integration)


class ProcessStarted(BaseException):
    """A unit test tried to start a process (a BaseException: no `except Exception` hides it)."""


@pytest.fixture(autouse=True)
def _unit_starts_no_process(request, monkeypatch):
    """Unit tests start no process: subprocess, fork, exec, spawn and os.system fail in them."""
    if request.node.get_closest_marker("unit") is None:
        yield
        return
    tried = []

    def refuse(what):
        def start(*args, **kwargs):
            tried.append(f"{what}{args[1:2] if what == 'subprocess.Popen' else args[:1]}")
            raise ProcessStarted(f"a unit test started a process: {tried[-1]}")
        return start

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse("subprocess.Popen"))
    for name in ("fork", "forkpty", "system", "posix_spawn", "posix_spawnp", "execv", "execve", "execvp", "execvpe"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, refuse(f"os.{name}"))
    yield
    assert not tried, f"a unit test started processes: {tried}"


@pytest.fixture
def nm_home(tmp_path, monkeypatch):
    """An empty nearmetal home of the test's own (NEARMETAL_HOME), not yet created."""
    monkeypatch.setenv("NEARMETAL_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def planned_variants(matrix_lines, extra=""):
    """(config, sorted variant ids) of a start-up study on native and hybrid MPICH whose
    [matrix] also has `matrix_lines` (and `extra` tables after it): planning, nothing run."""
    from nearmetal.study.plan.study_file import parse
    from nearmetal.study.plan.plan import cells, variant_id

    cfg = parse(f'[study]\nname = "a"\nrepetitions = 2\n[matrix]\nmode = ["native", "hybrid"]\nmpi = ["mpich"]\n'
                f'{matrix_lines}\n{extra}[[benchmark]]\nkernel = "startup"\n')
    return cfg, sorted({variant_id(c.variant) for c in cells(cfg)})
