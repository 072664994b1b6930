"""From stored records to per-point statistics and verdicts.

A point is one (benchmark, metric, point parameters such as message size, ranks,
threads) measured under one variant. Each variant's point is compared with the same
point under its baseline variant, paired by randomized block where both have a value.
The result is a plain dict (documented in docs/analysis.md) that every report renders;
studies with nm-iobench benchmarks also get "io", the I/O configurations compared
(nearmetal.io.analysis, shared with `nearmetal io best`).
"""

import json
from collections import defaultdict

from ..errors import NearmetalError
from ..study.store import codec
from ..study.plan.analysis_spec import of_stored_file
from .answers import answers
from .failure_line import failure_line
from ..study.records import STDERR_TAIL
from ..study.store.store import Store


def analyze(store: Store, study_name=None, n_boot=2000, later_variants=(), before_block=None, answered=True):
    """The analysis dict of a stored study (docs/analysis.md). later_variants: variants a later
    stage added (explain's ablations); their runs do not count in how busy the machine was
    during the study's own runs (the contention sentence the answer carries). before_block: the
    first block that stage added; given, the analysis is the study's own, as before that stage
    ran (its blocks and later_variants left out), so explain never moves the study's answers.
    answered=False: the points only (the Why section's shares), no answers."""
    from . import stats

    studies = store.studies()
    if not studies:
        raise NearmetalError(f"{store.path} holds no study")
    if study_name is None:
        if len(studies) > 1:
            names = ", ".join(s["name"] for s in studies)
            raise NearmetalError(f"{store.path} holds several studies ({names}): choose one with --study")
        study = studies[0]
    else:
        study = store.study(study_name)
        if study is None:
            raise NearmetalError(f"no study '{study_name}' in {store.path}")
    baseline_sel = json.loads(study["baseline_json"])
    runs = store.runs(study["id"])
    kept = None  # run ids the analysis reads (None: all)
    if before_block is not None:
        later = set(later_variants)
        runs = [r for r in runs if r["variant"] not in later and r["block"] < before_block]
        kept = {r["id"] for r in runs}
    variants = {}
    for r in runs:
        variants.setdefault(r["variant"], json.loads(r["variant_json"]))
    # decided when the study was planned (study/plan/analysis_spec.py); taken from the stored
    # study file for a study stored before that; None for an imported one
    decided = codec.stored_analysis_spec(store, study["id"])
    if decided is None or not set(variants) <= set(decided.baselines):
        decided = of_stored_file(study, variants)

    def baseline_id(vid):
        if decided is not None:
            return decided.baselines.get(vid)
        return baseline_sel.get("variant")

    # contention (study/execute/contention.py): runs on a busy machine are marked, or left out
    load_rows = [r for r in store.run_load(study["id"]) if kept is None or r["run_id"] in kept]
    disturbed_runs = {r["run_id"] for r in load_rows if r["busy"]}
    exclude_disturbed = bool(decided is not None and decided.exclude_disturbed)
    disturbed = defaultdict(int)  # (key, variant) -> values from disturbed runs

    # group values: key -> variant -> {block: value}
    groups = defaultdict(lambda: defaultdict(dict))
    summaries = {}  # (key, variant) -> {n, mean, std} for imported summary rows
    units = {}
    for rec in store.records(study["id"]):
        if kept is not None and rec["run_id"] not in kept:
            continue
        point = rec["point_json"]
        key = (rec["benchmark"], rec["kernel"], rec["metric"], point, rec["ranks"], rec["threads"])
        if rec["run_id"] in disturbed_runs:
            disturbed[(key, rec["variant"])] += 1
            if exclude_disturbed:
                continue
        units[key] = rec["unit"]
        bucket = groups[key][rec["variant"]]
        block = rec["block"]
        # several values for one block (shouldn't happen) are kept apart with a sub-key
        while block in bucket:
            block = (block, len(bucket)) if not isinstance(block, tuple) else (block[0], block[1] + 1)
        bucket[block] = rec["value"]
        if rec["n"] is not None:
            summaries[(key, rec["variant"])] = {"n": rec["n"], "mean": rec["value"], "std": rec["std"] or 0.0}

    from ..study.plan import sequential

    looks, alpha = (decided.looks, decided.alpha_per_look) if decided is not None else (None, sequential.ALPHA)
    blocks = sequential.blocks_measured(runs)
    # the look the study ended at, recorded by the runner (its open points are decided there);
    # a design of one look (fixed repetitions) ends at it
    final = ((looks[0], alpha, "fixed") if looks and len(looks) == 1 else
             sequential.end_of(store, study["id"], looks, alpha, blocks) if looks else None)
    points = []
    for key in sorted(groups, key=_sort_key):
        bench, kernel, metric, point_json, ranks, threads = key
        unit = units[key]
        hib = stats.direction_for_unit(unit)
        for vid in sorted(groups[key]):
            byblock = groups[key][vid]
            values = list(byblock.values())
            summary = summaries.get((key, vid))
            entry = {"benchmark": bench, "kernel": kernel, "metric": metric, "unit": unit, "higher_is_better": hib,
                     "point": json.loads(point_json), "ranks": ranks, "threads": threads, "variant": vid,
                     "variant_dims": variants.get(vid, {}), "values": values,
                     "blocks": list(byblock.keys()),  # values[i] was measured in block blocks[i]
                     "disturbed": disturbed.get((key, vid), 0),  # its runs taken on a busy machine
                     "stats": _summary_stats(summary) if summary else stats.summarize(values),
                     "baseline": None, "comparison": None}
            bid = baseline_id(vid) if vid in variants else None
            if summary and bid and bid != vid and (key, bid) in summaries:
                from .summary import compare_summary

                entry["baseline"] = bid
                entry["comparison"] = compare_summary(summaries[(key, bid)], summary, higher_is_better=hib,
                                                      margin=study["margin"])
            elif bid and bid != vid and bid in groups[key]:
                base = groups[key][bid]
                entry["baseline"] = bid
                # one value in every run of both (a count, a hint's 0 or 1): no ratio can say "equal" for 0
                entry["same_as_baseline"] = bool(values) and bool(base) and len(set(values) | set(base.values())) == 1
                if looks:  # a planned study: its looks (one for fixed repetitions), study/plan/sequential.py
                    entry["comparison"] = sequential.decide(base, byblock, looks, alpha, study["margin"], hib,
                                                            n_boot=n_boot, final=final)
                else:
                    pairs = [(base[b], byblock[b]) for b in byblock if b in base]
                    entry["comparison"] = stats.compare(list(base.values()), values, higher_is_better=hib,
                                                        margin=study["margin"],
                                                        pairs=pairs if len(pairs) >= 2 else None, n_boot=n_boot)
            points.append(entry)

    counts = defaultdict(int)
    failures, skipped = [], {}
    for r in runs:
        counts[r["status"]] += 1
        if r["status"] in ("failed", "timeout", "hung"):  # hung: its processes' state is the tail's end
            failures.append({"run_key": r["run_key"], "variant": r["variant"], "benchmark": r["benchmark"],
                             "status": r["status"], "exit_status": r["exit_status"],
                             "stderr_tail": (r["stderr_tail"] or "")[-500:],
                             "why": failure_line(r["stderr_tail"], STDERR_TAIL)})  # from all of it: the cause comes first
        elif r["status"] == "skipped":  # one entry per stop (a benchmark's, or one cell's): one reason
            why = _first_line(r["stderr_tail"])
            entry = skipped.setdefault((r["benchmark"], why), {"benchmark": r["benchmark"], "runs": 0, "why": why})
            entry["runs"] += 1
    out = {
        "study": {"name": study["name"], "seed": study["seed"], "margin": study["margin"],
                  "created": study["created"], "nearmetal_version": study["nearmetal_version"],
                  "config_toml": study["config_toml"], "baseline": baseline_sel,
                  "description": decided.description if decided else ""},
        "variants": [{"id": vid, **variants[vid], "baseline": baseline_id(vid)} for vid in sorted(variants)],
        "points": points,
        "runs": {"total": len(runs), "by_status": dict(counts), "failures": failures,
                 "skipped": list(skipped.values())},
        "sequential": {"adaptive": bool(decided is not None and decided.adaptive), "looks": looks,
                       "alpha": sequential.ALPHA, "alpha_per_look": alpha,
                       # the level of the points' intervals: decide()'s 1 - 2 alpha per look, compare()'s 95%
                       "ci_level": sequential.level_of(alpha) if looks else 1 - sequential.ALPHA,
                       "blocks": blocks,
                       # the final look, where a difference shown is decided (at the rest of alpha
                       # where the time ran out: its own level, that of the points it decided)
                       "final": {"blocks": final[0], "alpha": final[1], "ci_level": sequential.level_of(final[1]),
                                 "reason": final[2]} if final else None},
        # the contexts of the runs analysed (not those of runs a later stage added)
        "environment": [json.loads(c[0]) for c in store.contexts(study["id"], context_ids=None if kept is None else
                                                                 {r["context_id"] for r in runs})],
        # which metrics are answered, decided at plan time (analysis/quantities.py)
        "metric_plan": decided.metrics if decided is not None else {},
    }
    from ..study.execute.contention import summary as contention_summary

    if load_rows:  # how busy the machine was (stores of schema 3; the local scheduler)
        later = set(later_variants)
        own = [r for r in load_rows if r["variant"] not in later]
        out["contention"] = contention_summary(own or load_rows, excluded=exclude_disturbed)
    from ..study.execute import machine_check

    checked = machine_check.summary(machine_check.load(store, study["id"]))
    if checked:  # the machine was busy at the start, or the study stopped before its budget (study/execute/machine_check.py)
        out["machine_check"] = checked
    from ..io.analysis import analyze as analyze_io

    io = analyze_io(points, study["config_toml"], margin=study["margin"])
    if io is not None:  # only studies with nm-iobench benchmarks: the I/O configurations compared
        out["io"] = io
    from ..study.config.traced import listing

    traces = listing(store.path, study["name"])
    if traces:  # `trace = true` benchmarks: each run's trace directory (study/config/traced.py)
        out["traces"] = traces
    if not answered:
        return out
    out["answers"] = answers(out)
    if decided is not None and decided.findings:  # [[finding]]: does this study reproduce them? (analysis/findings.py)
        from .findings import evaluate_stored

        out["findings"] = evaluate_stored(out, decided.findings, decided.runtimes)
    return out


def _first_line(text, most=1200):
    """A skipped run's reason: its first line, cut at a word where longer than `most`."""
    line = (text or "").split("\n")[0]
    return line if len(line) <= most else line[:most].rsplit(" ", 1)[0] + " …"


def _summary_stats(s):
    """stats.summarize's keys for an imported summary row (n, mean, std only)."""
    import math

    n, mean, std = s["n"], s["mean"], s["std"]
    return {"n": n, "min": None, "median": mean, "mean": mean, "std": std, "sem": std / math.sqrt(n) if n else None,
            "p5": None, "p95": None, "mad": None, "cv": std / mean if mean else None, "outliers": [],
            "from_summary": True}


def _sort_key(key):
    bench, kernel, metric, point_json, ranks, threads = key
    point = json.loads(point_json)
    size = point.get("size", 0)
    return (bench, metric, ranks, threads, size if isinstance(size, (int, float)) else 0, point_json)
