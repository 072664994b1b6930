"""From a validated study to the list of runs, in the order they will execute.

Cells are variants (mode x runtime x MPI x image) x benchmarks x placements (ranks x
threads), after zips and exclusions. Warm-up runs come first (not analysed); then each
repetition is one randomized complete block: every cell once, shuffled with the study's
recorded seed, so drift of a noisy machine hits all variants alike and baseline and
variant values can be paired by block.
"""

import itertools
import random

from ...errors import NearmetalError
from ...models import in_container
from ...networks import get as get_network
from ..config import placement
from ..config.ids import CONTAINER_ONLY, OPTIONAL_DIMS, VARIANT_DIMS, image_label, is_set, key_part, mpi_label, variant_id  # noqa: F401
from ..records import Cell, RunSpec

DIMS = VARIANT_DIMS + OPTIONAL_DIMS + ("ranks", "threads") + placement.DIMS
MAX_CELLS = 100_000      # a study this size is a typo: planning it would take minutes and gigabytes
MAX_RUNS = 1_000_000

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


def _dimensions(config, bench):
    """A benchmark's dimensions ({dim: values}) and zips: its own, else the matrix's."""
    m = config.matrix
    dims = {d: getattr(bench, d) or getattr(m, d) for d in DIMS}
    if bench.components:  # a heterogeneous job: its ranks are its components', its nodes theirs (study/config/mpmd.py)
        dims.update(ranks=[bench.total_ranks()], ranks_per_node=None, nodes=[1])
    return placement.dimensions(dims), (bench.zips if bench.zips is not None else m.zips)


def _matrix_variants(config, bench):
    """Whether the matrix's variant dimensions make variants for a benchmark: always without
    [[variant]] entries; with them, only where [matrix] or the benchmark names a variant
    dimension itself (a study of named variants alone need not exclude the defaults)."""
    if not config.variant:
        return True
    dims = set(VARIANT_DIMS + OPTIONAL_DIMS)
    return bool(config.matrix.model_fields_set & dims) or any(getattr(bench, d) for d in dims)


def cells(config, here=True):
    """The study's cells: the whole matrix, less the cells of runtimes not installed here
    when [study] missing_runtimes = "skip", and (here=True) less the cells of GPU benchmarks
    on a machine without a GPU (study/plan/gpu_cells.py; [] when that is all of them).
    here=False: every cell this machine could be asked to run (validation: no discovery)."""
    out = matrix_cells(config)
    if config.study.missing_runtimes == "skip":
        missing = set(missing_runtimes(config, out))
        out = [c for c in out if c.variant.get("runtime") not in missing]
    if not out:
        raise NearmetalError("the study's matrix is empty after exclusions")
    if here:
        from .gpu_cells import left_out

        gone = {c.key for c in left_out(config, out)}
        out = [c for c in out if c.key not in gone]
    return out


def matrix_cells(config):
    """Every cell the matrix and the named variants make, whatever is installed."""
    out = []
    for bench in config.benchmark:
        dims, zips = _dimensions(config, bench)
        seen = set()

        def add(variant, row):
            variant = {**variant, **placement.stored(row)}
            cell = Cell(bench, variant, placement.ranks(row), row["threads"])
            if cell.key not in seen:
                seen.add(cell.key)
                out.append(cell)

        if _matrix_variants(config, bench):
            for row in _expand(dims, zips, config.matrix.exclude):
                variant = {d: row[d] for d in VARIANT_DIMS}
                variant.update({d: row[d] for d in OPTIONAL_DIMS if is_set(row[d])})
                if not in_container(variant["mode"]):  # runtime, image and how it is placed do not apply
                    for d in CONTAINER_ONLY:
                        variant[d] = None
                    variant = {d: v for d, v in variant.items() if d in VARIANT_DIMS or v is not None}
                add(variant, row)
        placements = {d: dims[d] for d in ("ranks", "threads") + placement.DIMS}
        for named in config.variant:
            fields = named.as_dict()
            for row in _expand(placements, zips, []):
                row = {**{d: fields[d] for d in VARIANT_DIMS}, **{d: getattr(named, d) for d in OPTIONAL_DIMS}, **row}
                if not any(all(row.get(k) == v for k, v in ex.items()) for ex in config.matrix.exclude):
                    add(fields, row)
    return out


