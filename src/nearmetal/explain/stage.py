"""`nearmetal explain` and `[study] explain = true`: test the candidate causes of each slower
answer by experiment.

For each slower answer (candidates.py), its top candidates' ablations become named variants
(ablation.py); they run in further randomized blocks beside the slow variant and its baseline
(the three side by side, in an order shuffled per block by the study's seed), a round of the
study's first blocks at a time, until each candidate's recovered share (share.py) is decided
(its interval narrower than 0.5, or wholly on one side of half the gap), the study's
max_repetitions is reached, or the time budget is spent. What was planned is kept in the store
(meta "explain of study N": the candidates, their ablations, the next block), and the runs are
ordinary planned runs: an interrupted explain, run again, runs what is still planned and goes on.
"""

import json
import random
import time

from ..errors import NearmetalError
from ..study.config import placement
from ..study.store import codec
from ..study.config.ids import variant_id
from ..study.records import SKIPPED, Cell, RunSpec
from . import ablation as ab
from .candidates import TOP, identical, rank, slower_answers
from .evidence import gather
from .why import PLAN_KEY, RECOVERS, analyses, section, stored_plan

DECIDED_WIDTH = 0.5
DEFAULT_BUDGET = 600.0


def _save(store, study_id, plan):
    store.set_meta(PLAN_KEY.format(study_id), json.dumps(plan, sort_keys=True))


def _fill_simd(cfg, store, study_id, evidence, slow_vids, base_vids):
    """Evidence.simd of these variants: their program file's widest vector instructions; for a
    slow variant whose build is narrower than its baseline's, `wider_image`: the image (same
    MPI, same benchmark) holding the widest build, the ablation's image — among the study's
    other variants' images and the images in nearmetal's store (`image list`)."""
    import os

    from ..image import list_images
    from ..study.execute.executor import Executor
    from ..study.execute.provenance import program_file
    from . import simd

    try:
        flags = next((l.split(":", 1)[1].split() for l in open("/proc/cpuinfo") if l.startswith("flags")), [])
    except OSError:
        flags = []
    benches = {b.label: b for b in cfg.benchmark}
    runs = {r["variant"]: r for r in store.runs(study_id) if r["status"] == "ok"}
    ex = Executor(cfg, store, study_id, progress=False)
    scanned = {}  # host file: (level, counts) or None

    def scan(variant, row):
        if row["benchmark"] not in benches:
            return None
        try:
            launch = ex.launch_for(Cell(benches[row["benchmark"]], variant, row["ranks"], row["threads"]))
            if launch.error is not None:
                return None
            _, host = program_file(launch.launch.components[0], launch.request.program)
        except (NearmetalError, OSError, ValueError, AttributeError):
            return None
        if not host or not os.path.isfile(str(host)):
            return None
        if str(host) not in scanned:
            scanned[str(host)] = simd.scan(str(host))
        return scanned[str(host)]

    images = None  # nearmetal's images, listed once, when a slow variant's build is narrower

    try:
        for vid in set(slow_vids) | set(base_vids):
            if vid in runs and vid in evidence and (found := scan(evidence[vid].variant, runs[vid])):
                evidence[vid].simd = {"level": found[0], "counts": found[1], "cpu": simd.cpu_level(flags)}
        for vid, bid in zip(slow_vids, base_vids):
            mine, theirs = getattr(evidence.get(vid), "simd", None), getattr(evidence.get(bid), "simd", None)
            if not mine or not theirs or simd.LEVELS.index(mine["level"]) >= simd.LEVELS.index(theirs["level"]):
                continue
            slow = evidence[vid].variant
            if not slow.get("image"):
                continue  # a native build: the fix is to build it wider, nothing to swap
            others = [evidence[o].variant for o, row in runs.items() if o not in (vid, bid)
                      and row["benchmark"] == runs[vid]["benchmark"] and evidence[o].variant.get("image")]
            named = {v["image"] for v in others}
            unnamed = {k: v for k, v in slow.items() if k != "name"}  # its own cell: launches are cached by variant
            images = list_images() if images is None else images
            others += [{**unnamed, "image": img.name} for img in images
                       if img.name not in named and slow.get("mpi") in img.mpis]
            levels = [(v, found[0]) for v in others if (found := scan(v, runs[vid]))]
            mine["wider_image"] = simd.wider_image(slow, mine["level"], levels)
    finally:
        ex.close()


