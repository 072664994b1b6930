"""The answers in words (analysis/answers.py computes them): variants as a reader names them
('Bind mode on Charliecloud (Open MPI)'), benchmarks ('bandwidth', 'STREAM'), one phrase
per answer and one top-line sentence per variant, as docs/reports.md shows them. Every
number is said one way: the estimator (ESTIMATOR_ONE, or the geometric mean over points),
the interval at the level the points were decided at, named ('98.6% interval (sequential,
9 looks planned)'), and one noise figure (the baseline's coefficient of variation)."""

from .. import kernels, models
from .stats import MIN_N_EQUIVALENT
from .labels import fmt_ratios

ESTIMATOR_ONE = "paired ratio: exp of the 20% trimmed mean of the per-block log ratios"
METRIC_WORDS = {"to_after_init": "to after MPI_Init", "wall_to_main": "to main"}
RUNTIME_WORDS = {"bwrap": "Bubblewrap"}


def level_words(analysis, level=None):
    """The level of the intervals shown, labelled with what set it: '98.6% interval
    (sequential, 9 looks planned)', '90% interval (one look)'; '95% interval' without looks. The
    level is the one planned for that many looks, also where every point was decided sooner (said
    beside). Where the study's time ran out before its last look, its final look has a level of
    its own: said beside (level None: the study's intervals in general), or alone for an interval
    at it."""
    seq = analysis.get("sequential") or {}
    looks, final = seq.get("looks"), seq.get("final") or {}
    study_level = seq.get("ci_level")
    general, level = level is None, study_level if level is None else level
    if not (isinstance(level, (int, float)) and 0 < level < 1):
        return "95% interval"
    s = f"{level * 100:.3g}% interval"
    last = final.get("ci_level")
    own_last = isinstance(last, (int, float)) and isinstance(study_level, (int, float)) and \
        abs(last - study_level) > 1e-9
    ended = f"after {final.get('blocks')} blocks: the time ran out"
    if own_last and abs(level - last) <= 1e-9:
        return s + f" (sequential, the final look, {ended})"
    if isinstance(looks, list) and len(looks) > 1:
        # the final look's number: a shortened one (between two planned looks) counts too
        taken = sum(1 for n in looks if isinstance(n, int) and n < (final.get("blocks") or 0)) + bool(final.get("blocks"))
        beside = f"; {last * 100:.3g}% at the final look, the {_ordinal(taken)}, {ended}" if own_last and \
            general and taken else ""
        if not beside and 0 < taken < len(looks):  # the level is set by the looks planned, not those taken
            if final.get("reason") == "decided":
                beside = f", every point decided by the {_ordinal(taken)} look"
            elif final.get("reason") == "budget":
                beside = (f", stopped at the {_ordinal(taken)} look: its open points could not be decided within "
                          "max_time and max_repetitions")
        return s + f" (sequential, {len(looks)} looks planned{beside})"
    return s + (" (one look)" if looks else "")


def _ordinal(n):
    """'1st', '2nd', '3rd', '11th', '21st': English ordinals (look numbers)."""
    return f"{n}th" if 11 <= n % 100 <= 13 else f"{n}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _pct(x):
    # 9.9999999 is 10%, not 10.0%; rounded as _signed rounds (an interval's end and its 'could be' agree)
    return f"{x:.0f}%" if round(x, 1) >= 10 else f"{x:.1f}%"


def _signed(x, digits):
    return f"{x:+.{digits}f}".replace("-", "−")


def _overhead_words(e):
    """'+12.3% [+8.1 to +15.0%]'; a cost of 2x or more (or half or less) as a factor:
    '×26.9 [×26.6 to ×44.7]'."""
    r, lo, hi = e["cost_ratio"], e["ci_low"], e["ci_high"]
    if r >= 2 or r <= 0.5:
        return f"×{r:.3g}" + (f" [×{lo:.3g} to ×{hi:.3g}]" if lo is not None else "")
    oh, ci = e["overhead_pct"], e["overhead_ci"]
    d = digits(oh, ci)
    s = f"{_signed(oh, d)}%"
    return s + (f" [{_signed(ci[0], d)} to {_signed(ci[1], d)}%]" if ci else "")


def digits(pct, ci=None):
    """Decimals of a percentage: one below 10% or where its CI is narrower than 4 points
    (+10.1% [+9.8 to +10.4%], not +10% [+10 to +10%]), else none (+38% [+30 to +46%])."""
    if round(abs(pct), 1) < 10 or (ci and ci[1] - ci[0] < 4):
        return 1
    return 0


def _noise_words(pct):
    return f"±{pct:.0f}%" if pct >= 10 else f"±{pct:.1f}%"


