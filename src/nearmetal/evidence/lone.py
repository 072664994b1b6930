"""A run that exited 0 but is not one MPI job: a program linking another MPI than the
launcher's does not join the launcher's job; on every rank it initialises MPI as a job of
its own, one rank in size, and finishes "successfully" with one rank's numbers. The direct
program is refused before it runs (resolve.host_program_abi_problem); one that a script
starts is seen here, in the files the ranks' processes wrote (MPI_Comm_size after MPI_Init,
csrc/nm-mpi-owner.c). The size MPI reports is the test, not a rank variable of the
environment, which a process can inherit from an outer job (an interactive srun, a nested
launcher)."""


def lone_starts(raws, ranks):
    """The processes that initialised MPI alone, or [] when the launch of `ranks` ranks ran as
    one job: some process saw a job larger than one, or fewer than two saw a job of one (a
    helper tool that starts MPI by itself, once)."""
    if not isinstance(ranks, int) or ranks < 2:
        return []
    def size(raw):  # MPI_Comm_size after MPI_Init; -1 or absent: this process did not initialise MPI
        s = raw.get("mpi_size")
        return s if isinstance(s, int) and not isinstance(s, bool) else -1

    if any(size(raw) > 1 for raw in raws):
        return []
    alone = [raw for raw in raws if size(raw) == 1]
    return alone if len(alone) >= 2 else []


def without_mpi(raws, ranks):
    """Whether a launch of `ranks` ranks ran no MPI job at all: its processes wrote their
    evidence and none initialised MPI (a program that links none: `ranks` independent copies)."""
    if not isinstance(ranks, int) or ranks < 2 or not raws:
        return False
    return not any(isinstance(raw.get("mpi_size"), int) and raw.get("mpi_size", -1) >= 1 for raw in raws)


STUDY_FIX = "give its cells the MPI it links (mpi = ...)"
COMMAND_FIX = "run it with --mpi naming the MPI it links"


def why_failed(raws, ranks, family, fix=STUDY_FIX):
    """The reason a run's status is failed though it exited 0, or None (lone_starts); `fix`:
    the remedy in the words of the command (a study's cells, or --mpi)."""
    alone = lone_starts(raws, ranks)
    if not alone:
        return None
    programs = sorted({str(raw.get("exe") or "?") for raw in alone})
    shown = ", ".join(programs[:3]) + (", ..." if len(programs) > 3 else "")
    return (f"nearmetal: the run exited 0 but is not one MPI job: {len(alone)} processes ({shown}) each initialised "
            f"MPI as a job of one rank, where the launch has {ranks}; the program (or one a script starts) links "
            f"another MPI than {family}'s launcher: {fix}, or rebuild it "
            f"against {family}")
