"""The "Why" section of every report (analysis["why"], docs/explain.md "Reading the Why
section"): per slower answer, its cause, the evidence, the share of the gap its fix recovered
and the fix itself; per answer left undecided by launches that fall into modes, whether the
baseline has the same modes. Computed here from the analysis, the evidence in the store and
what `nearmetal explain` stored (its candidates and ablation variants); the report renders it."""

import json

from . import ablation as ab
from .candidates import identical, rank, slower_answers
from .evidence import gather
from .share import recovered_share

PLAN_KEY = "explain of study {}"
RECOVERS = 0.5   # a tested cause that recovers at least this share of the gap explains it
SOME_SLOW = 0.1  # a baseline with this share of slow launches has the groups too (one outlier is not a group)


def stored_plan(store, study_id):
    text = store.meta(PLAN_KEY.format(study_id))
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def analyses(store, study_name, study_id, n_boot=2000):
    """(the study's own analysis, the one the Why section's shares read). explain's blocks and
    ablation variants are left out of the first, so the study's answers, tables and counts are
    the same whatever explain ran; the second has every block, where each ablation ran beside
    its slow variant and baseline (the same dict where explain ran nothing)."""
    from ..analysis.analyze import analyze
    from ..study.plan.sequential import closed_at

    ablations = (stored_plan(store, study_id) or {}).get("ablations") or []
    first = closed_at(store, study_id)
    if first is None:  # explained before the study was closed at explain's first block (close())
        first = first_block(store, study_id, set(ablations))
    own = analyze(store, study_name, n_boot, later_variants=ablations, before_block=first)
    if first is None:
        return own, own
    return own, analyze(store, study_name, n_boot, later_variants=ablations, answered=False)


def first_block(store, study_id, ablations):
    """The first block explain added (every one of its blocks runs the ablations), or None."""
    blocks = [r["block"] for r in store.runs(study_id) if r["variant"] in ablations and r["block"] >= 0]
    return min(blocks) if blocks else None


def gap_quantities(analysis, vid):
    """{(benchmark, metric, ranks, threads)} whose gap an ablation must recover: the quantities
    the answer states. Per benchmark, its slower primary quantities where any is slower, else its
    slower ones (a benchmark's other metrics, such as a container's CPU time to main beside the
    time to after MPI_Init, are answers of their own and are not averaged in); when none is
    slower (an overall answer only), the primary ones whatever their verdict. ranks and threads
    are None where the benchmark ran at one placement. Empty: no answer per quantity."""
    mine = [e for e in (analysis.get("answers") or {}).get("by_benchmark") or []
            if e.get("variant") == vid and e.get("metric")]
    slower = [e for e in mine if e.get("verdict") == "slower"]
    chosen = []
    for bench in sorted({e["benchmark"] for e in slower}):
        here = [e for e in slower if e["benchmark"] == bench]
        chosen += [e for e in here if e.get("primary")] or here
    return {(e["benchmark"], e["metric"], e.get("ranks"), e.get("threads"))
            for e in chosen or [e for e in mine if e.get("primary")]}


def _stated(quantities, p):
    """Whether an analysis point belongs to one of the quantities (None: any placement)."""
    return any(b == p.get("benchmark") and m == p.get("metric") and r in (None, p.get("ranks"))
               and t in (None, p.get("threads")) for b, m, r, t in quantities)


def _series(analysis, vid, benches, quantities=None):
    """{(benchmark, metric, point json, ranks, threads): (values by block, hib)} of a variant, on
    `benches` (all when empty) and, when given, `quantities` (gap_quantities) only."""
    out = {}
    for p in analysis.get("points") or []:
        if p.get("variant") != vid or (benches and p.get("benchmark") not in benches):
            continue
        if quantities and not _stated(quantities, p):
            continue
        if isinstance((p.get("point") or {}).get("rank"), int) or str(p.get("unit")).lower() in ("count", "bytes"):
            continue
        key = (p["benchmark"], p["metric"], json.dumps(p.get("point"), sort_keys=True), p.get("ranks"), p.get("threads"))
        out[key] = (dict(zip(map(str, p.get("blocks") or []), p.get("values") or [])), bool(p.get("higher_is_better")))
    return out