def missing_runtimes(config, all_cells):
    """{runtime name: number of cells} of the container runtimes the cells use that are not
    installed on this machine."""
    from ... import runtimes

    counts = {}
    for c in all_cells:
        name = c.variant.get("runtime")
        if name and name in runtimes.names() and not runtimes.get(name).path():
            counts[name] = counts.get(name, 0) + 1
    return counts


def baseline_of(config, variant):
    """The variant a variant is compared with: a named baseline variant, or the baseline
    selector's fields with the rest (MPI, and runtime/image where the baseline mode uses
    them) taken from the variant."""
    b = config.baseline
    if b.variant is not None:  # at the variant's own placement
        return {**next(v.as_dict() for v in config.variant if v.name == b.variant), **placement.of(variant)}
    base = {d: variant[d] for d in VARIANT_DIMS}
    base.update(placement.of(variant))
    base.update({d: getattr(b, d) for d in OPTIONAL_DIMS if is_set(getattr(b, d, None))})
    base["mode"] = b.mode
    for dim in ("runtime", "mpi", "image"):
        if getattr(b, dim) is not None:
            base[dim] = getattr(b, dim)
    if not in_container(base["mode"]):
        base["runtime"] = base["image"] = None
    for dim in ("runtime", "image") if in_container(base["mode"]) else ():
        values = list(getattr(config.matrix, dim))  # a native variant lends none: the matrix's one
        base[dim] = base[dim] or (values[0] if len(values) == 1 else None)
    if is_set(variant.get("gpus")) and "gpus" not in base:  # the same GPUs, natively too
        base["gpus"] = variant["gpus"]
    if missing := [d for d in ("runtime", "image") if in_container(base["mode"]) and base[d] is None]:
        raise NearmetalError(f"baseline: mode '{base['mode']}' needs its {' and '.join(missing)}, and variant "
                             f"'{variant_id(variant)}' has none to lend: give [baseline] {' and '.join(missing)}")
    return base


def check_baselines(config, all_cells):
    have = {variant_id(c.variant) for c in all_cells}
    for c in all_cells:
        base = baseline_of(config, c.variant)
        bid = variant_id(base)
        if bid not in have:
            # a named variant launched as the selector asks is known by its name, not by the selector's id
            same = sorted({v.get("name") for v in (x.variant for x in all_cells) if v.get("name")
                           and all(_unset(v.get(k)) == _unset(base.get(k)) for k in (set(v) | set(base)) - {"name"})})
            hint = f"write [baseline] variant = \"{same[0]}\" (the named variant launched so)" if same else \
                "add it, or change [baseline]"
            raise NearmetalError(f"baseline: '{bid}', the baseline of variant '{variant_id(c.variant)}', is not "
                                 f"in the study's matrix: {hint}")


def _unset(value):
    return value if value not in (None, "", [], {}, (), False) else None


def _repeat(labels):
    """(i, j) for the first label i that repeats label j < i, or None."""
    first = {}
    for i, label in enumerate(labels):
        j = first.setdefault(label, i)
        if j != i:
            return i, j
    return None


