"""analysis/failure_line.py: the line of a failed run's output that says why, with real
launcher output (walk-through 46: the reports showed Open MPI's closing banner)."""

import pytest

from nearmetal.analysis.failure_line import failure_line

pytestmark = pytest.mark.unit

OPENMPI_ABORT = """nm-iobench: posix: pwrite to ./nmio-620-file-per-rank.0001.bin: No space left on device
nm-iobench: posix: pwrite to ./nmio-620-file-per-rank.0000.bin: No space left on device
--------------------------------------------------------------------------
MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD
with errorcode 3.

NOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes.
You may or may not see output from other processes, depending on
exactly when Open MPI kills them.
--------------------------------------------------------------------------
[vm:00611] 1 more process has sent help message help-mpi-api.txt / mpi-abort
[vm:00611] Set MCA parameter "orte_base_help_aggregate" to 0 to see all help / error messages
"""

PODMAN_PULL = """time="2026-12-07T22:05:08Z" level=warning msg="Failed, retrying in 1s ... (2/3). Error: initializing source"
Error: initializing source docker://localhost/nearmetal-x:latest: pinging container registry localhost: connection refused
--------------------------------------------------------------------------
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
--------------------------------------------------------------------------
mpirun.openmpi detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[7833,1],1]
  Exit code:    125
--------------------------------------------------------------------------
"""

MPICH_BAD = """halo: cannot open input.nml: No such file or directory

===================================================================================
=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES
=   PID 1234 RUNNING AT vm
=   EXIT CODE: 1
=   CLEANING UP REMAINING PROCESSES
=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES
===================================================================================
"""


def test_the_programs_own_error_not_the_launchers_banner():
    assert failure_line(OPENMPI_ABORT) == ("nm-iobench: posix: pwrite to ./nmio-620-file-per-rank.0001.bin: "
                                           "No space left on device")
    assert failure_line(PODMAN_PULL).startswith("Error: initializing source docker://localhost/nearmetal-x:latest")
    assert failure_line(MPICH_BAD) == "halo: cannot open input.nml: No such file or directory"


def test_without_an_error_word_the_first_own_line_and_without_any_the_last():
    assert failure_line("step 1\nstep 2\n" + "-" * 20 + "\nExit code:    3\n") == "step 1"
    assert failure_line("-" * 20 + "\nExit code:    3\n") == "Exit code:    3"
    assert failure_line("") == "" and failure_line(None) == ""
    assert failure_line("error: " + "x " * 400).endswith(" …") and len(failure_line("error: " + "x " * 400)) <= 302


def test_a_tail_the_store_cut_does_not_start_with_its_fragment():
    cut = 'ttps://localhost/v2/": dial tcp 127.0.0.1:443: connect: connection refused"\n' + PODMAN_PULL
    assert failure_line(cut).startswith("ttps://")
    assert failure_line(cut, kept=len(cut)).startswith("Error: initializing source")