def share_of(analysis, slow, base, ablation, benches, quantities=None):
    """The share of the slow variant's gap the ablation recovers, on the answer's own quantities
    (gap_quantities, computed here when not given)."""
    quantities = gap_quantities(analysis, slow) if quantities is None else quantities
    s, b, a = (_series(analysis, v, benches, quantities) for v in (slow, base, ablation))
    points = [{"slow": s[k][0], "base": b[k][0], "ablation": a[k][0], "hib": s[k][1]} for k in s if k in b and k in a]
    return recovered_share(points)


def _pct(x):
    return f"{x * 100:.0f}%"


def _unconfirmed(sh):
    """Why a share of half or more is not a confirmed cause: its interval reaches 0 (or there
    is none yet), so the blocks do not show it recovers anything, however large the estimate."""
    why = ("too few blocks for an interval" if sh.get("low") is None else "its interval reaches 0")
    return (f": {why}, so these blocks do not show that it recovers anything; more blocks would settle it "
            "(explain runs more while its budget and the study's max_repetitions allow)")


def confirmed(share):
    """A tested cause explains the gap: it recovers at least RECOVERS of it, and its interval
    lies above 0 (without an interval nothing is confirmed)."""
    return (share.get("share") is not None and share["share"] >= RECOVERS and share.get("low") is not None
            and share["low"] > 0)


def _beside(sh):
    """The gap in the blocks the share was measured in, beside the study's own figure in the
    head: the two can differ (other blocks, another load), and the share is of this one."""
    vs_base, vs_slow = sh.get("vs_baseline") or {}, sh.get("vs_slow") or {}
    if not vs_base.get("ratio"):
        return ""
    if not vs_slow.get("ratio"):
        return f"; the change ran at ×{vs_base['ratio']:.3g} the baseline's cost"
    return (f", in which the variant ran at ×{vs_base['ratio'] / vs_slow['ratio']:.3g} the baseline's cost and the "
            f"change at ×{vs_base['ratio']:.3g}")