def check(config):
    """What planning would refuse, found at validation with its key path (a NearmetalError
    'KEY: why'): repeated benchmark names, zipped dimensions of unequal length as a
    benchmark sees them, a study too large to plan, an empty matrix, a missing baseline."""
    names = [v.name for v in config.variant]
    dup = _repeat(names)
    if dup:
        i, j = dup
        raise NearmetalError(f"variant[{i}].name: {names[i]!r} is also the name of variant[{j}]: variant names "
                             f"must be unique")
    if config.baseline.variant is not None and config.baseline.variant not in names:
        raise NearmetalError(f"baseline.variant: no [[variant]] is named {config.baseline.variant!r:.60} "
                             f"(named variants: {', '.join(names) or 'none'})")
    dup = _repeat([b.label for b in config.benchmark])
    if dup:
        i, j = dup
        bench = config.benchmark[i]
        raise NearmetalError(f"benchmark[{i}]{'.name' if bench.name else ''}: {bench.label!r:.60} is also the name "
                             f"of benchmark[{j}]: benchmark names must be unique (give `name =`)")
    total = 0
    for i, bench in enumerate(config.benchmark):
        dims, zips = _dimensions(config, bench)
        where = f"benchmark[{i}].zips" if bench.zips is not None else "matrix.zips"
        for zi, group in enumerate(zips):
            lengths = {d: len(dims[d]) for d in group}
            if len(set(lengths.values())) > 1:
                whose = "" if bench.zips is not None else f" for benchmark[{i}] (give it its own zips)"
                raise NearmetalError(f"{where}[{zi}]: zipped dimensions must have equal lengths, found {lengths}{whose}")
        count = 1
        for values in [dims[g[0]] for g in zips] + [v for d, v in dims.items() if not any(d in g for g in zips)]:
            count *= len(values)
        named = len(config.variant)
        for d in ("ranks", "threads") + placement.DIMS:
            named *= len(dims[d])
        total += count + named
        if total > MAX_CELLS:
            raise NearmetalError(f"benchmark[{i}]: the study has more than {MAX_CELLS} cells (variants x placements); "
                                 f"split it")
    runs = total * (config.study.most_blocks + config.study.warmup)
    if runs > MAX_RUNS:
        raise NearmetalError(f"study.repetitions: {total} cells x ({config.study.most_blocks} repetitions + "
                             f"{config.study.warmup} warm-up) = {runs} runs; at most {MAX_RUNS}")
    try:
        all_cells = cells(config, here=False)
    except NearmetalError as e:
        raise NearmetalError(f"matrix.exclude: {e}") from None
    check_baselines(config, all_cells)
    placement.check(config, all_cells)
    from ... import schedulers

    if not schedulers.get(config.study.scheduler).job_is_child:  # the runs happen elsewhere
        node_side = sorted({d for c in all_cells for d in ("cold", "image_place", "network", "user")
                            if is_set(c.variant.get(d))})
        if node_side:
            raise NearmetalError(f"study.scheduler: {' and '.join(node_side)} act on this machine (its page cache, "
                                 f"its file systems, its namespaces, its accounts), not on the nodes "
                                 f"{config.study.scheduler} runs the job on: "
                                 f"use them where the runs start on this machine (scheduler = \"local\")")
    _check_accounts(config, all_cells)
    if config.finding:
        from .finding_check import check_findings

        check_findings(config)


def _check_accounts(config, all_cells):
    """What a `user` variant cannot be combined with, refused with the key path before any run:
    an isolated network (its emulated nodes are root's namespaces) and the I/O tracer (its
    staging directory is root's)."""
    for c in all_cells:
        if not is_set(c.variant.get("user")):
            continue
        i = config.benchmark.index(c.benchmark)
        if is_set(c.variant.get("network")) and get_network(c.variant["network"]).account_problem():
            raise NearmetalError(f"benchmark[{i}]: variant {variant_id(c.variant)}: user and network "
                                 f"\"{c.variant['network']}\" do not combine (the emulated nodes are root's "
                                 f"namespaces): run one or the other")
        if c.benchmark.trace_layers() is not None:
            raise NearmetalError(f"benchmark[{i}].trace: variant {variant_id(c.variant)} runs as "
                                 f"{c.variant['user']}, and the tracer's files are root's: trace the benchmark "
                                 f"without `user` variants")