def make_plan(cfg, store, study_id, analysis, say):
    """Rank the candidates of every slower answer, validate their ablations, store the plan."""
    evidence = gather(store, study_id, analysis)
    found = slower_answers(analysis)
    if found:
        pairs = [(e["variant"], e["baseline"]) for e, _ in found if e.get("baseline")]
        _fill_simd(cfg, store, study_id, evidence, [v for v, _ in pairs], [b for _, b in pairs])
    plan = {"answers": [], "ablations": [], "next_block": None, "rounds": 0}
    for entry, benches in found:
        vid, bid = entry["variant"], entry.get("baseline")
        if vid not in evidence or bid not in evidence:
            continue
        if identical(evidence[vid].variant, evidence[bid].variant):  # an A/A pair: a chance verdict, no factor
            say(f"explain {vid}: it launches exactly as its baseline {bid}: no difference to explain")
            continue
        tested, untested, where = rank(evidence[vid], evidence[bid])
        causes = []
        for c in tested[:TOP]:
            d = c.as_dict()
            name = ab.name_for(vid, c.factor or c.explainer)
            try:
                variant = ab.as_variant(c.ablation, name)
            except NearmetalError as e:
                d["untestable"] = str(e)
                causes.append(d)
                continue
            d["ablation"], d["ablation_id"] = variant, variant_id(variant)
            plan["ablations"].append(d["ablation_id"])
            causes.append(d)
        causes += [c.as_dict() for c in tested[TOP:] + untested]
        plan["answers"].append({"variant": vid, "baseline": bid, "benchmarks": benches, "causes": causes,
                                "where": [c.as_dict() for c in where],
                                "has_profile": any(r.get("mpi_profile") for r in evidence[vid].every_rank())})
        tried = [c["ablation_id"] for c in causes if c.get("ablation_id")]
        say(f"explain {vid}: {len(tried)} candidate cause{'' if len(tried) == 1 else 's'} to test" + (f" ({', '.join(tried)})" if tried else ""))
    return plan


def _cells(cfg, store, study_id, answer, variants):
    """The cells one round runs for an answer: the slow variant's, its baseline's and each
    ablation's, at the slow variant's benchmarks and placements."""
    benches = {b.label: b for b in cfg.benchmark}
    runs = store.runs(study_id)
    out, seen = [], set()
    for r in runs:
        if r["variant"] != answer["variant"] or r["warmup"] or (answer["benchmarks"] and
                                                                r["benchmark"] not in answer["benchmarks"]):
            continue
        bench = benches.get(r["benchmark"])
        if bench is None:
            continue
        slow = json.loads(r["variant_json"])
        base = next((json.loads(x["variant_json"]) for x in runs if x["variant"] == answer["baseline"]
                     and x["benchmark"] == r["benchmark"] and x["ranks"] == r["ranks"] and x["threads"] == r["threads"]),
                    None)
        if base is None:
            continue
        for v in [slow, base] + [{**variants[c["ablation_id"]], **placement.of(slow)}
                                 for c in answer["causes"] if c.get("ablation_id")]:
            cell = Cell(bench, v, r["ranks"], r["threads"])
            if cell.key not in seen:
                seen.add(cell.key)
                out.append(cell)
    return out