def paragraph(entry):
    """One short paragraph of an explained answer (entry: a `why` answer dict)."""
    name, over, slower_on = entry["name"], entry.get("overhead_pct"), entry.get("slower_on") or []
    if not isinstance(over, (int, float)):
        overall = None
    elif over >= 100:
        overall = f"×{1 + over / 100:.3g}"
    else:
        overall = f"{over:+.0f}%" if abs(over) >= 10 else f"{over:+.1f}%"
    if slower_on:  # name the quantities with their own figures (an overall mean is not any benchmark's)
        more = f" and {len(slower_on) - 3} more" if len(slower_on) > 3 else ""
        head = f"{name} is slower on {'; '.join(slower_on[:3])}{more}"
        if entry.get("verdict") == "slower" and overall and (entry.get("n_answered") or 0) > len(slower_on):
            head += f" (overall {overall})"  # the mean over every answer, the slower ones and the rest
    elif overall:
        head = f"{name} is {overall} slower"
        if entry["benchmarks"]:
            head += f" ({', '.join(entry['benchmarks'][:4])})"
    else:
        head = f"{name} is slower"
    if entry.get("identical"):
        return f"{name}: identical to its baseline — no difference to explain."
    cause, likely = entry.get("cause"), entry.get("likely")
    for found, lead in ((cause, "Cause"), (likely, "Likely cause, not confirmed")):
        if found and found.get("share") and found["share"].get("share") is not None:
            sh = found["share"]
            interval = f" [{_pct(sh['low'])} to {_pct(sh['high'])}]" if sh.get("low") is not None else ""
            doubt = "" if found is cause else _unconfirmed(sh)
            return (f"{head}. {lead}: {found['fact']}. Changing only that ({found['factor']}) recovered "
                    f"{_pct(sh['share'])}{interval} of the gap over {sh['n_blocks']} blocks{_beside(sh)}{doubt}. "
                    f"Fix: {found['fix']}.") + _not_tested(entry, found)
    tested = [c for c in entry["causes"] if c.get("share") and c["share"].get("share") is not None]
    if tested:
        best = tested[0]
        text = (f"{head}. Nothing tested explains the gap: the best candidate, {best['fact']}, recovered "
                f"{_pct(best['share']['share'])} of it.")
    elif any(c.get("ablation_id") for c in entry["causes"]):
        c = next(c for c in entry["causes"] if c.get("ablation_id"))
        if c.get("pending"):
            text = (f"{head}. Likely cause: {c['fact']}; its ablation ({c['ablation_id']}) is not measured yet "
                    f"({c['pending']} of its runs still planned: run `nearmetal explain` again). Fix: {c['fix']}.")
        else:
            text = (f"{head}. Likely cause: {c['fact']}; its ablation ({c['ablation_id']}) gave no values to compare "
                    + (f"(its {c['failed']['runs']} runs failed: {c['failed']['why']})." if c.get("failed") else
                       f"(see the failed runs). Fix: {c['fix']}."))
    elif entry["causes"]:
        c = entry["causes"][0]
        text = (f"{head}. Likely cause: {c['fact']} (not tested yet: `nearmetal explain` runs its ablation). "
                f"Fix: {c['fix']}.") if c.get("ablation") else (
                f"{head}. Likely cause: {c['fact']} (nearmetal cannot change this factor alone). Fix: {c['fix']}.")
    else:
        text = f"{head}. Nothing in the recorded evidence explains the gap."
    text += _not_tested(entry, None, text)
    where = entry.get("where") or []
    if where:
        text += " Where the time went: " + "; ".join(w["fact"] for w in where) + "."
    elif not entry.get("has_profile"):
        text += " No MPI profile was recorded for its runs, so where the time went is not known."
    return text


def _not_tested(entry, chosen, said=""):
    """A test that could not run is said, not dropped: its ablation's runs all failed."""
    return "".join(f" Not tested: {c['fact']}: the {c['failed']['runs']} runs of its ablation ({c['ablation_id']}) "
                   f"failed ({c['failed']['why']})." for c in entry["causes"]
                   if c.get("failed") and c is not chosen and c["fact"] not in said)


def cpus_by_mode(values, blocks, run_of_block, ranks_of, found, higher_is_better=False):
    """Where the evidence allows: the CPUs the ranks started on in the slow launches against the
    fast ones. values/blocks: one point's launches; run_of_block: {block: run id}; ranks_of: {run
    id: [per-rank dict]}; found: modes.detect's result. A phrase, or None."""
    from collections import Counter

    from ..analysis import modes

    best = len(found["bounds"]) if higher_is_better else 0
    slow, fast = [], []
    for block, mode in zip(blocks, modes.assign(values, found)):
        ranks = ranks_of.get(run_of_block.get(block)) or []
        cpus = tuple(sorted(r.get("cpu_start") for r in ranks if isinstance(r, dict) and r.get("cpu_start") is not None))
        if cpus:
            (slow if mode != best else fast).append(cpus)
    if len(slow) < 2 or not fast:
        return None
    pair, n = Counter(slow).most_common(1)[0]
    share_slow, share_fast = n / len(slow), sum(1 for c in fast if c == pair) / len(fast)
    if share_slow - share_fast < 0.3:
        return None
    shared = " (one CPU shared)" if len(set(pair)) < len(pair) else ""
    return (f"the slow launches had their ranks on CPUs {', '.join(map(str, pair))}{shared} in {share_slow:.0%} of "
            f"cases, the fast ones in {share_fast:.0%}")


