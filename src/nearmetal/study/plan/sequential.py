"""Adaptive repetitions: look at the data between blocks without inflating false verdicts.

A study without a fixed `repetitions` runs `min_repetitions` randomized blocks, then looks:
every compared point whose verdict is still open keeps its cell (and that cell's baseline)
in the next blocks; decided points stop. The looks happen at a fixed schedule of block
counts (schedule(): about x1.5 each), known before anything runs — only the final one may
fall between two of them, where the time left allowed fewer blocks than the next look's
(runner.extend; its level: final_alpha()). Each look tests at one
nominal level alpha', the same at every look, chosen so that a statistic with no real
difference crosses it at some look with probability alpha overall: Pocock's boundary
(Biometrika 64:191, 1977) for the schedule's own block counts, the looks' statistics taken
as a Gaussian process with independent increments (Jennison & Turnbull 2000, ch. 2-3),
and the crossing probability integrated numerically (Armitage, McPherson & Rowe 1969).
For the quickstart's 7 looks alpha' is 0.875% where Bonferroni's alpha/K was 0.71%:
intervals 3% narrower for the same 5% overall error (BOUNDARY_ALPHA says why 4% of it).
So the chance that a point with no real difference is ever called slower/faster stays
below alpha, and a point exactly at the margin is called equivalent with probability below
alpha too: at each look, equivalence is TOST at alpha' (the 1 - 2 alpha' interval within
the margin), a difference needs the exact rank test at alpha'. A study keeps the level it
was planned with (records.AnalysisSpec.alpha_per_look, stored with it).

A point's verdict is the one of the first look that decides it (using the blocks up to that
look only); undecided points report the last look. Everything is derived from the stored
runs, so `--resume` recomputes exactly the state at which the study stopped.
"""

import functools
import math

from ...analysis import stats

GROWTH = 1.5


def schedule(min_n, max_n):
    """Block counts at which the procedure looks: min_n, then x1.5 (rounded up), max_n last."""
    looks, n = [min_n], min_n
    while n < max_n:
        n = min(max_n, max(n + 1, int(n * GROWTH + 0.999)))
        looks.append(n)
    return looks


def looks_of(study):
    """(looks, alpha per look) of a study section: one look at `repetitions` when fixed."""
    looks = schedule(study.min_repetitions, study.max_repetitions) if study.adaptive else [study.repetitions]
    return looks, alpha_per_look(tuple(looks))


ALPHA = 0.05
# The boundary is computed for 4% of the 5%: the bootstrap intervals are a little too narrow at
# 5-10 blocks. A difference exactly at the margin, 2,000 simulated points a setting
# (bench/sequential_sim.py's noise): called equivalent in 5.35% with the boundary at 5%, 4.75%
# at 4.5%, 4.2% at 4% (Bonferroni's alpha/K: 3.25%).
BOUNDARY_ALPHA = 0.04


@functools.lru_cache(maxsize=32)
def alpha_per_look(looks, alpha=BOUNDARY_ALPHA):
    """Pocock's nominal two-sided level for looks at these block counts: the level at which,
    tested at every look, a null statistic passes at some look with probability alpha (one
    look: ALPHA itself). Rounded down to 4 significant digits: never above the exact value;
    never below Bonferroni's ALPHA / K either."""
    if len(looks) <= 1:
        return ALPHA  # one look: the classic test at 5%
    from scipy.special import ndtri

    # Bisection: the crossing probability falls as c grows; Pocock's c lies between one look's
    # and Bonferroni's (scipy.optimize would add 160 ms of imports to every study's start).
    low, high = ndtri(1 - alpha / 2), ndtri(1 - alpha / (2 * len(looks)))
    while high - low > 1e-5:
        mid = (low + high) / 2
        low, high = (mid, high) if _crossing(mid, looks) > alpha else (low, mid)
    # With few looks Pocock at 4% is stricter than Bonferroni at 5%, the rule before: never less.
    return max(_nominal(high, 2), ALPHA / len(looks))


