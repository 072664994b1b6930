"""Answers at the level a user asks: per variant x benchmark x quantity (x placement where a
benchmark was measured at several; quantities.py says which metrics are answered, never
averaged together) and per variant overall (over its benchmarks' primary quantities), one
verdict with an interval at the level the points were decided at, and the top-line
sentences every report prints first.

An answer of one point is that point's own paired ratio and interval (stats.compare's, the
table's). Over several points the statistic is the geometric mean, over the points, of the per-point *cost ratio*
(stats.compare's paired ratio, exp of the trimmed mean of the per-block log ratios, for
times; its inverse for higher-is-better metrics: > 1 always means the variant is worse). Its
CI is a paired bootstrap over randomized blocks: one draw of block indices per replicate,
shared by every point (a block's runs share the machine's state), each point's trimmed mean
over the drawn blocks, then the geometric mean.
The verdict follows stats.compare's rules without the rank test. docs/statistics.md
("Answers: one verdict per benchmark and per variant") has the method, its weighting and
what is left out; docs/analysis.md the dict.
"""

import math
from collections import defaultdict

import numpy as np

from .. import kernels
from ..study.records import comparable
from . import rank_floor, stats
from .mode_compare import answer_words, for_answer
from .trimmed import TRIM, exp_interval, trimmed_mean_ci
from .answer_text import (ESTIMATOR_ONE, bench_words, cell_phrase, left_out_words, level_words, sentence,
                          variant_words)
from .per_launch import STARTUP_METRICS, per_launch
from .quantities import choose

N_BOOT = 2000
SEED = 0
ALPHA = 0.05
# units that count things rather than cost time (metadata's files, iobench's bytes and hints)
NON_COST_UNITS = frozenset({"count", "bytes", "byte", "b", "bool", "files", "ranks"})
# a rank-resolved metric counts once, by its aggregate: the first of these it has
AGGREGATE_RANKS = ("total", "max", "mean")
VERDICTS = ("equivalent", "slower", "faster", "inconclusive")
_SLAB = 1 << 21  # elements of one replicates x points x blocks slab of the bootstrap