def _noise(analysis, store=None, study_id=None):
    """Answers undecided because launches fall into modes: do the baseline's launches too?"""
    from ..analysis import modes

    out = []
    points = {(p.get("variant"), p.get("benchmark"), p.get("metric"), json.dumps(p.get("point"), sort_keys=True)): p
              for p in analysis.get("points") or []}
    for e in (analysis.get("answers") or {}).get("by_benchmark") or []:
        if e.get("verdict") != "inconclusive" or not e.get("modes"):
            continue
        for (vid, bench, metric, pt), p in points.items():
            if vid != e["variant"] or bench != e["benchmark"] or not (p.get("comparison") or {}).get("modes"):
                continue
            base = points.get((e["baseline"], bench, metric, pt))
            both = base is not None and modes.detect(base.get("values") or []) is not None
            sb, sv = e["modes"].get("share_baseline"), e["modes"].get("share_variant")
            more = e["modes"].get("share_differs") and isinstance(sv, (int, float)) and isinstance(sb, (int, float)) \
                and sv > sb
            if both:
                where = "the same modes appear in the baseline's launches: " + (
                    "the machine's, though the variant makes slow launches more common" if more else
                    "a property of the machine, not of the variant")
            elif isinstance(sb, (int, float)) and sb >= SOME_SLOW:  # too few to be found alone, yet there
                both = True
                where = (f"the baseline's launches fall into the same groups ({sb:.0%} slow), so the groups are the "
                         "machine's" + ("; the variant makes slow launches more common" if more else
                                        ", and the shares are not shown to differ: not shown to be the variant's"))
            else:
                where = "the baseline's launches do not fall into these modes: the variant makes them"
            text = f"{e.get('name') or vid}, {e['label']}: {e['modes']['text']}; {where}"
            cpus = _cpus_of(store, study_id, p) if store is not None else None
            if cpus:
                text += f"; {cpus}"
            out.append({"variant": vid, "benchmark": bench, "metric": metric, "machine": both, "text": text + "."})
            break
    return out


def _cpus_of(store, study_id, point):
    """cpus_by_mode for one analysis point of a variant, from the store's runs and per-rank evidence."""
    from ..analysis import modes
    from .evidence import per_rank

    found = modes.detect(point.get("values") or [])
    ranks_of = per_rank(store, study_id) if found else {}
    if not ranks_of:
        return None
    run_of_block = {r["block"]: r["id"] for r in store.runs(study_id)
                    if r["variant"] == point["variant"] and r["benchmark"] == point["benchmark"] and not r["warmup"]
                    and r["ranks"] == point.get("ranks") and r["threads"] == point.get("threads")}
    return cpus_by_mode(point["values"], point.get("blocks") or [], run_of_block, ranks_of, found,
                        bool(point.get("higher_is_better")))


def _ablation_runs(store, study_id, ablations):
    """({ablation id: {"runs": failed runs, "why": the first one's last error line}} for the
    ablations none of whose runs gave a value (an image without the factor's transport),
    {ablation id: its runs still planned} (a spent --budget))."""
    runs = [r for r in store.runs(study_id) if r["variant"] in ablations and not r["warmup"]]
    failed, pending = {}, {}
    for a in ablations:
        mine = [r for r in runs if r["variant"] == a]
        bad = [r for r in mine if r["status"] not in ("ok", "planned")]
        if bad and not any(r["status"] == "ok" for r in mine):
            tail = [line for line in str(bad[0]["stderr_tail"] or "").splitlines() if line.strip()]
            failed[a] = {"runs": len(bad), "why": tail[-1][:200] if tail else bad[0]["status"]}
        if any(r["status"] == "planned" for r in mine):
            pending[a] = sum(r["status"] == "planned" for r in mine)
    return failed, pending


