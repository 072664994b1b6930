"""Shared by every report format: number and label formatting, grouping of the analysis
dict's points, the choice of representative points when a table is too long to read, and
the per-variant summary in words.

Everything here reads the analysis dict documented in docs/analysis.md and tolerates
missing fields: a report of a half-finished or imported study must still render.
"""

import json
import math
from collections import OrderedDict, defaultdict

VERDICTS = ("equivalent", "slower", "faster", "inconclusive")
# rank values that aggregate over ranks: preferred where a table or plot shows one point
AGGREGATE_RANKS = ("total", "mean", "max")
# headline metric of a benchmark: the first of these it has, else its first metric
HEADLINE_METRICS = ("latency", "bandwidth", "triad", "gflops", "total_s", "step_s", "time_s", "wall_s",
                    "wall_to_main", "copy")
# representative message sizes, in order of priority (min and max are the smallest and largest measured)
SIZE_PRIORITY = ("min", "max", 8, 1 << 20, 1 << 10, 1 << 16, 64, 1 << 13, 1 << 18, 1 << 4)
TERMINAL_MAX_KEYS = 8
# kernels that measure communication or start-up, not a computation that could scale
COMM_KERNELS = ("latency", "bw", "bibw", "allgather", "alltoall", "allreduce", "bcast", "barrier", "pairs",
                "pingpong", "startup", "metadata", "mpi-info")


# ---------------------------------------------------------------------- formatting

def is_num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def fmt_num(v, digits=3):
    """A measured value, readable: 3 significant digits, thousands separated, no exponent
    between 1e-3 and 1e9."""
    if not is_num(v):
        return "—"
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 1e9 or a < 1e-3:
        return f"{v:.{digits - 1}e}"
    if a >= 10 ** digits:
        return f"{v:,.0f}"
    decimals = max(0, digits - 1 - int(math.floor(math.log10(a))))
    return f"{v:.{decimals}f}"


def fmt_size(n):
    """Bytes in binary units: 8 B, 1 KiB, 64 KiB, 1 MiB, 1.5 MiB."""
    if not is_num(n):
        return str(n)
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= scale:
            q = n / scale
            return f"{q:.0f} {unit}" if q == int(q) else f"{q:.3g} {unit}"
    return f"{n:.0f} B" if n == int(n) else f"{n:g} B"


def fmt_ratio(c):
    """'1.03 [0.99–1.07]' from a comparison; '—' without one."""
    if not c or not is_num(c.get("ratio")):
        return "—"
    r = f"{c['ratio']:.2f}"
    lo, hi = c.get("ci_low"), c.get("ci_high")
    if is_num(lo) and is_num(hi):
        return f"{r} [{lo:.2f}–{hi:.2f}]"
    return r


def fmt_pct(p, signed=True, digits=1):
    if not is_num(p):
        return "—"
    if signed:
        return f"{p:+.{digits}f}%"
    return f"{p:.{digits}f}%"


def fmt_placement(ranks, threads):
    if not ranks and not threads:
        return "—"
    return f"{ranks}×{threads}"


def what(bench, metric):
    """'bw · bandwidth', or just 'latency' where benchmark and metric share the name."""
    return bench if metric == bench else f"{bench} · {metric}"


def placement_words(ranks, threads):
    if not ranks and not threads:
        return ""
    return f"{ranks} rank{'s' if ranks != 1 else ''} × {threads} thread{'s' if threads != 1 else ''}"


def point_label(point):
    """Human label of a point's parameters: '64 KiB', '0→3', 'rank total', 'phase halo'."""
    if not point:
        return "—"
    parts = []
    rest = dict(point)
    if "size" in rest:
        parts.append(fmt_size(rest.pop("size")))
    if "src" in rest and "dst" in rest:
        parts.append(f"{rest.pop('src')}→{rest.pop('dst')}")
    if "rank" in rest:
        parts.append(f"rank {rest.pop('rank')}")
    for k, v in rest.items():
        parts.append(f"{k} {v}")
    return ", ".join(parts)


def unit_label(unit):
    return unit or ""


# ---------------------------------------------------------------------- analysis access

def variants_of(analysis):
    """Variant ids in a stable order: as listed in analysis['variants'], then any that only
    appear in points."""
    out = [v.get("id") for v in analysis.get("variants") or [] if v.get("id")]
    seen = set(out)
    for p in analysis.get("points") or []:
        vid = p.get("variant")
        if vid and vid not in seen:
            seen.add(vid)
            out.append(vid)
    return out