def _nominal(c, sides):
    """The level of boundary c (two- or one-sided), c raised by 2e-3 for the 201-point grid's
    error (~1e-4) and more, rounded down to 4 significant digits: never above the exact one."""
    from scipy.special import ndtr

    nominal = float(sides * ndtr(-(c + 2e-3)))
    digits = 3 - math.floor(math.log10(nominal))
    return math.floor(nominal * 10 ** digits) / 10 ** digits


def final_alpha(taken, planned, per_look=None, alpha=BOUNDARY_ALPHA):
    """The level of the last of the looks `taken` when the study ends there, before its last
    `planned` look because its time ran out: every earlier look was tested at per_look (the
    level the study was planned with; default Pocock's for the planned looks), and this one at
    the level that makes the looks taken cross as often as the planned looks would have (the
    last one taken may be a shortened look: between two planned ones, ended_looks()). Both
    of the level's uses are matched and the stricter kept: the rank test's two-sided
    boundary, and equivalence's one-sided one (TOST at per_look each side). All looks taken:
    per_look itself."""
    taken, planned = tuple(taken), tuple(planned)
    if not taken or not _first_of(taken, planned):
        raise ValueError(f"looks {taken} are not the first of {planned}")
    per_look = alpha_per_look(planned, alpha) if per_look is None else per_look
    return _final_alpha(taken, planned, per_look, alpha)


def _first_of(taken, planned):
    """The planned looks' first ones, the last of them possibly shortened (fewer blocks)."""
    k = len(taken)
    return k <= len(planned) and taken[:-1] == planned[:k - 1] and \
        (taken[-2] if k > 1 else 0) < taken[-1] <= planned[k - 1]


def ended_looks(looks, blocks):
    """The looks taken by a study that ends after `blocks` blocks: the planned ones before,
    and `blocks` itself — a planned look, or a shortened final one where the time left did
    not allow the next look's blocks (runner.extend)."""
    return tuple(n for n in looks if n < blocks) + (blocks,)


@functools.lru_cache(maxsize=64)
def _final_alpha(taken, planned, per_look, alpha):
    if len(planned) <= 1 or taken == planned:
        return per_look
    from scipy.special import ndtri

    levels = []
    for sides in (2, 1):
        c = float(ndtri(1 - per_look / sides))  # the earlier looks' boundary, as they were tested
        planned_crossing = _crossing(c, planned)
        low, high = 0.0, c  # never stricter than the earlier looks
        while high - low > 1e-5:
            mid = (low + high) / 2
            low, high = (mid, high) if _crossing((c,) * (len(taken) - 1) + (mid,), taken) > planned_crossing \
                else (low, mid)
        levels.append(_nominal(high, sides))
    return max(min(levels), per_look)


def _crossing(c, looks, points=201):
    """P(|Z_k| >= c_k at some look k) for Z_k = S_k / sqrt(n_k), S a sum of independent standard
    normal steps, one per block: the density of Z on (-c_k, c_k) carried from look to look on a
    grid. c: one boundary for every look, or one per look."""
    import numpy as np

    n = np.asarray(looks, float)
    bounds = [c] * len(n) if isinstance(c, (int, float)) else list(c)

    def grid(bound):  # points on (-bound, bound) and their trapezoid-rule weights
        z, h = np.linspace(-bound, bound, points, retstep=True)
        weight = np.full(points, h)
        weight[0] = weight[-1] = h / 2
        return z, weight

    z, weight = grid(bounds[0])
    density = np.exp(-z * z / 2) / math.sqrt(2 * math.pi)
    for k in range(1, len(n)):
        step = math.sqrt(n[k] - n[k - 1])
        z_next, weight_next = grid(bounds[k])
        moved = (z_next[:, None] * math.sqrt(n[k]) - z[None, :] * math.sqrt(n[k - 1])) / step
        kernel = np.sqrt(n[k]) / step * np.exp(-moved ** 2 / 2) / math.sqrt(2 * math.pi)
        density = kernel @ (weight * density)
        z, weight = z_next, weight_next
    return 1 - float(weight @ density)