def noise_words(e):
    """The one noise figure of an answer: the baseline's coefficient of variation (its
    median over the answer's points where there are several)."""
    s = _noise_words(e["noise_pct"])
    return s if e["n_points"] == 1 else s + f" (median over {e['n_points']} points)"


def _ratio_words(e):
    """'cost ratio 1.003 [0.995–1.012], 98.6% interval (sequential, 9 looks planned), 1 point'."""
    n = e["n_points"]
    r, lo, hi = fmt_ratios(e["cost_ratio"], e["ci_low"], e["ci_high"])
    s = f"{'cost ratio' if n == 1 else 'geometric-mean cost ratio'} {r}"
    if e["ci_low"] is not None:
        s += f" [{lo}–{hi}], {e.get('level_words') or '95% interval'}"
    return s + (", 1 point" if n == 1 else f", over {n} points")


def interval_words(e):
    """An answer's interval on the overhead scale: '−1.5% to +3.9%', or as factors where the
    cost is 2x or more (or half or less): '×0.8 to ×2.5'."""
    r, lo, hi = e["cost_ratio"], e["ci_low"], e["ci_high"]
    if lo is None:
        return None
    if r >= 2 or r <= 0.5 or hi >= 2 or lo <= 0.5:
        return f"×{lo:.3g} to ×{hi:.3g}"
    lo_pct, hi_pct = e["overhead_ci"]  # each end at its own precision: '−27% to +0.3%', not '+0%'
    return f"{_signed(lo_pct, digits(lo_pct))}% to {_signed(hi_pct, digits(hi_pct))}%"


def could_be_words(e, margin):
    """An undecided answer against the margin: '−1.5% to +3.9%: could be 3.9% slower or
    1.5% faster; the margin is ±3%'. An interval on one side of 1 left undecided says so
    rather than 'could be': the point's own test did not confirm it at these repetitions
    (a rank test over few launches, one of them far off), or it is not beyond the margin."""
    lo, hi = e["ci_low"], e["ci_high"]
    m = f"the margin is ±{margin * 100:g}%"
    if 1 - margin <= lo and hi <= 1 + margin:  # inside the margin, yet not called equivalent: say why
        n = e.get("n_blocks")
        if n is not None and n < MIN_N_EQUIVALENT:
            return (f"{interval_words(e)}: inside the margin, but {n} repetitions are too few to call it "
                    f"equivalent (it takes at least {MIN_N_EQUIVALENT}); {m}")
        if (e.get("modes") or {}).get("share_differs"):
            return f"{interval_words(e)}: inside the margin, but slow launches are not as frequent (below); {m}"
        return f"{interval_words(e)}: inside the margin, but not decided equivalent at these repetitions; {m}"
    if lo > 1 or hi < 1:
        side = "slower" if lo > 1 else "faster"
        floor = e.get("rank_test_floor")
        if floor:  # no data could have decided it: the test's own floor, not the margin or the noise
            why = (f"its rank test over {floor['blocks']} blocks cannot give a p below {floor['smallest_p']:.3g}, "
                   f"above the level {floor['level']:.3g}" + (
                       f": it takes at least {floor['blocks_needed']} blocks (repetitions, or max_repetitions when "
                       f"adaptive)" if floor["blocks_needed"] else ""))
        elif lo > 1 + margin or hi < 1 - margin:
            why = "its test over these repetitions does not confirm it yet (more repetitions would decide)"
        else:
            why = "not shown to be by more than the margin"
        return f"{interval_words(e)}: {side} throughout this interval, but {why}; the margin is ±{margin * 100:g}%"
    sides = []
    if hi > 1:
        sides.append(f"{_pct((hi - 1) * 100)} slower" if hi < 2 else f"{hi:.3g} times as slow")
    if lo < 1:
        sides.append(f"{_pct((1 - lo) * 100)} faster" if lo > 0.5 else f"{1 / lo:.3g} times as fast")
    return f"{interval_words(e)}: could be {' or '.join(sides)}; the margin is ±{margin * 100:g}%"


def _duration(seconds):
    a = abs(seconds)
    if a >= 1:
        v, u = seconds, "s"
    elif a >= 1e-3:
        v, u = seconds * 1e3, "ms"
    else:
        v, u = seconds * 1e6, "µs"
    return f"{_signed(v, 0 if abs(v) >= 100 else 1 if abs(v) >= 10 else 2)} {u}"


def bench_words(bench, kernel, pl, metric=None):
    """'bandwidth', 'STREAM triad', 'md loop_time (2×1)': a benchmark in words, with the
    metric answered where it has several (or is a program's figure of merit)."""
    word = (kernels.traits(kernel).words or kernel) if bench == kernel else str(bench)
    if metric is not None and metric not in (bench, kernel):
        word += f" {METRIC_WORDS.get(metric, metric)}"
    return f"{word} ({pl[0]}×{pl[1]})" if pl else word