def variant_order(analysis):
    """Variant ids for display: each baseline followed by the variants compared with it,
    then any others. Returns {variant id: position}."""
    ids = variants_of(analysis)
    base_of = baseline_of_variant(analysis)
    bases = baseline_ids(analysis)
    out = []
    for b in ids:
        if base_of.get(b) is None:
            deps = [v for v in ids if base_of.get(v) == b]
            if deps or b in bases:
                out.append(b)
                out += deps
    out += [v for v in ids if v not in out]
    return {v: i for i, v in enumerate(out)}


def baseline_ids(analysis):
    """Variants that are somebody's baseline (or their own)."""
    out = set()
    for v in analysis.get("variants") or []:
        if v.get("baseline"):
            out.add(v["baseline"])
    for p in analysis.get("points") or []:
        if p.get("baseline"):
            out.add(p["baseline"])
    return out


def baseline_of_variant(analysis):
    """variant id -> its baseline id (None for a baseline)."""
    out = {}
    for v in analysis.get("variants") or []:
        b = v.get("baseline")
        out[v.get("id")] = b if b and b != v.get("id") else None
    for p in analysis.get("points") or []:
        if p.get("baseline") and not out.get(p.get("variant")):
            out[p["variant"]] = p["baseline"]
    return out


def short_variant_labels(analysis):
    """Variant ids without the dimensions every containerized variant shares (a runtime or
    image used by all of them): 'hybrid/charliecloud/openmpi/default' -> 'hybrid/openmpi'
    when charliecloud and default are the only runtime and image. Returns (labels, dropped)
    where dropped describes what was left out, e.g. 'runtime charliecloud, image default'."""
    ids = variants_of(analysis)
    parsed = {}
    for vid in ids:
        parts = vid.split("/")
        if len(parts) == 4:
            parsed[vid] = dict(zip(("mode", "runtime", "mpi", "image"), parts))
        elif len(parts) == 2:
            parsed[vid] = {"mode": parts[0], "runtime": None, "mpi": parts[1], "image": None}
        else:
            parsed[vid] = None
    containers = [d for d in parsed.values() if d and d["runtime"] is not None]
    drop = []
    for dim in ("runtime", "image"):
        values = {d[dim] for d in containers}
        if len(values) == 1 and containers:
            drop.append((dim, values.pop()))
    labels = {}
    for vid in ids:
        d = parsed[vid]
        if d is None or d["runtime"] is None:
            labels[vid] = vid
            continue
        keep = [d["mode"]] + [d[k] for k in ("runtime", "mpi", "image") if k not in dict(drop) or k == "mpi"]
        labels[vid] = "/".join(keep)
    if len(set(labels.values())) != len(labels):  # never ambiguous
        return {vid: vid for vid in ids}, ""
    return labels, ", ".join(f"{dim} {val}" for dim, val in drop)


def point_json(point):
    return json.dumps(point or {}, sort_keys=True)


def group_points(points):
    """(benchmark, metric) -> list of entries, in the analysis's order."""
    groups = OrderedDict()
    for p in points:
        groups.setdefault((p.get("benchmark"), p.get("metric")), []).append(p)
    return groups


def kernel_base(kernel):
    return (kernel or "").removesuffix("-portable")


def row_key(p):
    """What identifies a row apart from the variant: point parameters and placement."""
    return (point_json(p.get("point")), p.get("ranks"), p.get("threads"))


def _natural(v):
    return (0, v, "") if is_num(v) else (1, 0, str(v))


def row_sort_key(k):
    """Natural order of row keys: placement, then point parameters with numbers before
    words and numbers by value (216 before 1152; rank 0, 1, ..., then 'total')."""
    pj, r, t = k
    pt = json.loads(pj)
    return (r if is_num(r) else 0, t if is_num(t) else 0, tuple((name, _natural(v)) for name, v in sorted(pt.items())))


def ordered_row_keys(entries):
    return sorted({row_key(p) for p in entries}, key=row_sort_key)


SCALE_PARAMS = ("cores", "nodes", "ranks", "np", "procs", "processes", "tasks")


def scale_param(entries):
    """A point parameter that counts processors ('cores', 'nodes', ...) with 2 or more
    values, for results that give the scale as a parameter rather than as ranks × threads
    (imported studies); None otherwise."""
    if len(placements(entries)) > 1:
        return None
    for name in SCALE_PARAMS:
        vals = {(p.get("point") or {}).get(name) for p in entries}
        if len(vals) >= 2 and all(is_num(v) and v > 0 for v in vals):
            return name
    return None


