"""From a validated study to the list of runs, in the order they will execute.

Cells are variants (mode x runtime x MPI x image) x benchmarks x placements (ranks x
threads), after zips and exclusions. Warm-up runs come first (not analysed); then each
repetition is one randomized complete block: every cell once, shuffled with the study's
recorded seed, so drift of a noisy machine hits all variants alike and baseline and
variant values can be paired by block.
"""

import itertools
import random

from ..errors import NearmetalError

VARIANT_DIMS = ("mode", "runtime", "mpi", "image")


def variant_id(v):
    if v["mode"] == "native":
        return f"native/{v['mpi']}"
    return f"{v['mode']}/{v['runtime']}/{v['mpi']}/{v['image']}"


def _expand(dims, zips, exclude):
    """Rows (dicts) of the cross product of `dims` where zipped dimensions vary together."""
    zipped = [tuple(g) for g in zips if all(d in dims for d in g)]
    in_zip = {d for g in zipped for d in g}
    axes = []
    for g in zipped:
        axes.append([dict(zip(g, vals)) for vals in zip(*(dims[d] for d in g))])
    for d, values in dims.items():
        if d not in in_zip:
            axes.append([{d: v} for v in values])
    rows = []
    for combo in itertools.product(*axes):
        row = {}
        for part in combo:
            row.update(part)
        if any(all(row.get(k) == v for k, v in ex.items()) for ex in exclude):
            continue
        rows.append(row)
    return rows


class Cell:
    __slots__ = ("benchmark", "variant", "ranks", "threads", "key")

    def __init__(self, benchmark, variant, ranks, threads):
        self.benchmark, self.variant, self.ranks, self.threads = benchmark, variant, ranks, threads
        self.key = f"{benchmark.label}|n={ranks}|t={threads}|{variant_id(variant)}"


class PlannedRun:
    __slots__ = ("key", "cell", "block", "position", "repetition", "warmup")

    def __init__(self, key, cell, block, position, repetition, warmup):
        self.key, self.cell, self.block, self.position = key, cell, block, position
        self.repetition, self.warmup = repetition, warmup


def cells(config):
    m = config.matrix
    out = []
    for bench in config.benchmark:
        dims = {d: getattr(bench, d) or getattr(m, d) for d in ("mode", "runtime", "mpi", "image", "ranks", "threads")}
        zips = bench.zips if bench.zips is not None else m.zips
        seen = set()
        for row in _expand(dims, zips, m.exclude):
            variant = {d: row[d] for d in VARIANT_DIMS}
            if variant["mode"] == "native":  # runtime and image do not apply
                variant["runtime"] = variant["image"] = None
            cell = Cell(bench, variant, row["ranks"], row["threads"])
            if cell.key not in seen:
                seen.add(cell.key)
                out.append(cell)
    if not out:
        raise NearmetalError("the study's matrix is empty after exclusions")
    return out


def baseline_of(config, variant):
    """The variant a variant is compared with: the baseline selector's fields, the rest
    (MPI, and runtime/image where the baseline mode uses them) taken from the variant."""
    b = config.baseline
    base = dict(variant)
    base["mode"] = b.mode
    for dim in ("runtime", "mpi", "image"):
        if getattr(b, dim) is not None:
            base[dim] = getattr(b, dim)
    if base["mode"] == "native":
        base["runtime"] = base["image"] = None
    return base


def check_baselines(config, all_cells):
    have = {variant_id(c.variant) for c in all_cells}
    for c in all_cells:
        bid = variant_id(baseline_of(config, c.variant))
        if bid not in have:
            raise NearmetalError(f"baseline '{bid}' for variant '{variant_id(c.variant)}' is not in the study's "
                                 f"matrix: add it, or change [baseline]")


def make_plan(config, seed):
    all_cells = cells(config)
    check_baselines(config, all_cells)
    rng = random.Random(seed)
    runs = []
    pos = 0
    for w in range(config.study.warmup):
        for cell in all_cells:
            runs.append(PlannedRun(f"{cell.key}#warmup{w}", cell, -1, pos, w, True))
            pos += 1
    for rep in range(config.study.repetitions):
        order = list(all_cells)
        if config.study.order == "blocks":
            rng.shuffle(order)
        for cell in order:
            runs.append(PlannedRun(f"{cell.key}#rep{rep}", cell, rep, pos, rep, False))
            pos += 1
    return runs