def answers(analysis, n_boot=N_BOOT, seed=SEED):
    """{"by_benchmark": [...], "by_variant": [...], "headline": [sentence, ...]} and the
    method's parameters, from an analysis dict (docs/analysis.md, "answers"). One answer
    per variant x benchmark x quantity (analysis/quantities.py: different metrics are never
    averaged); a variant's overall answer spans its benchmarks' primary quantities."""
    study = analysis.get("study") or {}
    seq = analysis.get("sequential") or {}
    alpha = seq.get("alpha_per_look")
    alpha = float(alpha) if _num(alpha) and 0 < alpha < 1 else ALPHA
    # The level of the points' own intervals (sequential.decide: 1 - 2 alpha per look, the
    # two one-sided tests of equivalence): one level for points and answers, so an answer of
    # one point is that point's verdict. 95% where the analysis does not say.
    level = seq.get("ci_level")
    ci_alpha = 1 - float(level) if _num(level) and 0 < level < 1 else ALPHA
    lwords = level_words(analysis, 1 - ci_alpha)
    margin = float(study["margin"]) if _num(study.get("margin")) else 0.03
    points = analysis.get("points") or []
    choice = choose(points, analysis.get("metric_plan"))
    terms, left_out = _terms(points, ci_alpha, choice)
    universe = sorted({b for t in terms for b in t["blocks"]}, key=repr)
    col = {b: i for i, b in enumerate(universe)}

    # groups: cells (variant, benchmark, placement or None, metric) and variants (primary metrics)
    split = defaultdict(set)
    answered = defaultdict(set)
    for p in points:
        split[p.get("benchmark")].add((p.get("ranks"), p.get("threads")))
    for t in terms:
        answered[t["benchmark"]].add(t["metric"])
    cells, variants, launches = {}, {}, defaultdict(list)
    for i, t in enumerate(terms):
        pl = (t["ranks"], t["threads"]) if len(split[t["benchmark"]]) > 1 else None
        cells.setdefault((t["variant"], t["benchmark"], pl, t["metric"]), []).append(i)
        launches[(t["variant"], t["benchmark"], pl)].append(i)
    # a variant's overall answer: one quantity per benchmark, its primary one (the first
    # answered one where the primary metric has no compared point, e.g. its runs failed)
    lead = {}
    for t in terms:
        key = (t["variant"], t["benchmark"])
        if t["primary"] or key not in lead:
            lead[key] = t["metric"]
    for i, t in enumerate(terms):
        if lead[(t["variant"], t["benchmark"])] == t["metric"]:
            variants.setdefault(t["variant"], []).append(i)
    groups = list(cells.values()) + list(variants.values())
    est, boot = _bootstrap(terms, col, groups, n_boot, seed)

    def summary(g, members):
        blocks = {b for i in members for b in terms[i]["blocks"]}
        lo = hi = None
        reps = boot[:, g][np.isfinite(boot[:, g])]
        if reps.size and len(blocks) >= 2:
            lo, hi = (float(math.exp(x)) for x in np.quantile(reps, (ci_alpha / 2, 1 - ci_alpha / 2)))
        gm = float(math.exp(est[g]))
        estimator = f"geometric mean of {len(members)} points' paired ratios, block bootstrap"
        verdict = None
        own = _own(terms[members[0]]) if len(members) == 1 and len(blocks) >= 2 else None
        answer_level, words = 1 - ci_alpha, lwords
        if own:  # one point: its own comparison, the numbers and verdict of its table row, at its level
            gm, lo, hi, verdict, estimator = own
            own_level = terms[members[0]]["comparison"].get("ci_level")
            if _num(own_level) and 0 < own_level < 1 and abs(own_level - answer_level) > 1e-9:
                answer_level, words = own_level, level_words(analysis, own_level)  # decided at the final look
        elif len(members) == 1 and len(blocks) >= 2:  # a point without an interval of its own: compare()'s
            t = terms[members[0]]
            cost = (np.log(t["var"]) - np.log(t["base"])) * (-1.0 if t["hib"] else 1.0)
            center, log_lo, log_hi = trimmed_mean_ci(cost, ci_alpha)
            gm, (lo, hi) = float(math.exp(center)), exp_interval(log_lo, log_hi)  # None: past a double's range
            estimator = ESTIMATOR_ONE
        noises = [terms[i]["noise"] for i in members if terms[i]["noise"] is not None]
        out = {"n_points": len(members), "n_blocks": len(blocks), "cost_ratio": gm, "ci_low": lo, "ci_high": hi,
               "overhead_pct": (gm - 1) * 100,
               "overhead_ci": [(lo - 1) * 100, (hi - 1) * 100] if lo is not None else None,
               "noise_pct": float(np.median(noises)) * 100 if noises else None,
               "estimator": estimator, "ci_level": answer_level, "level_words": words,
               "disturbed": sum(terms[i]["disturbed"] for i in members)}
        out["verdict"] = verdict or _verdict(lo, hi, margin, len(blocks))
        one_bench = len({terms[i]["benchmark"] for i in members}) == 1  # a benchmark, or a variant of one
        if one_bench and out["verdict"] == "equivalent" and any(
                (terms[i]["modes"] or {}).get("share_differs") for i in members):
            out["verdict"] = "inconclusive"  # as fast in each mode, not as often slow: the benchmark's phrase says it
        out["resolution_pct"] = resolution(lo, hi, out["verdict"])
        if own and out["verdict"] == "inconclusive":  # a rank test that could not decide at these blocks
            out["rank_test_floor"] = rank_floor.out_of_reach(terms[members[0]]["comparison"])
        return out

    vmeta = {v.get("id"): v for v in analysis.get("variants") or []}
    words = variant_words(analysis, vmeta)
    order = [v for v in [v.get("id") for v in analysis.get("variants") or []] + [t["variant"] for t in terms]
             if v in variants]
    order = list(dict.fromkeys(order))
    by_benchmark = []
    for g, ((vid, bench, pl, metric), members) in enumerate(cells.items()):
        first = terms[members[0]]
        pick = choice.get((bench, metric)) or {}
        entry = {"variant": vid, "name": words.get(vid, vid), "baseline": first["baseline"], "benchmark": bench,
                 "kernel": first["kernel"], "metric": metric, "unit": first["unit"],
                 "primary": lead[(vid, bench)] == metric, "also": list(pick.get("also") or []),
                 "ranks": pl[0] if pl else None, "threads": pl[1] if pl else None,
                 "label": bench_words(bench, first["kernel"], pl,
                                      metric if len(answered[bench]) > 1 or kernels.traits(first["kernel"]).foms else None),
                 **summary(g, members),
                 "per_launch": per_launch([terms[i] for i in launches[(vid, bench, pl)]], metric)
                 if first["metric"] in STARTUP_METRICS else None}
        entry["text"] = cell_phrase(entry, margin)
        modal = sorted((terms[i] for i in members if terms[i]["modes"]), key=lambda t: not t["modes"]["share_differs"])
        entry["modes"] = None if not modal else {  # mode_compare.py: one point's modes in words
            "n_points": len(modal), "share_differs": modal[0]["modes"]["share_differs"],
            "share_baseline": modal[0]["modes"]["share_baseline"], "share_variant": modal[0]["modes"]["share_variant"],
            "text": answer_words(modal[0]["point"], modal[0]["modes"], modal[0]["unit"] or "",
                                 _baseline_words(vmeta.get(first["baseline"])))}
        if entry["modes"] and entry["modes"]["share_differs"] and entry["verdict"] == "inconclusive":
            entry["text"] = (f"{entry['label']}: as fast in each group of launches, but the share of slow launches "
                             f"differs ({entry['modes']['text']})")
        by_benchmark.append(entry)
    by_benchmark.sort(key=lambda e: (order.index(e["variant"]), not e["primary"], e["benchmark"], e["ranks"] or 0,
                                     e["threads"] or 0, str(e["metric"])))
    by_variant, headline = [], []
    for vid in order:
        g = len(cells) + list(variants).index(vid)
        mine = [e for e in by_benchmark if e["variant"] == vid]
        first_screen = [e for e in mine if e["primary"]]
        entry = {"variant": vid, "baseline": terms[variants[vid][0]]["baseline"], "name": words.get(vid, vid),
                 "benchmarks": len({e["benchmark"] for e in mine}), **summary(g, variants[vid]),
                 "left_out": dict(left_out.get(vid, {})),
                 "more": [e["text"] for e in mine if not e["primary"]]}  # the other quantities, after the first screen
        entry["sentence"] = sentence(entry, first_screen, margin)
        modal = [e for e in first_screen if e["modes"]]
        if modal and not modal[0]["modes"]["share_differs"]:  # one line on the launches' modes
            entry["sentence"] += f" On {modal[0]['label']}, {modal[0]['modes']['text']}."
        by_variant.append(entry)
        headline.append(entry["sentence"])
    for vid, why in left_out.items():  # compared variants of which no point could be aggregated
        if vid not in variants:
            n = sum(why.values())
            name = words.get(vid, vid)
            headline.append(f"{name}: none of its {n} compared point{'s' * (n != 1)} could be aggregated "
                            f"({left_out_words(why)}); see the per-point verdicts.")
    not_answered = sorted({(b, m, c["why"], c["quantity"] if c["quantity"] != m else None)
                           for (b, m), c in choice.items() if not c["answered"]}, key=str)
    return {"method": "one answer per quantity: a point's paired ratio (exp of the 20% trimmed mean of the per-block "
                      "log ratios); over several points their geometric mean, paired block bootstrap",
            # the study's levels in general (a final look's own one beside): what tables and the matrix say
            "alpha": alpha, "ci_level": 1 - ci_alpha, "level_words": level_words(analysis), "margin": margin,
            "n_boot": int(n_boot), "seed": seed, "by_benchmark": by_benchmark, "by_variant": by_variant,
            "headline": headline,
            # answered_as: a reciprocal folded into the metric answering for it (None: not answered at all)
            "not_answered": [{"benchmark": b, "metric": m, "why": w, "answered_as": q} for b, m, w, q in not_answered]}