def placements(entries):
    return sorted({(p.get("ranks"), p.get("threads")) for p in entries}, key=lambda x: (x[0] or 0, x[1] or 0))


def is_size_swept(entries):
    sizes = {p["point"]["size"] for p in entries if isinstance(p.get("point"), dict) and is_num(p["point"].get("size"))}
    return len(sizes) >= 2


def median_of(p):
    s = p.get("stats") or {}
    return s.get("median") if is_num(s.get("median")) else None


def comparison(p):
    c = p.get("comparison")
    return c if isinstance(c, dict) else None


def verdict_of(p):
    c = comparison(p)
    if c is None:
        return None
    v = c.get("verdict")
    return v if v in VERDICTS else "inconclusive"


def overhead_ci(c):
    """The 95% CI of overhead_pct, derived from the ratio's CI with the same mapping that
    turns the ratio into overhead_pct (detected from the comparison itself, so it follows
    stats.compare's definition). None when the comparison has no CI."""
    if not c:
        return None
    r, lo, hi, oh = c.get("ratio"), c.get("ci_low"), c.get("ci_high"), c.get("overhead_pct")
    if not (is_num(r) and is_num(lo) and is_num(hi) and is_num(oh)) or r <= 0 or lo <= 0 or hi <= 0:
        return None
    maps = (lambda x: (x - 1) * 100, lambda x: (1 / x - 1) * 100, lambda x: (1 - x) * 100)
    for f in maps:
        if abs(f(r) - oh) <= 1e-6 * max(1.0, abs(oh)) + 1e-9:
            a, b = f(lo), f(hi)
            return (min(a, b), max(a, b))
    if r != 1:  # unknown mapping: scale the ratio's CI linearly around the estimate
        k = oh / ((r - 1) * 100)
        a, b = oh + (lo - r) * 100 * k, oh + (hi - r) * 100 * k
        return (min(a, b), max(a, b))
    return None


def noise_rel(c):
    """The baseline's noise of a comparison as a fraction: the relative half-width of its
    median's CI where stats.compare gives it, else its coefficient of variation."""
    if not c:
        return None, None
    n = c.get("baseline_noise") or {}
    for key in ("median_ci_halfwidth_rel", "cv", "rel_spread"):
        if is_num(n.get(key)):
            return n[key], key
    return None, None


def noise_text(c):
    v, _ = noise_rel(c)
    return f"±{v * 100:.1f}%" if v is not None else "—"


def noise_by_row(points):
    """row key + baseline id -> the baseline noise (from any comparison against it), so a
    baseline's own row shows the same measure as the rows compared with it."""
    out = {}
    for p in points:
        c = comparison(p)
        if c and p.get("baseline"):
            k = (p.get("benchmark"), p.get("metric")) + row_key(p) + (p["baseline"],)
            if k not in out:
                out[k] = c
    return out


def row_noise(p, noise_index):
    c = comparison(p)
    if c:
        return noise_text(c)
    k = (p.get("benchmark"), p.get("metric")) + row_key(p) + (p.get("variant"),)
    if k in noise_index:
        return noise_text(noise_index[k])
    s = p.get("stats") or {}
    return f"±{s['cv'] * 100:.1f}%" if is_num(s.get("cv")) else "—"


def headline_metric(metrics):
    metrics = list(metrics)
    for m in HEADLINE_METRICS:
        if m in metrics:
            return m
    return metrics[0] if metrics else None


def headline_point(entries):
    """One point's parameters (JSON) to stand for a (benchmark, metric): the smallest size for
    lower-is-better and the largest for higher-is-better size sweeps; an aggregate rank
    ('total', 'mean', 'max') where there is one; else the first point."""
    keys = []
    for p in entries:
        k = point_json(p.get("point"))
        if k not in keys:
            keys.append(k)
    if not keys:
        return None
    pts = [json.loads(k) for k in keys]
    sized = [(pt["size"], k) for pt, k in zip(pts, keys) if is_num(pt.get("size"))]
    if len(sized) >= 2:
        hib = bool(entries[0].get("higher_is_better"))
        return (max if hib else min)(sized)[1]
    for agg in AGGREGATE_RANKS:
        for pt, k in zip(pts, keys):
            if pt.get("rank") == agg:
                return k
    return keys[0]