def level_of(alpha):
    """The level of a look's intervals tested at alpha: 1 - 2 alpha (the two one-sided tests of
    equivalence), at least 50%."""
    return 1 - min(0.5, 2 * alpha)


def blocks_measured(runs):
    """The block count the stored runs reached (warm-up rounds aside)."""
    return max([r["block"] + 1 for r in runs if not r["warmup"]] + [0])


def _block_number(b):
    return b[0] if isinstance(b, tuple) else b


def decide(base, var, looks, alpha, margin, higher_is_better, n_boot=2000, modes=True, final=None):
    """The sequential comparison of one point: base and var map block -> value. Looks past
    the blocks measured are skipped. Returns stats.compare's dict of the deciding look (or
    of the last one), with `look` (blocks used), `alpha` (the level tested), `final` and
    `decided`; None when no look has data of both sides. Where the launches fall into modes
    (modes.py), a look compares by mode instead (mode_compare.decide_look; `modes=False`:
    never). final: (blocks, level, ...) of the look the study ended at (end_of(); for a design
    of one look, that look at its level), None while it may go on. Never implied: the runner
    passes the looks up to the blocks measured, the first of which is not final."""
    from ...analysis.mode_compare import decide_look

    measured = max([_block_number(b) for b in var] + [-1]) + 1
    if final is not None and final[0] not in looks:  # a shortened final look is a look too
        looks = sorted({*looks, final[0]})
    last = None
    for n in looks:
        if n > measured and last is not None:
            break
        b = {k: v for k, v in base.items() if _block_number(k) < n}
        v = {k: x for k, x in var.items() if _block_number(k) < n}
        if not b or not v:
            continue
        pairs = [(b[k], v[k]) for k in v if k in b]
        is_final = final is not None and n == final[0]
        level = final[1] if is_final else alpha
        # Equivalence is two one-sided tests at `level` each: the 1 - 2*level interval inside
        # the margin. A difference needs the exact rank test at `level` (its size bounds the
        # false alarms) and, before the final look, that interval wholly beyond the margin: a
        # difference that may be smaller than the margin is not decided yet, and gets more
        # blocks. At the final look no block can come: a difference shown is decided.
        c = decide_look(list(b.values()), list(v.values()), pairs, alpha=level, margin=margin,
                        higher_is_better=higher_is_better, n_boot=n_boot, final=is_final) if modes else None
        if c is None:
            c = stats.compare(list(b.values()), list(v.values()), higher_is_better=higher_is_better, margin=margin,
                              pairs=pairs if len(pairs) >= 2 else None, n_boot=n_boot, alpha=min(0.5, 2 * level))
            beyond = c["ci_low"] is not None and (c["ci_low"] > 1 + margin or c["ci_high"] < 1 - margin)
            if c["verdict"] in ("slower", "faster") and (c["p_value"] is None or c["p_value"] >= level or
                                                         not (beyond or is_final)):
                c["verdict"] = "inconclusive"
        # own_level: a final look whose level differs from the other looks' (the time ran out): the tables say it
        c.update(look=min(n, measured), alpha=level, ci_level=level_of(level), final=is_final,
                 own_level=is_final and level != alpha, decided=c["verdict"] != "inconclusive")
        last = c
        if c["decided"] or n >= measured:
            break
    return last


END_KEY = "study_end:{}"
END_REASONS = ("decided", "max_repetitions", "max_time", "budget")