def is_cost(p):
    """Whether a point's metric is a cost to answer: not a count (bytes, files, ranks) and not
    a kernel's unitless check value (CG's residual, a checksum); a program's unitless figure
    of merit is one."""
    unit = str(p.get("unit") or "").strip().casefold()
    if unit in NON_COST_UNITS:
        return False
    return bool(unit) or kernels.traits(p.get("kernel")).foms


def _own(t):
    """(cost ratio, lo, hi, verdict, estimator) of one point from its own comparison (the
    table's row: the look that decided it, at the level of the points), turned into a cost
    (> 1: the variant is worse); None where it has no interval."""
    c = t["comparison"]
    r, lo, hi = c.get("ratio"), c.get("ci_low"), c.get("ci_high")
    if not all(_num(x) and x > 0 for x in (r, lo, hi)) or c.get("verdict") not in VERDICTS:
        return None
    if t["hib"]:
        r, lo, hi = 1 / r, 1 / hi, 1 / lo
    estimator = ("paired ratio within the launches' modes" if c.get("modes") else
                 ESTIMATOR_ONE if c.get("paired") else "ratio of medians (unpaired)")
    return float(r), float(lo), float(hi), c["verdict"], estimator


def _baseline_words(meta):
    return "natively" if (meta or {}).get("mode") == "native" else "in the baseline"


