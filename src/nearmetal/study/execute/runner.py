"""`nearmetal study`: plan a study into the store, then execute what is still pending."""

import json
import math
import os
import random
import shlex
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from ... import __version__
from ...errors import NearmetalError
from ..plan import analysis_spec
from ..store import codec
from ..plan import study_file
from ..plan.plan import baseline_of, make_plan, variant_id
from ..store.lock import lock_for_writing
from ..store.store import Store
from .same_file import difference


def default_db(name):
    """results/NAME/study.db; a name that could reach outside results/ is refused."""
    from ..config.fields import study_name_problem

    if problem := study_name_problem(name):
        raise NearmetalError(f"study name '{name[:80]}': {problem}")
    return Path("results") / name / "study.db"


def load(path):
    if path is None:
        return study_file.builtin_quickstart()
    return study_file.load(path)


def check_resume(db_path, names):
    """--resume on a database that holds other studies but none of `names` (the study's own, or
    an I/O sweep's two): the user meant one of those, and without its file another study (the
    built-in one) would start in that database. A one-line NearmetalError; nothing when the
    database is new or holds one of them."""
    if not Path(db_path).exists() or _being_created(db_path):
        return
    with Store(db_path, readonly=True) as store:
        held = [r["name"] for r in store.studies()]
    if held and not set(names) & set(held):
        listed = ", ".join(f"'{n}'" for n in held[:5]) + (", ..." if len(held) > 5 else "")
        raise NearmetalError(f"--resume: study '{names[-1]}' is not in {db_path}, which holds {listed}: give that "
                             f"study's file to resume it, or leave out --resume to add '{names[-1]}' to it")


def _being_created(db_path):
    """An SQLite file without a table yet: a second runner started at the same moment has just
    created it (the writer lock decides which one runs); it is no other study's database."""
    import sqlite3
    from contextlib import closing
    from urllib.parse import quote

    try:
        with closing(sqlite3.connect(f"file:{quote(str(Path(db_path).resolve()))}?mode=ro", uri=True)) as con:
            return con.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] == 0
    except sqlite3.Error:
        return False


def open_study(cfg, text, db_path, resume, builtin=False, say=print):
    """Open the store and make sure the study's planned runs are in it; returns (store, study_id, new).

    The returned store holds the database's writer lock (study/store/lock.py) until it is
    closed or the process ends: opening, creating, planning and running all happen under
    it, so a second runner of the same database is refused with the holder's PID.

    For the built-in quickstart, a database planned from an older quickstart is kept aside
    (renamed) rather than refused, so the README's first command always works."""
    what = f"study '{cfg.study.name}'"
    with lock_for_writing(db_path, what):   # held across the rename below; the store keeps its own hold
        opened = [Store(db_path, what=what)]
        try:
            return _open_study(opened, cfg, text, db_path, resume, builtin, say, what)
        except BaseException:
            opened[-1].close()
            raise


def _open_study(opened, cfg, text, db_path, resume, builtin, say, what):
    store = opened[-1]
    row = store.study(cfg.study.name)
    if builtin and row is not None and row["config_toml"] != text:
        store.close()
        kept = Path(db_path).with_name(f"{Path(db_path).stem}-{row['created'].replace(':', '')}.db")
        for suffix in ("", "-wal", "-shm"):
            src = Path(str(db_path) + suffix)
            if src.exists():
                src.rename(str(kept) + suffix)
        say(f"the built-in quickstart changed since {row['created']}: previous results kept in {kept}")
        store = Store(db_path, what=what)
        opened.append(store)
        row = None
    if row is not None:
        if not resume:
            raise NearmetalError(f"study '{cfg.study.name}' already exists in {db_path}: use --resume to complete it, "
                                 f"or --db for a new database")
        if (where := difference(row["config_toml"], text)) is not None:
            raise NearmetalError(f"study '{cfg.study.name}' in {db_path} was planned from a different study file "
                                 f"(it differs at {where}); resume needs the same file (or use a new --db)")
        return store, row["id"], False
    if resume and not builtin:  # (the quickstart's script resumes on every run: its first starts it)
        say(f"--resume: study '{cfg.study.name}' is not in {db_path} yet: starting it")
    seed = cfg.study.seed if cfg.study.seed is not None else random.SystemRandom().randrange(2**31)
    _say_left_out(cfg, say)
    runs = make_plan(cfg, seed)
    spec = analysis_spec.decide(cfg)  # before anything is stored: a refusal here leaves no study behind
    created = datetime.now(timezone.utc).isoformat(timespec="seconds")
    study_id = store.create_study(cfg.study.name, text, seed, cfg.study.margin, cfg.baseline.model_dump(),
                                  __version__, created, planned=[codec.planned_row(r) for r in runs])
    codec.store_analysis_spec(store, study_id, spec)
    return store, study_id, True