def section(store, study_id, analysis, every_block=None):
    """analysis["why"]: {"tested": bool, "answers": [...], "noise": [...]}. analysis: the
    study's own; every_block: the analysis with explain's blocks too (analyses()), whose
    points the recovered shares are computed from (None: analysis)."""
    plan = stored_plan(store, study_id) or {}
    planned = {a["variant"]: a for a in plan.get("answers") or []}
    ablations = set(plan.get("ablations") or [])
    evidence = None
    vmeta = {v.get("id"): v for v in analysis.get("variants") or []}
    failed, pending = _ablation_runs(store, study_id, ablations)
    answers = []
    for entry, benches in slower_answers(analysis, skip=ablations):
        vid, bid = entry["variant"], entry.get("baseline")
        out = {"variant": vid, "baseline": bid, "name": entry.get("name") or vid, "verdict": entry.get("verdict"),
               "overhead_pct": entry.get("overhead_pct"), "overhead_ci": entry.get("overhead_ci"),
               "benchmarks": benches, "identical": identical(vmeta.get(vid), vmeta.get(bid)), "causes": [],
               "where": [], "has_profile": False,
               "slower_on": [e.get("text") or e.get("label") or e["benchmark"]
                             for e in (analysis.get("answers") or {}).get("by_benchmark") or []
                             if e.get("variant") == vid and e.get("verdict") == "slower"],
               "n_answered": sum(1 for e in (analysis.get("answers") or {}).get("by_benchmark") or []
                                 if e.get("variant") == vid)}
        if not out["identical"]:
            if vid in planned:
                out["causes"], out["where"] = planned[vid]["causes"], planned[vid].get("where", [])
                out["has_profile"] = planned[vid].get("has_profile", False)
            else:
                if evidence is None:
                    evidence = gather(store, study_id, analysis)
                if vid in evidence and bid in evidence:
                    tested, untested, where = rank(evidence[vid], evidence[bid], processes=False)
                    out["causes"] = [c.as_dict() for c in tested + untested]
                    out["where"] = [c.as_dict() for c in where]
                    out["has_profile"] = any(r.get("mpi_profile") for r in evidence[vid].every_rank())
            traced = {t.get("benchmark") for t in analysis.get("traces") or [] if isinstance(t, dict)
                      and t.get("variant") == vid}
            if not traced & set(benches):  # another benchmark's I/O layers say nothing of these answers
                out["where"] = [w for w in out["where"] if w.get("explainer") != "io_layer"]
            stated = gap_quantities(analysis, vid)  # once for all of the variant's causes
            for c in out["causes"]:
                if c.get("ablation_id"):
                    c["share"] = share_of(every_block or analysis, vid, bid, c["ablation_id"], benches, stated)
                    if c["ablation_id"] in failed and (c["share"] or {}).get("share") is None:
                        c["failed"] = failed[c["ablation_id"]]  # {"runs": n, "why": its first error line}
                    elif c["ablation_id"] in pending and (c["share"] or {}).get("share") is None:
                        c["pending"] = pending[c["ablation_id"]]  # its runs a spent budget left planned
            out["causes"].sort(key=lambda c: -((c.get("share") or {}).get("share") or -1e9))
            top = out["causes"][0] if out["causes"] else None
            if top and (top.get("share") or {}).get("share") is not None and top["share"]["share"] >= RECOVERS:
                out["cause" if confirmed(top["share"]) else "likely"] = top
            untested = top is not None and (top.get("share") or {}).get("share") is None
            fixed = (out.get("cause") or out.get("likely")  # never a refuted one, nor one whose runs failed
                     or (top if untested and top.get("ablation") and not top.get("failed") else None))
            if fixed:
                shown = dict(fixed["ablation"])
                if not fixed.get("ablation_id"):  # not planned yet: the name explain would give it
                    shown["name"] = ab.name_for(vid, fixed.get("factor") or "fix")
                out["fix_toml"], out["fix_flags"] = ab.toml_of(shown), ab.run_flags(shown)
        out["text"] = paragraph(out)
        answers.append(out)
    return {"tested": bool(plan), "answers": answers, "noise": _noise(analysis, store, study_id),
            "ablations": sorted(ablations)}

