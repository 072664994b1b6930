"""Adaptive repetitions: look at the data between blocks without inflating false verdicts.

A study without a fixed `repetitions` runs `min_repetitions` randomized blocks, then looks:
every compared point whose verdict is still open keeps its cell (and that cell's baseline)
in the next blocks; decided points stop. The looks happen at a fixed schedule of block
counts (schedule(): about x1.5 each), known before anything runs. Each look tests at level
alpha / K for K looks — Bonferroni over the looks, the simplest alpha-spending rule
(Lan & DeMets 1983 give the general family; with K fixed in advance Bonferroni bounds the
overall error by the union bound, whatever the correlation between looks). So the chance
that a point with no real difference is ever called slower/faster stays below alpha, and a
point exactly at the margin is called equivalent with probability below alpha too: at
each look, equivalence is TOST at alpha/K (the 1 - 2 alpha/K interval within the margin),
a difference needs the exact rank test at alpha/K.

A point's verdict is the one of the first look that decides it (using the blocks up to that
look only); undecided points report the last look. Everything is derived from the stored
runs, so `--resume` recomputes exactly the state at which the study stopped.
"""

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
    return looks, ALPHA / len(looks)


ALPHA = 0.05


def _block_number(b):
    return b[0] if isinstance(b, tuple) else b


def decide(base, var, looks, alpha, margin, higher_is_better, n_boot=2000, modes=True):
    """The sequential comparison of one point: base and var map block -> value. Looks past
    the blocks measured are skipped. Returns stats.compare's dict of the deciding look (or
    of the last one), with `look` (blocks used), `alpha` (the level tested) and `decided`;
    None when no look has data of both sides. Where the launches fall into modes (modes.py),
    a look compares by mode instead (mode_compare.decide_look; `modes=False`: never)."""
    from ...analysis.mode_compare import decide_look

    measured = max([_block_number(b) for b in var] + [-1]) + 1
    last = None
    for n in looks:
        if n > measured and last is not None:
            break
        b = {k: v for k, v in base.items() if _block_number(k) < n}
        v = {k: x for k, x in var.items() if _block_number(k) < n}
        if not b or not v:
            continue
        pairs = [(b[k], v[k]) for k in v if k in b]
        # Equivalence is two one-sided tests at `alpha` each: the 1 - 2*alpha interval inside
        # the margin. A difference needs the exact rank test at `alpha` (its size bounds the
        # false alarms) and that interval wholly beyond the margin: a difference that may be
        # smaller than the margin is not decided yet, and gets more blocks.
        c = decide_look(list(b.values()), list(v.values()), pairs, alpha=alpha, margin=margin,
                        higher_is_better=higher_is_better, n_boot=n_boot) if modes else None
        if c is None:
            c = stats.compare(list(b.values()), list(v.values()), higher_is_better=higher_is_better, margin=margin,
                              pairs=pairs if len(pairs) >= 2 else None, n_boot=n_boot, alpha=min(0.5, 2 * alpha))
            beyond = c["ci_low"] is not None and (c["ci_low"] > 1 + margin or c["ci_high"] < 1 - margin)
            if c["verdict"] in ("slower", "faster") and (c["p_value"] is None or c["p_value"] >= alpha or not beyond):
                c["verdict"] = "inconclusive"
        c.update(look=min(n, measured), alpha=alpha, ci_level=1 - min(0.5, 2 * alpha),
                 decided=c["verdict"] != "inconclusive")
        last = c
        if c["decided"] or n >= measured:
            break
    return last


def open_cells(store, study_id, config, blocks_done):
    """Cell keys (as planned: benchmark|n=|t=|variant) with a compared point still undecided
    at the looks up to blocks_done, and the cells they are compared with. A cell whose runs
    all failed has no point: more blocks would not decide it, so it is not reopened."""
    opened = set()
    for _, cell_keys, _ in open_points(store, study_id, config, blocks_done):
        opened.update(cell_keys)
    return opened


def open_points(store, study_id, config, blocks_done):
    """The compared points still undecided at the looks up to blocks_done: (point key
    (benchmark, metric, point_json, ranks, threads), (variant's cell key, its baseline's),
    decide()'s result at the last look) each."""
    from collections import defaultdict

    from .plan import baseline_of, cells, variant_id
    from ..records import Cell

    looks, alpha = looks_of(config.study)
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
