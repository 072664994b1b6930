"""The host kernels' first-use build (kernels/build.py) with a nearmetal home of the test's
own: a SIGKILLed nearmetal takes its make along and the next build starts afresh; two
nearmetal started together build once, the second waiting (walk-through 46: an orphaned
make raced the next command, and two commands on a fresh home failed in make)."""

import os
import signal
import subprocess
import time

from conftest import NEARMETAL
from test_lifetime import Reaped


def _build(home):
    return subprocess.Popen([str(NEARMETAL), "kernels", "build", "--mpi", "mpich"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ, NEARMETAL_HOME=str(home)))


def test_a_killed_build_leaves_no_make_and_two_builders_build_once(tmp_path, host_mpis):
    home = tmp_path / "home"
    job = Reaped([NEARMETAL, "kernels", "build", "--mpi", "mpich"], env=dict(os.environ, NEARMETAL_HOME=str(home)))
    try:
        job.wait_for(lambda procs: any(c.split()[0] in ("make", "/usr/bin/make") for c in procs.values()), 120,
                     "make running")
        time.sleep(1)  # into the compilations
        os.kill(job.target, signal.SIGKILL)
        job.wait_for(lambda procs: not procs, 10, "nothing of the build left after SIGKILL")
    finally:
        job.close()
    assert (home / "host/mpich/.building").exists()  # killed part way: the next build starts afresh
    first, second = _build(home), _build(home)
    outs = [p.communicate(timeout=600) for p in (first, second)]
    assert [p.returncode for p in (first, second)] == [0, 0], outs
    assert sum("waiting for another nearmetal that builds the mpich kernels" in err for _, err in outs) == 1, outs
    assert not (home / "host/mpich/.building").exists() and (home / "host/mpich/.built").exists()
    run = subprocess.run([str(NEARMETAL), "run", "--mpi", "mpich", "-n", "2", "--", "nm-latency", "-m", "8:8", "-i", "10"],
                         capture_output=True, text=True, env=dict(os.environ, NEARMETAL_HOME=str(home)), timeout=120)
    assert run.returncode == 0 and run.stdout.split()[-2] == "8", run.stdout + run.stderr  # whole programs
