"""A run that hangs (docs/process-lifetime.md, "Hung runs"): its limit, derived from its
cell's earlier runs, and what is stored of it.

A cell's runs take about the same time; one that takes FACTOR times their median has
stopped making progress (here: MPICH over UCX's TCP transport, now and then, deadlocks in
MPI_Finalize, one rank in a PMI read while the other spins in UCX), and waiting for the
configured `timeout` (600 s by default) would only spend the budget. Such a run is ended,
stored as `hung` with what each of its processes was doing, and its cell is run once more
after the runs already planned.
"""

from statistics import median

FACTOR = 10          # times the median of the cell's earlier runs
REPEAT = "~again"    # the run key's suffix of a hung run's repeat (run once, never again)
MOST_PROCESSES = 16  # processes listed in the stored record (a run's tree: front, keeper, launcher, ranks)


def limit(walls, ceiling, floor):
    """(seconds, derived) a run of a cell may take: FACTOR times the median wall time of the
    cell's earlier finished runs (`walls`), at least `floor`; never more than `ceiling` (the
    study's timeout), which is also the limit of a cell with no finished run yet. derived:
    whether the limit came from the earlier runs (then its end is a hang, not a time-out)."""
    if not walls:
        return ceiling, False
    derived = max(floor, FACTOR * median(walls))
    return (derived, True) if derived < ceiling else (ceiling, False)


def cell_key(run_key):
    """The cell's key of a stored run key (`CELL#repK`, `CELL#warmupK`, `CELL#repK~again`)."""
    return run_key.rsplit("#", 1)[0]


def repeat_key(run_key):
    return f"{run_key}{REPEAT}"


def is_repeat(run_key):
    return run_key.endswith(REPEAT)


def reason(limit_s, walls, floor, repeated):
    """The stored reason of a hung run, one line."""
    why = (f"nearmetal: hung: no end after {limit_s:.3g} s ({FACTOR}x the median {median(walls):.3g} s of this "
           f"cell's {len(walls)} earlier runs, at least {floor:g} s); its process tree was ended")
    return why + ("; run once more after the runs planned" if repeated else
                  "; not run again (it was itself the repeat of a hung run)")


def state_lines(state):
    """Each process's state as stored: 'pid comm state wchan cpu'."""
    rows = [f"  {p['pid']} {p['comm']} {p['state']} {p['wchan'] or '-'} {p['cpu_s']:g}s"
            for p in state[:MOST_PROCESSES]]
    head = "its processes when it was ended (pid, command, state, kernel wait channel, CPU time):"
    return [head] + (rows or ["  (none could be read)"])


def stored_tail(err, why, state, size):
    """The record of a hung run (runs.stderr_tail, at most `size` characters): the end of
    its standard error, then the reason and its processes' state, which are kept whole."""
    own = "\n".join([why] + state_lines(state))
    room = max(0, size - len(own) - 1)
    end = (err or "")[-room:] if room else ""
    return f"{end}\n{own}" if end else own