def _num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _bkey(b):
    return tuple(_bkey(x) for x in b) if isinstance(b, (list, tuple)) else b


# ------------------------------------------------------------------ the points aggregated

def _terms(points, ci_alpha=ALPHA, choice=None):
    """One term per compared point of an answered metric (choice: quantities.choose; every
    metric without it): its pairs (baseline and variant value of each block that measured
    both), direction and baseline noise. Returns
    (terms, {variant: {reason: n}}) for the compared points left out."""
    index = {_pkey(p, p.get("variant")): p for p in points}
    aggs = defaultdict(set)  # a rank-resolved metric's aggregate ranks
    for p in points:
        r = (p.get("point") or {}).get("rank")
        if r in AGGREGATE_RANKS:
            aggs[_sibling(p)].add(r)
    terms, left_out = [], defaultdict(lambda: defaultdict(int))
    for p in points:
        c, bid = p.get("comparison"), p.get("baseline")
        if not isinstance(c, dict) or not bid or not is_cost(p):
            continue
        pick = (choice or {}).get((p.get("benchmark"), p.get("metric")), {"answered": True, "primary": True})
        if not pick["answered"]:
            continue  # a reciprocal answered as its pair, or wall time not asked for
        r = (p.get("point") or {}).get("rank")
        have = aggs.get(_sibling(p))
        if have and r != next(a for a in AGGREGATE_RANKS if a in have):
            continue  # per-rank values (and the other aggregates) repeat the aggregate
        vid = p.get("variant")
        base = index.get(_pkey(p, bid))
        if c.get("from_summary") or (p.get("stats") or {}).get("from_summary") or base is None:
            left_out[vid]["summary"] += 1
            continue
        bmap = dict(zip(map(_bkey, _blocks(base)), base.get("values") or []))
        pairs = [(b, bmap[b], v) for b, v in zip(map(_bkey, _blocks(p)), p.get("values") or []) if b in bmap]
        if len(pairs) < 2:
            left_out[vid]["unpaired"] += 1
            continue
        if not all(_num(x) and comparable(x) for _, bv, vv in pairs for x in (bv, vv)):
            left_out[vid]["not_positive"] += 1
            continue
        bv, vv = np.asarray([x for _, x, _ in pairs], float), np.asarray([x for _, _, x in pairs], float)
        modes, raw = None, (bv, vv)  # raw: a launch's own seconds (per_launch), before any rescaling
        if c.get("modes"):  # launches in modes: each set against its own mode, as the point's comparison
            bv, vv, modes = for_answer(bv, vv, c["modes"], p.get("higher_is_better"), ci_alpha)
        noise = (c.get("baseline_noise") or {}).get("cv")
        if not _num(noise):
            noise = float(np.std(bv, ddof=1) / np.mean(bv))
        terms.append({"variant": vid, "baseline": bid, "benchmark": p.get("benchmark"), "kernel": p.get("kernel"),
                      "metric": p.get("metric"), "unit": p.get("unit"), "point": p.get("point") or {},
                      "ranks": p.get("ranks"), "threads": p.get("threads"), "hib": bool(p.get("higher_is_better")),
                      "blocks": [b for b, _, _ in pairs], "base": bv, "var": vv, "raw": raw, "noise": noise,
                      "modes": modes, "primary": bool(pick["primary"]), "comparison": c,
                      "disturbed": int(p.get("disturbed") or 0) + int(base.get("disturbed") or 0)})
    return terms, left_out


def _blocks(p):
    """An entry's blocks; value i in block i where an analysis gives none (synthetic ones)."""
    b = p.get("blocks")
    return b if isinstance(b, list) and len(b) == len(p.get("values") or []) else range(len(p.get("values") or []))


def _pkey(p, variant):
    import json

    return (p.get("benchmark"), p.get("kernel"), p.get("metric"), json.dumps(p.get("point") or {}, sort_keys=True),
            p.get("ranks"), p.get("threads"), variant)


def _sibling(p):
    import json

    rest = {k: v for k, v in (p.get("point") or {}).items() if k != "rank"}
    return (p.get("variant"), p.get("benchmark"), p.get("metric"), json.dumps(rest, sort_keys=True),
            p.get("ranks"), p.get("threads"))


# ------------------------------------------------------------------ the bootstrap

