"""`nearmetal study FILE --submit`: the study runner itself as one batch job, with its
follow-on queued up front.

Outside an allocation, a study on a batch scheduler otherwise submits one job per run: on
a cluster with a queue, its randomized blocks would spread over hours and over different
nodes. Submitted, the runner is one job sized for the study's largest cell (its nodes,
and the most ranks any cell puts on one node); inside it every run is an srun step, in
block order.

The chain of jobs: while a runner job runs, one follow-on waits behind it
(`--dependency=afterany`). When the time limit ends a job (SIGTERM, then SIGKILL), the
runner stops its current run and leaves it planned; the follow-on starts, resumes exactly
the runs still planned, and queues the next follow-on behind itself. The job that
completes the study cancels the one behind it. A job whose predecessor finished no run at
all (a run longer than the job's time limit) queues none, so the chain ends instead of
resubmitting forever; its output says so.

The jobs are recorded in the store (jobs rows with no run, study/store/store.py), so each job
knows its place in the chain.
"""

import math
import os
import shutil
import sys
from pathlib import Path

from ...errors import NearmetalError


def check(cfg, source=None):
    """What one runner job cannot run, refused before anything is planned: a heterogeneous
    (MPMD) benchmark. Its runs would be heterogeneous steps inside the runner's ordinary
    allocation, and there MPI_Init of MPICH's components never met (Slurm 22.05, pmi2, the
    local cluster: the step hung until cancelled); as their own batch jobs (`#SBATCH hetjob`)
    they run."""
    for i, bench in enumerate(cfg.benchmark):
        if bench.components:
            raise NearmetalError(f"{source or 'study'}: benchmark[{i}].components: a heterogeneous (MPMD) benchmark "
                                 f"({bench.label}) does not run inside one runner job: run the study without "
                                 f"--submit (each run is then a heterogeneous batch job of its own)")


def job_size(cfg):
    """{"nodes", "per_node", "threads"} of the study's largest cell: the most nodes any cell
    asks for, the most ranks any cell puts on one node, the most threads per rank."""
    from ..config import placement
    from ..plan.plan import cells

    all_cells = cells(cfg)
    slurm_nodes = cfg.slurm.nodes or 1
    placed = placement.uses_nodes(cfg)

    def nodes_of(c):
        return placement.nodes(c.variant, c.ranks) if placed else slurm_nodes

    return {"nodes": max(nodes_of(c) for c in all_cells),
            "per_node": max(math.ceil(c.ranks / nodes_of(c)) for c in all_cells),
            "threads": max(c.threads for c in all_cells)}


def _nearmetal():
    """This nearmetal's own command, absolute: the job runs the same installation."""
    me = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if os.path.basename(me) == "nearmetal" and os.access(me, os.X_OK):
        return me
    found = shutil.which("nearmetal")
    if not found:
        raise NearmetalError("--submit: cannot find the nearmetal command to run in the batch job (not on PATH)")
    return os.path.abspath(found)


def runner_argv(file, db):
    return [_nearmetal(), "study", os.path.abspath(file), "--resume", "--db", os.path.abspath(db), "--no-progress"]


def jobs_dir(db):
    """Where the runner's script and its jobs' output go: beside the database."""
    return Path(os.path.abspath(db)).parent / "runner-jobs"


def submit(cfg, file, store, study_id, db, say):
    """Queue the runner job and its follow-on; (first job id, follow-on job id)."""
    from ... import schedulers

    if file is None:
        raise NearmetalError("--submit needs a study file: the built-in quickstart runs on this machine")
    scheduler = schedulers.get(cfg.study.scheduler)
    left = store.counts(study_id).get("planned", 0)
    if not left and not cfg.study.adaptive:
        raise NearmetalError(f"study '{cfg.study.name}' in {db} has no run left to do: nothing to submit")
    size, outdir = job_size(cfg), jobs_dir(db)
    outdir.mkdir(parents=True, exist_ok=True)
    argv = runner_argv(file, db)
    options = cfg.slurm.model_dump()
    # Held until both are recorded and this process has let the store go: the job takes the
    # store's writer lock as soon as it starts.
    first = scheduler.submit_runner(argv, size, options, outdir, cfg.study.name, hold=True)
    store.record_runner_job(study_id, first)
    try:
        after = scheduler.submit_runner(argv, size, options, outdir, cfg.study.name, after=first)
    except NearmetalError:
        scheduler.cancel(first)
        store.set_runner_state(study_id, first, "runner cancelled")
        raise
    store.record_runner_job(study_id, after)
    store.close()
    scheduler.release(first)
    say(f"study {cfg.study.name}: {left} runs to do, submitted as batch job {first} ({size['nodes']} node(s) x "
        f"{size['per_node']} task(s)), follow-on {after} queued behind it; output in {outdir}; results in {db}")
    return first, after


def on_start(cfg, file, store, study_id, db, say):
    """Inside one of this study's runner jobs: mark it started and keep one follow-on queued
    behind it. The job id, or None when this process is not a runner job of the study."""
    from ... import schedulers

    scheduler = schedulers.get(cfg.study.scheduler)
    job = scheduler.own_job()
    rows = store.runner_jobs(study_id) if job else []
    mine = [i for i, r in enumerate(rows) if r["job_id"] == job]
    if not mine:
        return None
    i = mine[-1]
    counts = store.counts(study_id)
    finished = sum(counts.values()) - counts.get("planned", 0)
    previous = rows[i - 1]["state"] if i else None
    store.set_runner_state(study_id, job, f"runner started {finished}")
    if i < len(rows) - 1:  # a follow-on already waits behind this job
        return job
    if previous is not None and previous == f"runner started {finished}":
        say(f"batch job {rows[i - 1]['job_id']} finished no run within its time limit: this job queues no follow-on "
            f"(give [slurm] time more than the longest run)")
        return job
    try:
        after = scheduler.submit_runner(runner_argv(file, db), job_size(cfg), cfg.slurm.model_dump(), jobs_dir(db),
                                        cfg.study.name, after=job)
    except NearmetalError as e:  # this job still runs what it can; resume by hand after it
        say(f"batch job {job}: no follow-on queued: {e}")
        return job
    store.record_runner_job(study_id, after)
    say(f"batch job {job} runs study {cfg.study.name}; follow-on {after} queued behind it")
    return job


def on_complete(cfg, store, study_id, job, say):
    """The study is complete: the follow-ons behind this job are not needed."""
    from ... import schedulers

    scheduler = schedulers.get(cfg.study.scheduler)
    behind = False
    for row in store.runner_jobs(study_id):
        if row["job_id"] == job:
            behind = True
            store.set_runner_state(study_id, job, "runner ended")
        elif behind and row["state"] == "runner":
            scheduler.cancel(row["job_id"])
            store.set_runner_state(study_id, row["job_id"], "runner cancelled")
            say(f"study {cfg.study.name} is complete: follow-on job {row['job_id']} cancelled")
