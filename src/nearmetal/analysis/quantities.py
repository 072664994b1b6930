"""Which metrics get an answer: one answer per quantity, never a mean over different ones.

A benchmark may measure several metrics. Each is answered on its own (analysis/answers.py
never averages different metrics into one ratio), except that
- a rate and its time are one quantity, answered once: a figure of merit declares it
  (`inverse_of = "loop_time"`), or it is detected: two metrics whose product is the same run
  after run (within PRODUCT_TOL relative, while each varies by more than MIN_SPREAD) are
  reciprocals. The answer is given for the benchmark's `primary` metric where it is one of
  them, else for the time (lower is better), else for the metric `inverse_of` names;
- `wall_time` (a program's launch to exit, start-up included) is answered only when the
  benchmark asks for it (`metrics = [...]`) or when it is its only metric.
One answered metric per benchmark is its primary one: the benchmark's `primary`, else a
kernel's usual one (its KernelSpec's primary), else the first figure of merit in the order declared.

plan_of(config) takes what the study file says when the study is planned (stored with it in
records.AnalysisSpec.metrics, so the analysis never reads the file again); choose(points,
plan) decides from the plan and the measured values.
"""

import json
import math
from collections import defaultdict

from .. import kernels
from ..errors import NearmetalError

WALL_TIME = "wall_time"
PRODUCT_TOL = 1e-4   # relative range of a product taken as constant (values printed to 5+ digits)
MIN_SPREAD = 1e-3    # each metric must vary 10x more than that, or any product is "constant"
MIN_RUNS = 3


def plan_of(config):
    """{benchmark label: {"primary", "asked", "inverse", "order"}} of a parsed study file (whose
    validation refused a `primary` or `inverse_of` naming no figure of merit: config.py)."""
    from ..study.config.program import all_foms

    out = {}
    for bench in config.benchmark:
        foms = all_foms(bench) if bench.command is not None else []
        names = [f.name for f in foms]
        inverse = {f.name: f.inverse_of for f in foms if f.inverse_of}
        # a program's own records: its figures of merit, then its wall time (study/config/program.py)
        order = names + [WALL_TIME] if bench.command is not None else []
        out[bench.label] = {"primary": bench.primary,
                            "asked": list(bench.metrics), "inverse": inverse, "order": order}
    return out


def choose(points, plan=None):
    """{(benchmark, metric): {"answered": bool, "quantity": the metric answering for it,
    "primary": bool, "also": [reciprocals folded into it], "why": why it is not answered}}
    for every metric of `points` (analysis dicts' points); `plan` as plan_of gives it (a
    study without one, e.g. imported: every metric but wall_time is answered)."""
    plan = plan or {}
    by_bench = defaultdict(list)
    hib, kernel = {}, {}
    for p in points:
        b, m = p.get("benchmark"), p.get("metric")
        kernel.setdefault(b, p.get("kernel"))
        if m not in by_bench[b]:
            by_bench[b].append(m)
        hib[(b, m)] = bool(p.get("higher_is_better"))
    out = {}
    for bench, metrics in by_bench.items():
        spec = plan.get(bench) or {}
        declared = [m for m in spec.get("order") or [] if m in metrics]
        order = declared + sorted((m for m in metrics if m not in declared), key=str)
        primary = spec.get("primary") or kernels.traits(kernel[bench]).primary
        folded = {}  # metric -> the metric answering for it
        pairs = [(m, of) for m, of in (spec.get("inverse") or {}).items() if m in metrics and of in metrics]
        # detected (a, b), a first in order: kept as (b, a), so that a answers where neither is a time
        pairs += [(b, a) for a, b in reciprocals([p for p in points if p.get("benchmark") == bench], order)
                  if not any({a, b} & set(pr) for pr in pairs)]
        for named_by, named in pairs:
            if named_by in folded or named in folded:
                continue
            keep = (primary if primary in (named_by, named) else
                    next((m for m in (named, named_by) if not hib[(bench, m)]), named))
            folded[named_by if keep == named else named] = keep
        rest = [m for m in order if m not in folded]
        asked = spec.get("asked") or []
        answered = [m for m in rest if m != WALL_TIME or WALL_TIME in asked or len(rest) == 1]
        lead = folded.get(primary, primary) if folded.get(primary, primary) in answered else \
            (answered[0] if answered else None)
        for m in metrics:
            q = folded.get(m, m)
            entry = {"answered": m in answered, "quantity": q, "primary": m == lead,
                     "also": [x for x, k in folded.items() if k == m], "why": None}
            if m in folded:
                entry["why"] = f"the reciprocal of {q}, answered as {q}"
            elif m not in answered:
                entry["why"] = ("launch to exit, start-up included: answered when the benchmark's "
                                "metrics = [...] names it")
            out[(bench, m)] = entry
    return out


def reciprocals(points, order):
    """Pairs (a, b) of one benchmark's metrics, in `order`, whose product is constant run by
    run: every run measuring both (same variant, point, placement and block) gives
    a * b within PRODUCT_TOL of the others, over at least MIN_RUNS runs, while each metric
    itself varies by more than MIN_SPREAD."""
    runs = defaultdict(dict)  # metric -> {(variant, point, ranks, threads, block): value}
    for p in points:
        key = (p.get("variant"), json.dumps(p.get("point") or {}, sort_keys=True), p.get("ranks"), p.get("threads"))
        blocks = p.get("blocks")
        vals = p.get("values") or []
        blocks = blocks if isinstance(blocks, list) and len(blocks) == len(vals) else range(len(vals))
        for b, v in zip(blocks, vals):
            runs[p.get("metric")][key + (json.dumps(b),)] = v
    found = []
    for i, a in enumerate(order):
        for b in order[i + 1:]:
            if a == WALL_TIME or b == WALL_TIME:
                continue
            common = runs[a].keys() & runs[b].keys()
            if len(common) < MIN_RUNS:
                continue
            xa = [runs[a][k] for k in common]
            xb = [runs[b][k] for k in common]
            if not all(_positive(x) for x in xa + xb):
                continue
            prod = [x * y for x, y in zip(xa, xb)]
            if _spread(prod) <= PRODUCT_TOL and min(_spread(xa), _spread(xb)) > MIN_SPREAD:
                found.append((a, b))
    return found


def _positive(x):
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def _spread(xs):
    return max(xs) / min(xs) - 1