def _bootstrap(terms, col, groups, n_boot, seed):
    """(estimate[g], replicates[n_boot, g]) of the mean log cost ratio of each group (a list
    of term indices). Each replicate draws len(col) blocks with replacement, once for all
    terms; a term's median is then weighted by how often each of its blocks was drawn (a
    replicate that draws none of a term's blocks leaves the term out of that replicate)."""
    nb = len(col)
    g_of = np.zeros((len(terms), len(groups)))
    for g, members in enumerate(groups):
        g_of[members, g] = 1.0
    sums = np.zeros((n_boot + 1, len(groups)))
    cnts = np.zeros((n_boot + 1, len(groups)))
    if terms:
        rng = np.random.default_rng(seed)
        draws = rng.integers(0, nb, size=(n_boot, nb))
        flat = (draws + np.arange(1, n_boot + 1)[:, None] * nb).ravel()
        counts = np.bincount(flat, minlength=(n_boot + 1) * nb).reshape(n_boot + 1, nb).astype(np.int32)
        counts[0] = 1  # row 0: every block once, the point estimate
        counts = np.ascontiguousarray(counts.T)  # blocks x replicates
        by_k = defaultdict(list)
        for i, t in enumerate(terms):
            by_k[len(t["blocks"])].append(i)
        for k, idx in by_k.items():
            step = max(1, _SLAB // ((n_boot + 1) * k))
            for s in range(0, len(idx), step):
                chunk = idx[s:s + step]
                cols = np.asarray([[col[b] for b in terms[i]["blocks"]] for i in chunk])
                log_r = np.log(np.asarray([terms[i]["var"] for i in chunk])) - np.log(
                    np.asarray([terms[i]["base"] for i in chunk]))
                sign = np.asarray([-1.0 if terms[i]["hib"] else 1.0 for i in chunk])
                cost = sign * _trimmed_log_ratios(counts, cols, log_r)  # (replicates, terms)
                ok = np.isfinite(cost)
                sums += np.where(ok, cost, 0.0) @ g_of[chunk]
                cnts += ok @ g_of[chunk]
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = sums / cnts
    return mean[0], mean[1:]


def _trimmed_log_ratios(counts_t, cols, log_r):
    """stats.compare's paired estimate, the TRIM-trimmed mean of each term's per-block log
    ratios (terms x k), with block weights counts_t[cols] (blocks x replicates, gathered to
    k x terms x replicates): a value drawn c times fills c places of the sorted sample, and
    the places outside the trimmed middle are dropped. NaN where a term got no weight."""
    order = np.argsort(log_r, axis=1, kind="stable")
    sd = np.take_along_axis(log_r, order, axis=1)
    cum = counts_t[np.take_along_axis(cols, order, axis=1).T]
    for j in range(1, cum.shape[0]):
        np.add(cum[j - 1], cum[j], out=cum[j])
    tot = cum[-1]
    g = np.floor(TRIM * tot).astype(cum.dtype)  # the places trimmed at each end
    total = np.zeros(tot.shape)
    before = np.zeros_like(tot)
    for j in range(cum.shape[0]):
        kept = np.minimum(cum[j], tot - g) - np.maximum(before, g)
        total += np.maximum(kept, 0) * sd[:, j:j + 1]
        before = cum[j]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (total / (tot - 2 * g)).T  # replicates x terms
    out[(tot == 0).T] = np.nan
    return out


# ------------------------------------------------------------------ verdicts and resolution

def _verdict(lo, hi, margin, n_blocks):
    """stats.compare's rules on the aggregate's CI, without the rank test."""
    if lo is None:
        return "inconclusive"
    if 1 - margin <= lo and hi <= 1 + margin and n_blocks >= stats.MIN_N_EQUIVALENT:
        return "equivalent"
    if lo > 1:
        return "slower"
    if hi < 1:
        return "faster"
    return "inconclusive"


def resolution(lo, hi, verdict):
    """The resolution reached, in percent, from a cost-ratio CI: for equivalent, the
    tightest symmetric bound it supports, max(|lo-1|, |hi-1|); otherwise the CI's half-width
    (hi-lo)/2: how finely the runs resolve a difference. Rounded up (0.1% below 10%, 1%
    above); None without a CI."""
    if lo is None or hi is None:
        return None
    x = max(abs(lo - 1), abs(hi - 1)) if verdict == "equivalent" else (hi - lo) / 2
    return _round_up(x * 100)


def _round_up(pct):
    if pct >= 10:
        return float(math.ceil(pct - 1e-9))
    return math.ceil(pct * 10 - 1e-9) / 10