def add_variants(cfg, store, study_id, variants, say=print):
    """Plan further variants (variant dicts) into a planned study: their cells' warm-up and
    first blocks after the runs already planned, and their baselines into its stored
    analysis spec — the way a stage after the analysis (an explain stage's ablations) adds
    runs. Idempotent by run key, so a stage interrupted and run again adds what is missing
    and `run` (or --resume) runs them. Returns the number of runs planned."""
    row = store.study(cfg.study.name)
    runs = store.runs(study_id)
    added = make_plan(cfg, row["seed"], variants=variants, position=max([r["position"] for r in runs] + [-1]) + 1)
    have = {r["run_key"] for r in runs}
    new = [r for r in added if r.key not in have]
    stored = {r["variant"]: r["variant_json"] for r in runs}  # a study stored before analysis specs were
    spec = analysis_spec.decide(cfg, [json.loads(v) for v in stored.values()] + [r.cell.variant for r in added],
                                planned=False)
    decided = codec.stored_analysis_spec(store, study_id)
    if decided is not None:  # what was decided stays decided
        spec = replace(decided, baselines={**spec.baselines, **decided.baselines})
    if new:
        from ..plan.sequential import blocks_measured, record_end

        # the study goes on: an end recorded before is void (its look is no longer the last)
        record_end(store, study_id, blocks_measured(runs))
        store.add_planned(study_id, [codec.planned_row(r) for r in new])
    codec.store_analysis_spec(store, study_id, spec)
    say(f"study '{cfg.study.name}': {len(new)} runs planned for {len(variants)} further variant(s)")
    return len(new)


def _say_left_out(cfg, say):
    """Which cells the plan leaves out, and why: those of runtimes not installed here
    ([study] missing_runtimes = "skip"), those of GPU benchmarks on a machine without a GPU."""
    from ..plan.gpu_cells import left_out, note
    from ..plan.plan import cells, matrix_cells, missing_runtimes

    if cfg.study.missing_runtimes == "skip":
        from ... import runtimes

        for name, n in missing_runtimes(cfg, matrix_cells(cfg)).items():
            hint = runtimes.get(name).install_hint
            say(f"{name} is not installed here: its {n} cells are left out of study '{cfg.study.name}'"
                + (f" ({hint})" if hint else ""))
    gone = left_out(cfg, cells(cfg, here=False))
    if gone:
        say(note(cfg, len(gone)))


def run(cfg, store, study_id, executor, say=print):
    """Run every planned run; for an adaptive study, then the next look's blocks, until
    extend() says the study is complete. First the machine is checked (machine_check.py): a
    busy one is said at once, and may stop the study before its first run. The number of
    runs that did not succeed."""
    executor.cancel_leftover_jobs(say=say)
    failed, started = 0, time.monotonic()
    try:
        if not _machine_allows(cfg, store, study_id, say, started):
            return 0
        while True:
            failed += executor.run_all()[1]
            if not extend(cfg, store, study_id, say=say, started=started):
                return failed
    finally:
        executor.close()


def _machine_allows(cfg, store, study_id, say, started):
    """The check before the runs (machine_check.precheck), kept with the study (a resumed
    study's earlier stop is replaced); False when it stops the study. Only where the runs
    start on this machine."""
    from ... import schedulers
    from . import machine_check

    if not schedulers.get(cfg.study.scheduler).job_is_child or not store.counts(study_id).get("planned"):
        return True
    rec = machine_check.precheck(cfg, say)
    if rec is None:
        return True
    machine_check.record(store, study_id, precheck=rec, stop=None)
    if rec["action"] != "stop":
        return True
    machine_check.record(store, study_id, stop={"text": rec["text"], "elapsed_s": round(time.monotonic() - started, 1),
                                                "blocks": 0})
    return False