def cell_phrase(e, margin, with_margin=True):
    """One benchmark's answer in a few words, as the headline and the tables use it
    (`with_margin=False`: an undecided one without '; the margin is ...', said once after
    several)."""
    v, label = e["verdict"], e["label"]
    if v == "equivalent" and measurable(e):
        return f"{label} {_overhead_words(e)}, within the ±{_pct(margin * 100)} margin"
    if v == "equivalent":
        return f"{label}: no measurable cost, within ±{_pct(e['resolution_pct'])}"
    if v in ("slower", "faster"):
        s = f"{label} {_overhead_words(e)}"
        if e.get("per_launch"):
            s = f"{label} {_launch_words(e['per_launch'])} per launch ({_overhead_words(e)}"
            s += f" over its {e['n_points']} points)" if e["n_points"] > 1 else ")"
        return s + (" (faster)" if v == "faster" else "")
    if e["resolution_pct"] is None:
        return f"{label}: too few repetitions to tell ({e['n_blocks']} block{'s' * (e['n_blocks'] != 1)})"
    s = f"{label} undecided, {could_be_words(e, margin)}"
    if not with_margin:
        s = s[:s.rindex("; the margin is")]
    if e["n_blocks"] < 10:  # few repetitions: say so, more of them narrow the interval
        s += f" ({e['n_blocks']} repetitions)"
    if e["noise_pct"] is not None:
        s += f"; the baseline's run-to-run noise there is {noise_words(e)}"
    return s


def _launch_words(pl):
    """'+150 ms', or '+2.35 ms to main, −12.8 ms to after MPI_Init' where both were measured."""
    if pl.get("to_main_s") is None:
        return _duration(pl["delta_s"])
    return f"{_duration(pl['to_main_s'])} to main, {_duration(pl['delta_s'])} to after MPI_Init"


def measurable(e):
    """An answer whose interval excludes 1: a difference shown, however small. Equivalent
    answers say it (a significant +4% inside a 5% margin is not 'no measurable cost')."""
    return e["ci_low"] is not None and (e["ci_low"] > 1 or e["ci_high"] < 1)


def _and(items):
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def left_out_words(why):
    words = {"summary": "imported summary rows without repetitions",
             "unpaired": "fewer than 2 repetitions shared with the baseline", "not_positive": "values ≤ 0 (or past 1e±100)"}
    return ", ".join(f"{n} with {words.get(k, k)}" for k, n in why.items())


def sentence(v, cells, margin):
    """The top-line answer for one variant: its benchmarks' primary quantities (`cells`)."""
    name = v["name"]
    tail = f" ({_ratio_words(v)})"
    if v["left_out"]:
        n = sum(v["left_out"].values())
        tail += f"; {n} compared point{'s' * (n != 1)} not aggregated ({left_out_words(v['left_out'])})"
    if v["verdict"] == "equivalent" and all(c["verdict"] == "equivalent" and not measurable(c) for c in cells):
        if measurable(v):
            return f"{name}: {_overhead_words(v)} overall, within the ±{_pct(margin * 100)} margin{tail}."
        return f"{name}: no measurable cost — equivalent within ±{_pct(v['resolution_pct'])}{tail}."
    if len(cells) == 1:
        return f"{name}: {cells[0]['text']}{tail}."
    parts = _changes(cells, "slower") + _changes(cells, "faster")
    parts += [c["text"] for c in cells if c["verdict"] == "equivalent" and measurable(c)]
    eq = [c for c in cells if c["verdict"] == "equivalent" and not measurable(c)]
    if eq:
        parts.append(f"no measurable cost on {_and(_grouped(eq, cells))}")
    und = [c for c in cells if c["verdict"] == "inconclusive"]
    if len(und) > 1 and all(c["text"] == cell_phrase(c, margin) for c in und):  # the margin said once, after them
        parts += [cell_phrase(c, margin, with_margin=False) for c in und]
        parts[-1] += f"; the margin is ±{margin * 100:g}%"
    else:
        parts += [c["text"] for c in und]
    if v["verdict"] == "equivalent" and measurable(v):
        overall = f"overall {_overhead_words(v)}, within the ±{_pct(margin * 100)} margin"
    elif v["verdict"] == "equivalent":
        overall = f"overall equivalent within ±{_pct(v['resolution_pct'])}"
    elif v["verdict"] in ("slower", "faster"):
        overall = f"overall {_overhead_words(v)}"
    elif v["resolution_pct"] is not None:
        overall = f"overall undecided, {could_be_words(v, margin)}"
    else:
        overall = "overall too few repetitions to tell"
    return f"{name}: " + "; ".join(parts) + f"; {overall}{tail}."


