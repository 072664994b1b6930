"""Does this study reproduce the published findings its file states ([[finding]],
study/config/finding_spec.py)? One verdict per finding, from the study's own points:

- the subject's and the reference's points are paired by block, point by point (same metric,
  point parameters and placement), and summarised as answers.py summarises a variant: the
  trimmed-mean cost ratio of each point, their geometric mean, its interval at the study's
  level and the verdict under the study's margin;
- `reproduced`: for `same`, the interval lies within ±margin (on at least 4 blocks); for `slower`/`faster`, it lies
  wholly on the expected side of 1 and the estimate reaches `at_least` (default: the margin);
- `not reproduced`: for `same`, the interval lies wholly beyond the margin; otherwise it
  shows any difference in the expected direction smaller than `at_least` (none, or the other
  way round);
- `undecided`: the interval allows both (more repetitions, or a quieter machine);
- `not measurable here`: what the finding needs is missing (NEEDS), or one side never ran.
"""

import math

from .answers import answers

NEEDS = {}


def need(name):
    def register(fn):
        NEEDS[name] = fn
        return fn
    return register


def _contexts(analysis):
    return [c for c in analysis.get("environment") or [] if isinstance(c, dict)]


@need("multi-node")
def _multi_node(analysis):
    """A run's context says how many nodes its job had (executor: the scheduler's nodes)."""
    if any(isinstance(c.get("nodes"), int) and c["nodes"] > 1 for c in _contexts(analysis)):
        return None
    return "the runs used one node; the finding concerns communication between nodes"


@need("interconnect")
def _interconnect(analysis):
    """The RDMA devices (/sys/class/infiniband: InfiniBand, Omni-Path, RoCE) the runner's host has."""
    if any(c.get("fabrics") for c in _contexts(analysis)):
        return None
    return "no high-speed interconnect was recorded (shared memory and TCP only)"


@need("setuid")
def _setuid(analysis):
    """A container runtime that ran setuid (Apptainer's context: its setuid starter, no --userns)."""
    if any((c.get("runtime") or {}).get("setuid") for c in _contexts(analysis) if isinstance(c.get("runtime"), dict)):
        return None
    return "no runtime here ran setuid (Apptainer here is built without its setuid starter)"


def evaluate(analysis, config):
    """[{id, statement, ..., verdict, measured, why}] for the study's findings."""
    return evaluate_stored(analysis, [f.model_dump() for f in config.finding], runtimes_of(config))


def evaluate_stored(analysis, findings, runtimes):
    """evaluate() for findings as stored (dicts, records.AnalysisSpec.findings) and the
    container runtime of each matrix variant ({variant id: runtime}: runtimes_of)."""
    from ..study.config.finding_spec import Finding

    why_absent = _absent_runtimes(runtimes)
    return [_one(analysis, Finding.model_validate(f), why_absent) for f in findings]


def runtimes_of(config):
    """{variant id: container runtime} of every variant the matrix makes, installed here or not."""
    from ..study.plan.plan import matrix_cells, variant_id

    return {variant_id(c.variant): c.variant["runtime"] for c in matrix_cells(config) if c.variant.get("runtime")}


def _absent_runtimes(runtimes):
    """{variant id: why it cannot run here} for variants whose container runtime is missing."""
    from .. import runtimes as registry

    missing = {name for name in set(runtimes.values())
               if name in registry.names() and not registry.get(name).path()}
    return {vid: f" (its runtime, {name}, is not installed here)" for vid, name in runtimes.items() if name in missing}


def _one(analysis, f, why_absent):
    out = {"id": f.id, "statement": f.statement, "source": f.source, "paper": f.paper, "expect": f.expect,
           "benchmark": f.benchmark, "variant": f.variant, "measured": None}
    missing = [why for why in (NEEDS[n](analysis) for n in f.needs) if why]
    subject, reference, ref_name = _sides(analysis, f)
    out["reference"] = ref_name
    if not missing and not subject:
        missing.append(_absent(analysis, f, f.variant, f.benchmark, why_absent))
    if not missing and not reference:
        missing.append(f"the reference: {_absent(analysis, f, ref_name, f.baseline_benchmark or f.benchmark, why_absent)}")
    if missing:
        return {**out, "verdict": "not measurable here", "why": "; ".join(missing)}
    sub = {"study": analysis.get("study"), "sequential": analysis.get("sequential"),
           "metric_plan": analysis.get("metric_plan") or {},  # one quantity, as the study's answers
           "variants": [{"id": "subject"}, {"id": "reference"}], "points": subject + reference}
    summary = next(iter(answers(sub)["by_variant"]), None)
    if summary is None or summary.get("ci_low") is None:
        return {**out, "verdict": "undecided", "why": "no pair of runs measured both sides in one block"}
    margin = float((analysis.get("study") or {}).get("margin") or 0.03)
    out["measured"] = {k: summary.get(k) for k in ("cost_ratio", "ci_low", "ci_high", "verdict", "n_points",
                                                   "n_blocks", "level_words")}
    verdict, why = _decide(f, summary, margin)
    return {**out, "verdict": verdict, "why": why}