def _blocks_words(first, last):
    return f"block {first}" if first == last else f"blocks {first}-{last}"


MIN_SHORT_LOOK = 1  # blocks a shortened final look adds at least (one already narrows the intervals a little)


def extend(cfg, store, study_id, say=print, started=None):
    """An adaptive study's next look: when every planned run has finished, plan the blocks up
    to the next look for the cells whose points are still open (and their baselines).
    Returns the number of runs added; 0 when the study is complete: every point decided,
    max_repetitions reached, or max_time spent on runs. Where the time left does not allow
    the next look's blocks, the blocks it allows are a shortened final look. Derived from the
    stored runs only, so a resumed study takes the same decisions."""
    if not cfg.study.adaptive:
        return 0
    from ..plan.plan import extend_plan
    from ..plan.sequential import blocks_measured, closed_at, looks_of, open_points, record_end, recorded_end

    runs = store.runs(study_id)
    if any(r["status"] == "planned" for r in runs):
        return 0
    closed = closed_at(store, study_id)
    if closed is not None:  # explain's blocks follow: the study's own are all there are
        say(f"explain added blocks of its own from block {closed + 1} on: the study's answers stay those of its "
            f"{closed} blocks, and it is not extended")  # closed: a count of blocks, the next one's 0-based index
        return 0
    blocks = blocks_measured(runs)
    looks, _ = looks_of(cfg.study)
    later = [n for n in looks if n > blocks]
    spent = sum(r["wall_s"] or 0.0 for r in runs)
    end = recorded_end(store, study_id) or {}
    shortened = blocks not in looks and looks[0] < blocks < looks[-1]
    if shortened or (end.get("blocks") == blocks and end.get("reason") == "max_time"):
        # The time ran out here — at a shortened final look (below), or before the next look
        # (an earlier version took no shortened one): it stays ended, so a resumed study takes
        # the same decisions and its final look stays the one it was.
        say(f"max_time ({cfg.study.max_time:g} s of runs): {spent:.0f} s spent; the study ended after {blocks} "
            f"blocks" + (", its shortened final look" if shortened else ""))
        record_end(store, study_id, blocks, "max_time")
        return 0
    still_open = open_points(store, study_id, cfg, blocks, _planned_alpha(store, study_id))
    opened = {key for _, cell_keys, _ in still_open for key in cell_keys}
    # where the study ends is kept with it: the analysis decides the open points at that look
    if not opened:
        say(f"every compared point is decided after {blocks} blocks")
        record_end(store, study_id, blocks, "decided")
        return 0
    if not later:
        say(f"max_repetitions ({cfg.study.max_repetitions} blocks) reached with {len(opened)} cells still open")
        record_end(store, study_id, blocks, "max_repetitions")
        return 0
    if _budget_stops(cfg, store, study_id, runs, blocks, spent, say, started, still_open):
        record_end(store, study_id, blocks, "budget")
        return 0
    seed = store.study(cfg.study.name)["seed"]
    position = max(r["position"] for r in runs) + 1
    added = extend_plan(cfg, seed, range(blocks, later[0]), opened, position)
    # The budget is checked before a look's blocks start, at what they are expected to take
    # (each cell's mean run time so far), so a study stops within max_time, not one look past it.
    expected = _expected_seconds(runs, added)
    if spent + expected > cfg.study.max_time:
        over = (f"max_time ({cfg.study.max_time:g} s of runs): {spent:.0f} s spent after {blocks} blocks; the next "
                f"look (blocks {blocks + 1}-{later[0]}, about {expected:.0f} s) would pass it")
        # What the time left allows of it, when that is worth a look, is the final look: the
        # analysis takes it as such (sequential.ended_looks, final_alpha), at the level that keeps
        # the planned looks' false alarms.
        per_block = expected / (later[0] - blocks)
        fit = min(later[0] - blocks - 1, int((cfg.study.max_time - spent) // per_block)) if per_block > 0 else 0
        if fit < MIN_SHORT_LOOK:
            say(f"{over}; {len(opened)} cells still open")
            record_end(store, study_id, blocks, "max_time")
            return 0
        added = [r for r in added if r.block < blocks + fit]  # its first blocks, as planned
        say(f"{over}: a shortened final look instead, {_blocks_words(blocks + 1, blocks + fit)} for the {len(opened)} "
            f"cells still open ({len(added)} runs, about {_expected_seconds(runs, added):.0f} s)")
        record_end(store, study_id, blocks)
        store.add_planned(study_id, [codec.planned_row(r) for r in added])
        return len(added)
    record_end(store, study_id, blocks)  # it goes on: an end recorded before (a resumed study) is void
    _outlook(cfg, store, study_id, runs, blocks, spent, say, still_open)
    store.add_planned(study_id, [codec.planned_row(r) for r in added])
    say(f"after {blocks} blocks: {len(opened)} cells still open; blocks {blocks + 1}-{later[0]} for them "
        f"({len(added)} runs)")
    return len(added)


def _planned_alpha(store, study_id):
    """The level per look the study was planned with (a study planned before Pocock's level
    keeps Bonferroni's when resumed), None for one stored without an analysis spec."""
    spec = codec.stored_analysis_spec(store, study_id)
    return spec.alpha_per_look if spec is not None else None


def _budget_stops(cfg, store, study_id, runs, blocks, spent, say, started, still_open):
    """At a look: True (said and kept with the study) when none of the open points
    (sequential.open_points) can be decided within what is left of the budget (budget_check.py)."""
    from . import budget_check, machine_check

    p = budget_check.project(still_open, _cell_seconds(runs), blocks, cfg.study.margin,
                             cfg.study.max_repetitions, max(0.0, cfg.study.max_time - spent))
    if p["reachable"]:
        return False
    kept = machine_check.load(store, study_id) or {}
    pre = (kept.get("precheck") or {}).get("sample") or {}
    busy = machine_check.busy_sentence(pre) if pre.get("busy") else None
    text = budget_check.stop_text(p, cfg, spent, blocks, machine=busy)
    elapsed = None if started is None else round(time.monotonic() - started, 1)
    machine_check.record(store, study_id, stop={"text": text, "elapsed_s": elapsed, "blocks": blocks,
                                                "projection": {k: (v if v is None or math.isfinite(v) else None)
                                                               for k, v in p.items() if not isinstance(v, bool)}})
    say(f"⚠ study {cfg.study.name}: {text}")
    return True


def _cell_seconds(runs):
    """Each cell's mean run time so far (warm-up runs left out), by cell key."""
    times = {}
    for r in runs:
        if r["wall_s"] is not None and not r["warmup"]:
            times.setdefault(r["run_key"].rpartition("#")[0], []).append(r["wall_s"])
    return {k: sum(v) / len(v) for k, v in times.items()}


def _outlook(cfg, store, study_id, runs, blocks, spent, say, still_open):
    """At a look where the study goes on: when most open points cannot be decided within the
    budget (outlook.py), say so once, at once, and keep it with the study."""
    from . import machine_check, outlook

    if (machine_check.load(store, study_id) or {}).get("outlook"):
        return
    found = outlook_of(cfg, store, study_id, runs, blocks, spent, still_open)
    if found is None:
        return
    text = outlook.outlook_text(found, cfg, spent, blocks)
    machine_check.record(store, study_id, outlook={"text": text, "blocks": blocks, "projection": {
        k: (v if math.isfinite(v) else None) for k, v in found.items()}})
    say(f"⚠ study {cfg.study.name}: {text}")


def outlook_of(cfg, store, study_id, runs, blocks, spent, still_open):
    """outlook.outlook() of the open points after `blocks` blocks, at the level of the look the
    budget is projected to end at (planned or shortened: the final look's); None: nothing to say."""
    from . import outlook
    from ..plan.sequential import ended_looks, final_alpha, looks_of

    looks, _ = looks_of(cfg.study)
    afford, block_s = outlook.affordable(still_open, _cell_seconds(runs), blocks, cfg.study.max_repetitions,
                                         max(0.0, cfg.study.max_time - spent))
    if afford is None:
        return None
    level = final_alpha(ended_looks(looks, afford), tuple(looks), _planned_alpha(store, study_id))
    return outlook.outlook(still_open, blocks, cfg.study.margin, afford, block_s, level)


def _expected_seconds(runs, added):
    """Seconds the added runs should take: each cell's mean measured run time (all runs' mean
    for a cell not measured yet)."""
    every = [r["wall_s"] for r in runs if r["wall_s"] is not None and not r["warmup"]]
    fallback = sum(every) / len(every) if every else 0.0
    cell_s = _cell_seconds(runs)
    return sum(cell_s.get(a.cell.key, fallback) for a in added)


def runs_said(store, study_id):
    """'27 runs, 0 to run', counted as the reports count them: the runs explain added after the
    study closed (its later blocks, and its own variants' warm-ups) are said apart."""
    from ..plan.sequential import closed_at

    runs, closed = store.runs(study_id), closed_at(store, study_id)
    planned = sum(r["status"] == "planned" for r in runs)
    mine = {r["variant"] for r in runs if not r["warmup"] and r["block"] < closed} if closed is not None else None
    added = 0 if mine is None else sum(r["variant"] not in mine or r["block"] >= closed for r in runs)
    return f"{len(runs) - added} runs" + (f" (and {added} that explain added)" if added else "") + f", {planned} to run"


def dry_run(cfg, out, db_path=None):
    """Print every run, in order, with its argv — without touching a database (db_path: the
    one the study would use; a program's working directory lies beside it)."""
    from .executor import Executor

    seed = cfg.study.seed if cfg.study.seed is not None else 0
    runs = make_plan(cfg, seed)
    ex = Executor(cfg, store=None, study_id=None, progress=False, db_path=db_path or default_db(cfg.study.name))
    order = (f"seed {seed}" if cfg.study.seed is not None else
             "order shown with seed 0; the study draws a random seed when it runs")
    out(f"# study {cfg.study.name}: {len(runs)} runs ({cfg.study.warmup} warm-up rounds, "
        f"{cfg.study.first_blocks} randomized blocks, {order})")
    from ..plan.sequential import looks_of

    looks, alpha = looks_of(cfg.study)
    if cfg.study.adaptive:
        from ..plan.plan import cells

        most = len(cells(cfg)) * (cfg.study.max_repetitions - cfg.study.min_repetitions)
        out(f"# adaptive repetitions: these {cfg.study.min_repetitions} blocks first; then, for the cells whose "
            f"points are still undecided (and their baselines), more blocks, looked at again at "
            f"{', '.join(map(str, looks[1:]))} blocks (looks at {', '.join(map(str, looks))}, each at level "
            f"{alpha:.4f}); budget: at most {cfg.study.max_repetitions} blocks (up to {most} more runs) or "
            f"{cfg.study.max_time:g} s of runs")
    from ...analysis.rank_floor import smallest_p

    blind = [n for n in looks if smallest_p(n) >= alpha]  # the rank test's floor: no data could decide there
    if blind:
        out(f"# at {', '.join(map(str, blind))} blocks the rank test cannot give a p below the level "
            f"{alpha:.4f} (at best {', '.join(f'{smallest_p(n):.3g}' for n in blind)}): "
            + ("those looks" if cfg.study.adaptive else "the study") + " can call a point equivalent, never slower "
            "or faster")
    _say_left_out(cfg, lambda line: out(f"# {line}"))
    said = set()  # a label of several entries (one per MPI family) said once
    for bench in cfg.benchmark:  # shown resolved: a relative path was taken from the current directory
        workdir = cfg.workdir_of(bench)
        if workdir and (bench.label, workdir) not in said:
            said.add((bench.label, workdir))
            state = "exists" if os.path.isdir(workdir) else "created when the study runs; nothing is created now"
            out(f"# benchmark {bench.label}: working directory {workdir} ({state})")
    for r in runs:
        launch = ex.launch_for(r.cell)
        tag = "warmup" if r.warmup else f"block {r.block}"
        vs = variant_id(baseline_of(cfg, r.cell.variant))
        if launch.error is not None:
            out(f"{r.position:5d} {tag:9s} {r.cell.key}  (vs {vs})\n      cannot run: {launch.error}")
        else:
            out(f"{r.position:5d} {tag:9s} {r.cell.key}  (vs {vs})\n      {shlex.join(launch.launch.argv)}")
    return len(runs)