def record_end(store, study_id, blocks, reason=None):
    """Kept with the study by the runner at each look: where it ended (blocks, one of
    END_REASONS), or reason None when it goes on (a resumed study's earlier end is void)."""
    import json

    if reason is not None and reason not in END_REASONS:
        raise ValueError(f"unknown end of a study: {reason!r}")
    store.set_meta(END_KEY.format(study_id), json.dumps({"blocks": blocks, "reason": reason}))


def recorded_end(store, study_id):
    """The end the runner recorded ({blocks, reason}; reason None: it goes on), or None."""
    import json

    text = store.meta(END_KEY.format(study_id))
    try:
        end = json.loads(text) if text else None
    except ValueError:
        return None
    return end if isinstance(end, dict) else None


CLOSED_KEY = "study_closed:{}"


def close(store, study_id, at_block):
    """A later stage (explain) adds blocks of its own from at_block on: the study is not
    extended past its own blocks (a resumed study would count those as its own), and its
    analysis stops before them. Kept once: the first block such a stage took."""
    import json

    if closed_at(store, study_id) is None:
        store.set_meta(CLOSED_KEY.format(study_id), json.dumps({"block": int(at_block)}))


def closed_at(store, study_id):
    """The first block a later stage took (close()), or None: the study's blocks are all its own."""
    import json

    text = store.meta(CLOSED_KEY.format(study_id))
    try:
        block = (json.loads(text) or {}).get("block") if text else None
    except (ValueError, AttributeError):
        return None
    return block if isinstance(block, int) and not isinstance(block, bool) else None


def end_of(store, study_id, looks, alpha, blocks):
    """(blocks, level, reason) of the study's final look for decide(), or None while it may go on:
    the runner recorded an end at the block count measured, which is one of the looks, or a
    shortened final look between two of them where the time ran out. The level is alpha
    (Pocock's per look), or final_alpha() where the time ran out first."""
    end = recorded_end(store, study_id)
    if not end or end.get("reason") not in END_REASONS or end.get("blocks") != blocks or not blocks:
        return None
    taken = ended_looks(looks, blocks)
    if not _first_of(taken, tuple(looks)) or (blocks not in looks and end["reason"] != "max_time"):
        return None
    level = final_alpha(taken, tuple(looks), alpha) if end["reason"] == "max_time" else alpha
    return blocks, level, end["reason"]


def open_points(store, study_id, config, blocks_done, alpha=None):
    """The compared points still undecided at the looks up to blocks_done: (point key
    (benchmark, metric, point_json, ranks, threads), (variant's cell key, its baseline's),
    decide()'s result at the last look) each. alpha: the level per look the study was planned
    with (its stored AnalysisSpec; None: this version's)."""
    from collections import defaultdict

    from .plan import baseline_of, cells, variant_id
    from ..records import Cell

    looks, level = looks_of(config.study)
    alpha = level if alpha is None else alpha
    looks = [n for n in looks if n <= blocks_done]
    by_variant = {}
    for c in cells(config):
        by_variant.setdefault(variant_id(c.variant), c.variant)
    groups = defaultdict(lambda: defaultdict(dict))  # point -> variant -> block -> value
    units = {}
    for rec in store.records(study_id):
        key = (rec["benchmark"], rec["metric"], rec["point_json"], rec["ranks"], rec["threads"])
        groups[key][rec["variant"]][rec["block"]] = rec["value"]
        units[key] = rec["unit"]
    out = []
    bench = {b.label: b for b in config.benchmark}
    for key, variants in groups.items():
        label, _, _, ranks, threads = key
        hib = stats.direction_for_unit(units[key])
        for vid, var in variants.items():
            if vid not in by_variant:
                continue
            bid = variant_id(baseline_of(config, by_variant[vid]))
            if bid == vid:
                continue
            result = decide(variants.get(bid, {}), var, looks, alpha, config.study.margin, hib)
            if result is None or not result["decided"]:
                out.append((key, tuple(Cell(bench[label], v, ranks, threads).key
                                       for v in (by_variant[vid], baseline_of(config, by_variant[vid]))), result))
    return out
