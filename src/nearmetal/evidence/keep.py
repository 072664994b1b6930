"""Storing a run's evidence: the ranks' files collected (collect.py) with the launcher's own
facts, as run_evidence rows (rank -1: the launcher)."""

import json

_LAUNCHER = None


def launcher():
    """The launching side's facts: this process's, the same for every run (read once)."""
    global _LAUNCHER
    if _LAUNCHER is None:
        from .collect import launcher_facts

        _LAUNCHER = launcher_facts()
    return _LAUNCHER


def keep(store, run_id, stage):
    """Collect the files the run's ranks left in `stage` and store them for run_id; the number
    of ranks stored. The launcher's row alone when no rank wrote (a program linked statically,
    a run that did not start): the run still says where it was launched from."""
    rows = collect_rows(stage)
    store.set_evidence(run_id, [(rank, json.dumps(value, sort_keys=True)) for rank, value in rows.items()])
    return sum(1 for rank in rows if rank >= 0)


def collect_rows(stage):
    from .collect import collect

    try:
        return collect(stage, launcher())
    except OSError:  # the staging directory is gone (removed under us): nothing to keep
        return {-1: dict(launcher(), launch_ns=None)}