def representative_sizes(sizes, budget=TERMINAL_MAX_KEYS):
    """At most `budget` of the measured sizes: the smallest and largest, then the measured
    size nearest (in log scale) to 8 B, 1 MiB, 1 KiB, 64 KiB, 64 B, 8 KiB, ..."""
    sizes = sorted(set(sizes))
    if len(sizes) <= budget:
        return sizes
    chosen = []
    for target in SIZE_PRIORITY:
        if len(chosen) >= budget:
            break
        if target == "min":
            s = sizes[0]
        elif target == "max":
            s = sizes[-1]
        else:
            if target < sizes[0] or target > sizes[-1]:
                continue
            s = min(sizes, key=lambda x: abs(math.log2(max(x, 0.5)) - math.log2(target)))
        if s not in chosen:
            chosen.append(s)
    def lg(x):
        return math.log2(max(x, 0.5))

    while len(chosen) < budget:  # fill with the sizes farthest (in log scale) from those chosen
        rest = [x for x in sizes if x not in chosen]
        chosen.append(max(rest, key=lambda x: min(abs(lg(x) - lg(c)) for c in chosen)))
    return sorted(chosen)


def _worst_size(entries, pl):
    """The message size with the largest overhead among 'slower' verdicts at placement pl."""
    worst = None
    for p in entries:
        c = comparison(p)
        if (p.get("ranks"), p.get("threads")) == pl and c and c.get("verdict") == "slower" \
                and is_num(c.get("overhead_pct")) and is_num((p.get("point") or {}).get("size")):
            if worst is None or c["overhead_pct"] > worst[0]:
                worst = (c["overhead_pct"], p["point"]["size"])
    return worst[1] if worst else None