def plan_round(cfg, store, study_id, plan):
    """Plan the next round of blocks (and, first, the ablations' warm-up); returns runs added."""
    runs = store.runs(study_id)
    seed = store.study(cfg.study.name)["seed"]
    if plan["next_block"] is None:
        from ..study.plan.sequential import blocks_measured, close

        plan["next_block"] = blocks_measured(runs)
        close(store, study_id, plan["next_block"])  # the blocks from here on are explain's, not the study's
    variants = {c["ablation_id"]: c["ablation"] for a in plan["answers"] for c in a["causes"] if c.get("ablation_id")}
    cells = []
    for answer in plan["answers"]:
        cells += [c for c in _cells(cfg, store, study_id, answer, variants) if c.key not in {x.key for x in cells}]
    if not cells:
        return 0
    position = max([r["position"] for r in runs] + [-1]) + 1
    first, n = plan["next_block"], cfg.study.first_blocks
    specs = []
    if plan["rounds"] == 0:
        for w in range(cfg.study.warmup):
            for cell in cells:
                if cell.variant_id in variants:
                    specs.append(RunSpec(cell, -1, position, w, True))
                    position += 1
    for block in range(first, first + n):
        order = list(cells)
        random.Random(f"{seed}/explain/{block}").shuffle(order)
        for cell in order:
            specs.append(RunSpec(cell, block, position, block, False))
            position += 1
    spec = codec.stored_analysis_spec(store, study_id)
    if spec is not None:  # each ablation compared with its slow variant's baseline
        from dataclasses import replace

        extra = {c["ablation_id"]: a["baseline"] for a in plan["answers"] for c in a["causes"] if c.get("ablation_id")}
        codec.store_analysis_spec(store, study_id, replace(spec, baselines={**spec.baselines, **extra}))
    store.add_planned(study_id, [codec.planned_row(s) for s in specs])
    plan["next_block"], plan["rounds"] = first + n, plan["rounds"] + 1
    _save(store, study_id, plan)
    return len(specs)


def _run_pending(cfg, store, study_id, deadline, say, console):
    """Run the planned runs while the budget lasts; False when it ran out first."""
    from ..study.execute.executor import Executor

    ex = Executor(cfg, store, study_id, console=console, progress=False)
    took = []
    try:
        for row in store.pending(study_id):
            expected = sum(took) / len(took) if took else 0.0
            if time.monotonic() + expected > deadline:
                return False
            t0 = time.monotonic()
            if ex.run_or_skip(row) != SKIPPED:  # a stopped cell's runs take no time
                took.append(time.monotonic() - t0)
    finally:
        ex.close()
    return True


def _decided(why):
    for a in why["answers"]:
        for c in a["causes"]:
            sh = c.get("share")
            if not c.get("ablation_id") or sh is None or sh.get("share") is None:
                continue  # nothing to compare (no gap in these blocks, or its runs failed): more blocks won't tell
            if sh.get("low") is None:
                return False
            if sh["high"] - sh["low"] > DECIDED_WIDTH and sh["low"] < RECOVERS < sh["high"]:
                return False
    return True


def _undecided_words(analysis, store, study_id):
    """What explain says of undecided answers when none is slower: they are not its to explain
    (the Why section says whether launches fall into modes); what the study said would decide
    them when it stopped (or at its outlook), if it said so."""
    from ..study.execute import machine_check

    n = sum(1 for e in (analysis.get("answers") or {}).get("by_benchmark") or [] if e.get("verdict") == "inconclusive")
    if not n:
        return ""
    kept = machine_check.load(store, study_id) or {}
    said = (kept.get("stop") or kept.get("outlook") or {}).get("text")
    adaptive = (analysis.get("sequential") or {}).get("adaptive")
    more = "a longer max_time or a larger max_repetitions" if adaptive else "more repetitions, in a new study"
    return (f"; {n} answer{'s are' if n != 1 else ' is'} undecided: the study's blocks did not settle "
            f"{'them' if n != 1 else 'it'}, and explain tests the causes of slower answers only"
            + (f". The study said: {said}" if said else f" (more blocks would: {more}, or a quieter machine)"))