def check_kernel_ranks(config):
    """Every rank count a benchmark's cells use must suit its kernel (latency: exactly 2).
    Checked for study files before anything runs, not for every parse: planning tests and
    stored studies may hold cells that would only fail when run."""
    from ...kernels import REGISTRY

    all_cells = cells(config, here=False)
    for i, bench in enumerate(config.benchmark):
        if bench.kernel is None:  # a program: its ranks are its own business
            continue
        spec = REGISTRY[bench.kernel]
        for ranks in sorted({c.ranks for c in all_cells if c.benchmark is bench}):
            if ranks >= spec.min_ranks and not (spec.max_ranks and ranks > spec.max_ranks):
                continue
            need = (f"exactly {spec.min_ranks}" if spec.max_ranks == spec.min_ranks else
                    f"{spec.min_ranks} to {spec.max_ranks}" if spec.max_ranks else f"at least {spec.min_ranks}")
            cell = next(c for c in all_cells if c.benchmark is bench and c.ranks == ranks)
            if cell.variant.get("ranks_per_node"):
                where = "benchmark[{i}].ranks_per_node" if bench.ranks_per_node else "matrix.ranks_per_node"
                raise NearmetalError(f"{where.format(i=i)}: kernel '{bench.kernel}' needs {need} ranks, found {ranks}"
                                     f"{placement.ranks_check(cell)}")
            if bench.ranks:
                where, whose = f"benchmark[{i}].ranks[{bench.ranks.index(ranks)}]", ""
            else:
                where = f"matrix.ranks[{config.matrix.ranks.index(ranks)}]"
                whose = f" (benchmark[{i}] uses the matrix's ranks: give it its own ranks)"
            raise NearmetalError(f"{where}: kernel '{bench.kernel}' needs {need} ranks, found {ranks}{whose}")


def make_plan(config, seed, variants=(), position=0):
    """The study's runs in order: its warm-up rounds, then its first randomized blocks (shuffled
    by the seed). With `variants` (variant dicts, as a stage after the analysis adds them to
    a planned study: study/runner.add_variants), the runs of those variants' cells alone,
    from run position `position` on; their keys are their cells', so planning them again
    adds nothing."""
    all_cells = variant_cells(config, variants) if variants else cells(config)
    if not variants:
        check_baselines(config, all_cells)
    rng = random.Random(seed if not variants else f"{seed}/variants/{position}")
    runs = []
    pos = position
    for w in range(config.study.warmup):
        for cell in all_cells:
            runs.append(RunSpec(cell, -1, pos, w, True))
            pos += 1
    for rep in range(config.study.first_blocks):
        order = list(all_cells)
        if config.study.order == "blocks":
            rng.shuffle(order)
        for cell in order:
            runs.append(RunSpec(cell, rep, pos, rep, False))
            pos += 1
    return runs


def variant_cells(config, variants):
    """The cells of further variants (dicts of variant dimensions, e.g. an explain stage's
    ablations of a planned study): every benchmark at each of its placements."""
    out, seen = [], set()
    for bench in config.benchmark:
        dims, zips = _dimensions(config, bench)
        placements = {d: dims[d] for d in ("ranks", "threads") + placement.DIMS}
        for variant in variants:
            for row in _expand(placements, zips, []):
                cell = Cell(bench, {**variant, **placement.stored(row)}, placement.ranks(row), row["threads"])
                if cell.key not in seen:
                    seen.add(cell.key)
                    out.append(cell)
    return out


def extend_plan(config, seed, blocks, cell_keys, position):
    """Further randomized blocks (adaptive repetitions) of only the cells in cell_keys, from
    run position `position` on. Each block is shuffled by its own seed (the study's and the
    block's number), so the runs added are the same whenever they are planned — a resumed
    study adds exactly what an uninterrupted one would have."""
    chosen = [c for c in cells(config) if c.key in cell_keys]
    runs = []
    for block in blocks:
        order = list(chosen)
        if config.study.order == "blocks":
            random.Random(f"{seed}/block/{block}").shuffle(order)
        for cell in order:
            runs.append(RunSpec(cell, block, position, block, False))
            position += 1
    return runs