def _changes(cells, verdict):
    """Phrases of the cells with one verdict; a benchmark with that verdict at every one of
    its placements as one phrase with the range of its costs."""
    out, done = [], set()
    for c in cells:
        if c["verdict"] != verdict or c["benchmark"] in done:
            continue
        same = [x for x in cells if x["benchmark"] == c["benchmark"]]
        if len(same) > 1 and all(x["verdict"] == verdict and not x.get("per_launch") for x in same):
            done.add(c["benchmark"])
            ohs = sorted(x["overhead_pct"] for x in same)
            d = digits(ohs[0], [ohs[0], ohs[-1]]) if abs(ohs[0]) < abs(ohs[-1]) else digits(ohs[-1], [ohs[0], ohs[-1]])
            out.append(f"{bench_words(c['benchmark'], c['kernel'], None)} {_signed(ohs[0], d)} to "
                       f"{_signed(ohs[-1], d)}% at all {len(same)} placements"
                       + (" (faster)" if verdict == "faster" else ""))
        else:
            out.append(c["text"])
    return out


def _grouped(eq, cells):
    """Benchmark labels of the equivalent cells, one name for a benchmark equivalent at
    every placement."""
    out, seen = [], set()
    for c in eq:
        b = c["benchmark"]
        if b in seen:
            continue
        same = [x for x in cells if x["benchmark"] == b]
        if c["ranks"] is not None and all(any(x is y for y in eq) for x in same):
            seen.add(b)
            out.append(bench_words(b, c["kernel"], None))
        else:
            out.append(c["label"])
    return out


def _optional_words(d):
    """The variant dimensions that are off unless asked for (study/plan/plan.py OPTIONAL_DIMS)."""
    from ..image import formats
    from ..networks import is_default

    out = []
    if d.get("image_format") in formats.on_host():
        out.append(f"{formats.get(d['image_format']).title} image")
    if d.get("image_place"):
        out.append(f"image copied to {d['image_place']}")
    if d.get("cold"):
        out.append("cold page cache")
    if d.get("audit"):
        out.append("under LD_AUDIT")
    if not is_default(d.get("network")):
        out.append(f"{d['network']} network")
    if d.get("user"):
        out.append(f"as {d['user']}")
    if d.get("gpus"):
        out.append(f"with GPUs {d['gpus'].rstrip(',')}")
    from ..study.config.placement import words

    return out + words(d)


def variant_names(analysis, with_baseline=False):
    """Variant id -> its name in words, the one scheme every answer, finding and summary uses
    (variant_words); `with_baseline`: with ' vs BASELINE' where that is not native."""
    vmeta = {v.get("id"): v for v in analysis.get("variants") or [] if isinstance(v, dict)}
    return variant_words(analysis, vmeta, with_baseline)


def variant_words(analysis, vmeta, with_baseline=True):
    """Variant id -> words: a named variant's name as is; a matrix variant as mode, runtime
    and MPI in words ('Bind mode on Charliecloud (Open MPI)'), with its image where the
    study has several, and its baseline where that is not native with the same MPI."""
    ids = set(vmeta) | {p.get("variant") for p in analysis.get("points") or []}
    dims = {}
    for p in analysis.get("points") or []:
        dims.setdefault(p.get("variant"), p.get("variant_dims") or {})
    for vid, v in vmeta.items():
        dims[vid] = {**dims.get(vid, {}), **v}
    images = {d.get("image") for d in dims.values() if d.get("runtime")}
    out = {}
    for vid in ids:
        d = dims.get(vid) or {}
        if d.get("name") or d.get("mode") not in models.names() or not d.get("mpi"):  # named, or imported
            out[vid] = str(d.get("name") or vid)
            continue
        s = models.MODELS.get(d["mode"]).title or d["mode"]
        if d.get("runtime"):
            s += f" on {RUNTIME_WORDS.get(d['runtime'], str(d['runtime']).capitalize())}"
        bits = [_mpi_title(d.get("mpi"))] if d.get("mpi") else []
        if len(images) > 1 and d.get("image"):
            bits.append(f"image {d['image']}")
        bits += _optional_words(d)
        out[vid] = s + (f" ({', '.join(bits)})" if bits else "")
    for vid in ids if with_baseline else ():
        base = (vmeta.get(vid) or {}).get("baseline")
        bd = dims.get(base) or {}
        if base and base != vid and (bd.get("name") or bd.get("mode") != "native"
                                     or bd.get("mpi") != (dims.get(vid) or {}).get("mpi")):
            out[vid] += f" vs {out.get(base, base)}"
    return out


def _mpi_title(name):
    from .. import families
    from ..errors import NearmetalError

    try:
        return families.get(name).title or str(name)
    except (NearmetalError, ImportError):
        return str(name)
