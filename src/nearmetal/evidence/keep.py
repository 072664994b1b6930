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


def read(stage):
    """The files the run's ranks left in `stage` (each removed once read); none when the
    staging directory is gone (removed under us)."""
    from .collect import read_files

    try:
        return read_files(stage)
    except OSError:
        return []


def keep(store, run_id, raws):
    """Store the ranks' files (read()) for run_id; the number of ranks stored. The launcher's
    row alone when no rank wrote (a program linked statically, a run that did not start): the
    run still says where it was launched from."""
    from .collect import collect

    rows = collect(None, launcher(), raws=raws)
    store.set_evidence(run_id, [(rank, json.dumps(value, sort_keys=True)) for rank, value in rows.items()])
    return sum(1 for rank in rows if rank >= 0)


def lone_start(raws, launch_plan, fix=None):
    """Why a run that exited 0 is no MPI job (lone.py), or None; launch_plan: its run.Plan;
    fix: the remedy's words when not a study's."""
    from .lone import STUDY_FIX, why_failed

    return why_failed(raws, sum(c.ranks for c in launch_plan.components),
                      launch_plan.components[0].installation["family"], fix or STUDY_FIX)

