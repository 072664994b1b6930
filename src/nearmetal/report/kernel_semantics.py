"""What the report knows about the kernels and their metrics, kept out of the plotting code:
each benchmark's headline metric and point, which kernels communicate rather than compute
(scaling is then read as a ratio to the baseline, not as parallel efficiency), which
results are an all-pairs rank matrix or a phase breakdown, and how phase names classify
into compute, communication and total (docs/reports.md, sections 4, 5 and 7)."""

import json
from collections import defaultdict

from .. import kernels
from . import formatting as F
from . import points as PT


# headline metric of a benchmark: the first of these it has, else its first metric
HEADLINE_METRICS = ("latency", "bandwidth", "triad", "gflops", "total_s", "step_s", "time_s", "wall_s",
                    "wall_to_main", "copy")


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
        k = PT.point_json(p.get("point"))
        if k not in keys:
            keys.append(k)
    if not keys:
        return None
    pts = [json.loads(k) for k in keys]
    sized = [(pt["size"], k) for pt, k in zip(pts, keys) if F.is_num(pt.get("size"))]
    if len(sized) >= 2:
        hib = bool(entries[0].get("higher_is_better"))
        return (max if hib else min)(sized)[1]
    for agg in PT.AGGREGATE_RANKS:
        for pt, k in zip(pts, keys):
            if pt.get("rank") == agg:
                return k
    return keys[0]



# phase names by class (a metric name without its _s suffix)
COMPUTE_WORDS = ("compute", "comp", "work", "stencil", "kernel", "update", "solve", "flop", "local")
COMM_WORDS = ("comm", "halo", "allreduce", "reduce", "mpi", "exchange", "wait", "send", "recv", "bcast", "barrier",
              "alltoall", "allgather", "sync", "neighbor")
TOTAL_WORDS = ("total", "step", "wall", "time", "elapsed", "run", "iter", "loop")


def phase_class(name):
    """'compute', 'comm', 'total' or 'other' for a phase or metric name (suffix _s removed)."""
    n = name.lower().removesuffix("_s")
    if n in TOTAL_WORDS:
        return "total"
    if any(n == w or n.startswith(w) for w in COMPUTE_WORDS):
        return "compute"
    if any(w in n for w in COMM_WORDS):
        return "comm"
    return "other"


def phase_components(entries):
    """{(variant, ranks, threads): {component: median seconds}} and whether components come
    from metric names (*_s) or from a 'phase' point parameter. Rank-resolved points keep
    the aggregate 'mean' (else 'max', 'total'), which is what stacks into a step time."""
    by_metric = [p for p in entries if str(p.get("metric", "")).endswith("_s")]
    use_phase = not by_metric and any("phase" in (p.get("point") or {}) for p in entries)
    rows = by_metric if not use_phase else [p for p in entries if "phase" in (p.get("point") or {})]
    ranks_vals = {(p.get("point") or {}).get("rank") for p in rows}
    keep_rank = None
    if ranks_vals - {None}:
        for agg in ("mean", "max", "total"):
            if agg in ranks_vals:
                keep_rank = agg
                break
        else:
            keep_rank = sorted(ranks_vals - {None}, key=str)[0]
    out = defaultdict(dict)
    for p in rows:
        pt = p.get("point") or {}
        if keep_rank is not None and pt.get("rank") != keep_rank:
            continue
        name = pt["phase"] if use_phase else p["metric"]
        v = PT.median_of(p)
        if v is not None:
            out[(p.get("variant"), p.get("ranks"), p.get("threads"))][str(name)] = v
    return out, keep_rank


def stack_parts(comps):
    """Components to stack and the total (or None): a class-level component ('compute_s',
    'comm_s') that coexists with finer ones of the same class is their subtotal, so the
    finer ones are stacked plus '<class> (other)' = subtotal - their sum (if positive)."""
    total = None
    by_class = defaultdict(dict)
    for name, v in comps.items():
        cls = phase_class(name)
        if cls == "total":
            total = v if total is None else max(total, v)
        else:
            by_class[cls][name] = v
    parts = []
    for cls in ("compute", "comm", "other"):
        items = by_class.get(cls, {})
        sub = [n for n in items if n.lower().removesuffix("_s") in (cls, "communication" if cls == "comm" else cls)]
        finer = {n: v for n, v in items.items() if n not in sub}
        if sub and finer:
            subtotal = items[sub[0]]
            for n in sorted(finer):
                parts.append((cls, n, finer[n]))
            rest = subtotal - sum(finer.values())
            if rest > 1e-12 * max(1.0, subtotal):
                parts.append((cls, f"{cls} (other)", rest))
        else:
            for n in sorted(items):
                parts.append((cls, n, items[n]))
    return parts, total


def is_pairs(entries):
    """An all-pairs rank matrix: a kernel of that shape, or points with a src and a dst rank."""
    return kernels.traits(entries[0].get("kernel")).shape == "pairs" or any(
        "src" in (p.get("point") or {}) and "dst" in (p.get("point") or {}) for p in entries[:50])


def has_phases(entries):
    """A breakdown into phases: a kernel of that shape, or points with a 'phase' parameter."""
    return kernels.traits(entries[0].get("kernel")).shape == "phases" or any(
        "phase" in (p.get("point") or {}) for p in entries[:50])


def scales_by_efficiency(entries):
    """Whether scaling reads as parallel efficiency (compute kernels and other rates) rather
    than as the ratio to the baseline (communication and start-up, where more ranks mean
    more work)."""
    kernel = kernels.traits(entries[0].get("kernel"))  # its KernelSpec says which it is
    return kernel.efficiency or (not kernel.communicates and bool(entries[0].get("higher_is_better")))


def is_io(point):
    """A point of an I/O sweep's kernel: the report gives those their own section."""
    return kernels.traits(point.get("kernel")).shape == "io"


def kernel_shown(kernel):
    """The kernel a table's title names: one of nearmetal's kernels; None for a program's
    benchmark ('command') or imported results ('imported'), which are no kernel."""
    return kernel if kernel and kernels.traits(kernel).program else None