def round_words(rounds, study, left_s):
    """The progress line before the next round: which round of at most how many (the study's
    most_blocks in rounds of first_blocks) and the budget left."""
    most = -(-study.most_blocks // max(1, study.first_blocks))
    return (f"explain: a candidate's share is not decided yet: round {rounds + 1} of at most {most} "
            f"({max(0.0, left_s):.0f} s of the budget left)")


def run_stage(cfg, store, study_id, budget=DEFAULT_BUDGET, say=print, console=None):
    """Explain a finished study in `store` (held for writing). Returns the Why section."""
    from ..analysis.analyze import analyze

    deadline = time.monotonic() + budget
    plan = stored_plan(store, study_id)
    if plan is None:
        first = analyze(store, cfg.study.name, n_boot=500)
        plan = make_plan(cfg, store, study_id, first, say)
        if not plan["answers"]:
            say(f"study '{cfg.study.name}': no slower answer to explain" + _undecided_words(first, store, study_id))
            _save(store, study_id, plan)
            return section(store, study_id, *analyses(store, cfg.study.name, study_id))
        if not plan["ablations"]:
            say("no candidate cause can be tested by an ablation: the Why section lists what the evidence shows")
        _save(store, study_id, plan)
    while plan["ablations"]:
        if plan["rounds"] == 0:  # (again, if an interrupted explain planned it unsaved: same keys, nothing added)
            plan_round(cfg, store, study_id, plan)
        if not _run_pending(cfg, store, study_id, deadline, say, console):
            say(f"explain: the time budget ({budget:g} s) is spent; run `nearmetal explain` again to go on")
            break
        why = section(store, study_id, *analyses(store, cfg.study.name, study_id, n_boot=500))
        if _decided(why) or plan["rounds"] * cfg.study.first_blocks >= cfg.study.most_blocks:
            break
        if time.monotonic() >= deadline:
            say(f"explain: the time budget ({budget:g} s) is spent; run `nearmetal explain` again to go on")
            break
        say(round_words(plan["rounds"], cfg.study, deadline - time.monotonic()))
        plan_round(cfg, store, study_id, plan)
    return section(store, study_id, *analyses(store, cfg.study.name, study_id))


def _study_row(store, name):
    studies = store.studies()
    if not studies:
        raise NearmetalError(f"{store.path} holds no study")
    if name is None:
        if len(studies) > 1:
            raise NearmetalError(f"{store.path} holds several studies ({', '.join(s['name'] for s in studies)}): "
                                 f"choose one with --study")
        return studies[0]
    row = store.study(name)
    if row is None:
        raise NearmetalError(f"no study '{name}' in {store.path}")
    return row


def check_explainable(db, name):
    """(study row, config) of a study `explain` can work on, read without writing anything;
    a one-line NearmetalError otherwise."""
    from ..study.plan import study_file as config_mod
    from ..study.store.store import Store

    with Store(db, readonly=True) as ro:
        row = _study_row(ro, name)
        counts = ro.counts(row["id"])
        plan = stored_plan(ro, row["id"])
    ended = {k: v for k, v in counts.items() if k != "planned" and v}
    if not counts.get("ok") and ended and not counts.get("planned"):  # it ran to its end; no run gave a number
        import shlex

        said = ", ".join(f"{v} {k}" for k, v in sorted(ended.items()))
        report = shlex.join(["nearmetal", "report", "--db", str(db), "--study", row["name"]])
        raise NearmetalError(f"study '{row['name']}' in {db} has no successful run ({said}): nothing to explain; "
                             f"see why in its report's failures ({report})")
    if counts.get("planned") and plan is None:
        from ..study.store.lock import refuse_if_held

        refuse_if_held(db, f"explain of study '{row['name']}'")  # its runner's PID, while it runs
        n = counts["planned"]
        raise NearmetalError(f"study '{row['name']}' in {db} is not finished ({n} run{'s' * (n != 1)} still planned): "
                             f"complete it first (nearmetal study FILE --resume --db {db})")
    if not counts.get("ok"):
        raise NearmetalError(f"study '{row['name']}' in {db} has no finished runs: run it first "
                             f"(nearmetal study FILE), then explain it")
    if not row["config_toml"]:
        raise NearmetalError(f"study '{row['name']}' in {db} was imported, not run by nearmetal: there is nothing "
                             f"to launch its ablations with")
    try:
        cfg = config_mod.parse(row["config_toml"], source=f"study '{row['name']}'")
    except NearmetalError as e:
        raise NearmetalError(f"study '{row['name']}' in {db}: its stored study file no longer parses ({e})") from None
    return row, cfg


def explain(db, name=None, budget=DEFAULT_BUDGET, say=print, console=None):
    """`nearmetal explain`: check, take the writer lock (refused while the study runs), explain."""
    from ..study.store.store import Store

    row, cfg = check_explainable(db, name)
    with Store(db, create=False, what=f"explain of study '{row['name']}'") as store:
        before = store.counts(row["id"])
        why = run_stage(cfg, store, row["id"], budget, say, console)
        why["ran"] = store.counts(row["id"]) != before  # runs added or finished: reports written before lack them
        return why
