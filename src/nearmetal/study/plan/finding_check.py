"""A study's `[[finding]]` entries (config/finding_spec.py) checked against what the study
plans: the benchmarks they name exist, the variants they name are among its matrix's cells,
and no finding compares a variant with itself. Planning, not validation: it needs the cells."""

from ...errors import NearmetalError
from .plan import baseline_of, matrix_cells, variant_id


def check_findings(config):
    """Findings name benchmarks of the study and variants of its matrix (named variants by
    name, others by id; those of a runtime not installed here too: their verdict says so),
    never compare a variant with itself, and have unique ids. A NearmetalError names the key."""
    labels = {b.label for b in config.benchmark}
    variants = {variant_id(c.variant): c.variant for c in matrix_cells(config)}
    ids = set(variants) | {v.name for v in config.variant}
    seen = {}
    for i, f in enumerate(config.finding):
        if f.id in seen:
            raise NearmetalError(f"finding[{i}].id: {f.id!r} is also the id of finding[{seen[f.id]}]")
        seen[f.id] = i
        for key in ("benchmark", "baseline_benchmark"):
            name = getattr(f, key)
            if name is not None and name not in labels:
                raise NearmetalError(f"finding[{i}].{key}: no benchmark is named {name!r:.60} "
                                     f"(benchmarks: {', '.join(sorted(labels))})")
        for key in ("variant", "baseline"):
            name = getattr(f, key)
            if name is not None and name not in ids:
                raise NearmetalError(f"finding[{i}].{key}: the study has no variant {name!r:.60} "
                                     f"(variants: {', '.join(sorted(ids))})")
        if f.baseline_benchmark is None:
            reference = f.baseline or (variant_id(baseline_of(config, variants[f.variant]))
                                       if f.variant in variants else None)
            if reference == f.variant:
                raise NearmetalError(f"finding[{i}].baseline: {f.variant!r:.60} would be compared with itself "
                                     f"(give baseline = another variant, or baseline_benchmark)")