def _absent(analysis, f, variant, bench, why_absent):
    """Why a side has no points: it never ran here, or the finding's filter matches none."""
    mine = [p for p in analysis.get("points") or [] if p.get("variant") == variant and p.get("benchmark") == bench]
    if not mine:
        return f"{variant} has no {bench} results here{why_absent.get(variant, '')}"
    metrics = sorted({str(p.get("metric")) for p in mine})
    return (f"{variant} has {bench} results, but none with metric {f.metric!r}, {f.where or {}}"
            f"{'' if f.ranks is None else f', {f.ranks} ranks'} (its metrics: {', '.join(metrics)})")


def _decide(f, s, margin):
    """The verdict from the interval itself, at the study's level: a difference counts once
    the interval is wholly on one side, and its size once the estimate reaches `at_least`."""
    r, lo, hi = s["cost_ratio"], s["ci_low"], s["ci_high"]
    at_least = f.at_least if f.at_least is not None else margin
    if max(r, hi) >= 2 or min(r, lo) <= 0.5:  # a factor reads better than +600% (as the answers write it)
        pct = f"×{r:.3g} [×{lo:.3g} to ×{hi:.3g}]"
    else:
        pct = f"{(r - 1) * 100:+.1f}% [{(lo - 1) * 100:+.1f} to {(hi - 1) * 100:+.1f}%]"
    if s.get("level_words"):  # the interval's level, named as every answer names it
        pct = pct[:-1] + f", {s['level_words']}]"
    within = f"±{margin * 100:.0f}%"
    if f.expect == "same":
        if 1 - margin <= lo and hi <= 1 + margin and s.get("verdict") == "equivalent":
            return "reproduced", f"{pct}: equivalent within {within}"
        if lo > 1 + margin or hi < 1 - margin:
            return "not reproduced", f"{pct}: {'slower' if lo > 1 else 'faster'} by more than {within}"
        if 1 - margin <= lo and hi <= 1 + margin:  # inside, but on fewer blocks than equivalence needs
            return "undecided", f"{pct}: within {within} on {s.get('n_blocks')} blocks, too few to show it"
        return "undecided", f"{pct}: neither shown within {within} nor beyond it"
    # slower: cost ratios above 1 + at_least; faster: below 1 / (1 + at_least)
    sign = 1 if f.expect == "slower" else -1
    est, near, far = (math.log(x) * sign for x in (r, lo if sign > 0 else hi, hi if sign > 0 else lo))
    need = math.log1p(at_least)
    size = f"{at_least * 100:.0f}%"
    if near > 0 and est >= need:
        return "reproduced", f"{pct}: {f.expect}"
    if far < 0:
        return "not reproduced", f"{pct}: {'faster' if f.expect == 'slower' else 'slower'}, not {f.expect}"
    if far < need:
        shown = f"{f.expect}, but by less than" if near > 0 else "any difference is smaller than"
        return "not reproduced", f"{pct}: {shown} the {size} the finding needs"
    return "undecided", f"{pct}: not decided (more repetitions, or a quieter machine)"


def _sides(analysis, f):
    """(subject points, reference points, the reference's name), each relabelled so that
    answers() pairs them: the subject as variant "subject" compared with "reference"."""
    points = analysis.get("points") or []
    variants = {v.get("id"): v for v in analysis.get("variants") or []}
    ref_variant = f.variant if f.baseline_benchmark else (f.baseline or (variants.get(f.variant) or {}).get("baseline"))
    ref_bench = f.baseline_benchmark or f.benchmark
    ref_name = f"{f.variant} {ref_bench}" if f.baseline_benchmark else (ref_variant or "no baseline")

    def chosen(p, variant, bench):
        if p.get("variant") != variant or p.get("benchmark") != bench:
            return False
        if f.metric is not None and p.get("metric") != f.metric:
            return False
        if f.ranks is not None and p.get("ranks") != f.ranks:
            return False
        if f.threads is not None and p.get("threads") != f.threads:
            return False
        point = p.get("point") or {}
        return all(str(point.get(k)) == str(v) for k, v in f.where.items())

    kernel = next((p.get("kernel") for p in points if p.get("benchmark") == f.benchmark), None)

    def relabel(p, role):  # one benchmark and kernel name for both sides (cg-portable vs cg pair up)
        return {**p, "variant": role, "benchmark": f.benchmark, "kernel": kernel,
                "baseline": "reference" if role == "subject" else None, "comparison": {} if role == "subject" else None}

    subject = [relabel(p, "subject") for p in points if chosen(p, f.variant, f.benchmark)]
    reference = [relabel(p, "reference") for p in points if ref_variant and chosen(p, ref_variant, ref_bench)]
    if f.baseline_benchmark:  # parameters that name the build (cg-portable's simd = sse2) do not pair
        own = _identity_keys(subject, reference)
        subject, reference = ([{**p, "point": {k: v for k, v in (p.get("point") or {}).items() if k not in own}}
                               for p in side] for side in (subject, reference))
    return subject, reference, ref_name


def _identity_keys(a, b):
    """Point parameters constant on each side and different between them."""
    def constant(side):
        values = {}
        for p in side:
            for k, v in (p.get("point") or {}).items():
                values.setdefault(k, set()).add(str(v))
        return {k: next(iter(v)) for k, v in values.items() if len(v) == 1}
    ca, cb = constant(a), constant(b)
    return {k for k in ca.keys() & cb.keys() if ca[k] != cb[k]}