def select_rows(entries, max_keys=TERMINAL_MAX_KEYS):
    """The row keys (see row_key) to show when a table must stay short, and a note saying
    what was left out ('' when nothing was). Size sweeps keep representative sizes plus the
    size with the largest 'slower' overhead, at the smallest and largest placement; other
    tables keep aggregate ranks where they exist, then the points with the largest
    overhead."""
    keys = ordered_row_keys(entries)
    if len(keys) <= max_keys:
        return keys, ""
    total = len(keys)
    notes = []
    if is_size_swept(entries):
        pls = placements(entries)
        if len(pls) > 2:
            pls = [pls[0], pls[-1]]
            notes.append(f"placements {fmt_placement(*pls[0])} and {fmt_placement(*pls[1])} of "
                         f"{len(placements(entries))}")
        per = max(2, max_keys // len(pls))
        out, worst_added = [], False
        for pl in pls:
            sub = [k for k in keys if (k[1], k[2]) == pl]
            sizes = [s for s in (json.loads(k[0]).get("size") for k in sub) if is_num(s)]
            worst = _worst_size(entries, pl)
            keep = representative_sizes(sizes, per)
            if worst is not None and worst not in keep:
                keep = representative_sizes(sizes, per - 1) + [worst]
                worst_added = True
            keep = set(keep)
            out += [k for k in sub if json.loads(k[0]).get("size") in keep or not is_num(json.loads(k[0]).get("size"))]
        nsizes = len({json.loads(k[0]).get("size") for k in out})
        notes.insert(0, f"{nsizes} representative sizes" + (" incl. the slowest" if worst_added else ""))
        return out, f"showing {len(out)} of {total} rows ({', '.join(notes)})"
    # prefer aggregate ranks
    agg = [k for k in keys if json.loads(k[0]).get("rank") in AGGREGATE_RANKS]
    if agg and len(agg) < len(keys):
        keys = agg
        notes.append("aggregate ranks only")
    if len(keys) > max_keys:
        worst = defaultdict(float)
        for p in entries:
            c = comparison(p)
            if c and is_num(c.get("overhead_pct")):
                k = row_key(p)
                worst[k] = max(worst[k], abs(c["overhead_pct"]) + (1000 if c.get("verdict") == "slower" else 0))
        keep = set(sorted(keys, key=lambda k: -worst.get(k, 0))[:max_keys])
        keys = [k for k in keys if k in keep]
        notes.append("largest overheads")
    return keys, f"showing {len(keys)} of {total} rows ({', '.join(notes)})"


# ---------------------------------------------------------------------- summaries in words

def where_label(p, multi_placement):
    bench, metric = p.get("benchmark"), p.get("metric")
    label = point_label(p.get("point"))
    what = bench if metric == bench else f"{bench} {metric}"
    s = what if label == "—" else f"{label} {what}"
    if multi_placement:
        s += f" ({fmt_placement(p.get('ranks'), p.get('threads'))})"
    return s


def variant_summaries(analysis):
    """Per variant: counts of verdicts, the worst slower and best faster point, and a
    sentence. Returns a list of dicts in variant order:
    {variant, baseline, compared, counts: {verdict: n}, worst, best, text}."""
    points = analysis.get("points") or []
    margin = (analysis.get("study") or {}).get("margin")
    multi = defaultdict(set)
    for p in points:
        multi[p.get("benchmark")].add((p.get("ranks"), p.get("threads")))
    by_variant = defaultdict(list)
    for p in points:
        by_variant[p.get("variant")].append(p)
    base_of = baseline_of_variant(analysis)
    bases = baseline_ids(analysis)
    out = []
    order = variant_order(analysis)
    for vid in sorted(variants_of(analysis), key=order.get):
        entries = by_variant.get(vid, [])
        compared = [p for p in entries if comparison(p)]
        counts = {v: 0 for v in VERDICTS}
        worst = best = noisiest = None
        for p in compared:
            c = comparison(p)
            v = verdict_of(p)
            counts[v] += 1
            oh = c.get("overhead_pct")
            if v == "slower" and is_num(oh) and (worst is None or oh > worst[0]):
                worst = (oh, p)
            if v == "faster" and is_num(oh) and (best is None or oh < best[0]):
                best = (oh, p)
            if v == "inconclusive":
                n, _ = noise_rel(c)
                if n is not None and (noisiest is None or n > noisiest[0]):
                    noisiest = (n, p)
        baseline = base_of.get(vid)
        if not compared:
            if vid in bases:
                users = sorted(k for k, b in base_of.items() if b == vid)
                text = f"{vid}: baseline for {', '.join(users)}" if users else \
                    f"{vid}: baseline, no variant compared with it"
                text += f" ({len(entries)} points measured)."
            else:
                text = f"{vid}: no point compared with a baseline ({len(entries)} points measured)."
        else:
            m = margin if is_num(margin) else (comparison(compared[0]) or {}).get("margin")
            mtxt = f" within ±{m * 100:g}%" if is_num(m) else ""
            bname = baseline or (compared[0].get("baseline") or "the baseline")
            parts = [f"equivalent to {bname}{mtxt} at {counts['equivalent']} of {len(compared)} points"]
            if counts["slower"]:
                s = f"slower at {counts['slower']}"
                if worst:
                    s += f" (worst: {fmt_pct(worst[0], digits=0 if abs(worst[0]) >= 10 else 1)} at " \
                         f"{where_label(worst[1], len(multi[worst[1].get('benchmark')]) > 1)})"
                parts.append(s)
            if counts["faster"]:
                s = f"faster at {counts['faster']}"
                if best:
                    s += f" (best: {fmt_pct(best[0], digits=0 if abs(best[0]) >= 10 else 1)} at " \
                         f"{where_label(best[1], len(multi[best[1].get('benchmark')]) > 1)})"
                parts.append(s)
            if counts["inconclusive"]:
                s = f"inconclusive at {counts['inconclusive']}"
                if noisiest:
                    s += f" (noisiest baseline: ±{noisiest[0] * 100:.1f}% at " \
                         f"{where_label(noisiest[1], len(multi[noisiest[1].get('benchmark')]) > 1)})"
                parts.append(s)
            ohs = sorted(c["overhead_pct"] for c in map(comparison, compared) if is_num(c.get("overhead_pct")))
            if ohs and counts["inconclusive"] == len(compared):
                mid = ohs[len(ohs) // 2] if len(ohs) % 2 else (ohs[len(ohs) // 2 - 1] + ohs[len(ohs) // 2]) / 2
                parts.append(f"overhead {fmt_pct(ohs[0])} to {fmt_pct(ohs[-1])} (median {fmt_pct(mid)})")
            text = f"{vid}: " + "; ".join(parts) + "."
        out.append({"variant": vid, "baseline": baseline, "compared": len(compared), "measured": len(entries),
                    "counts": counts, "worst": worst[0] if worst else None, "best": best[0] if best else None,
                    "text": text})
    return out


def failures_summary(analysis):
    """(headline sentence, first failure or None)."""
    runs = analysis.get("runs") or {}
    by = runs.get("by_status") or {}
    fails = runs.get("failures") or []
    total = runs.get("total")
    nfail = sum(by.get(s, 0) for s in ("failed", "timeout")) or len(fails)
    bits = ", ".join(f"{k} {v}" for k, v in sorted(by.items()))
    if not nfail:
        head = f"No failed runs ({total if total is not None else '?'} runs: {bits or 'none recorded'})."
    else:
        head = f"{nfail} of {total if total is not None else '?'} runs failed or timed out ({bits})."
    return head, (fails[0] if fails else None)


def tail_lines(text, n=6):
    lines = (text or "").rstrip().splitlines()
    return "\n".join(lines[-n:])
