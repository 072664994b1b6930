"""What the analysis needs of a study file, decided when the study is planned (records.AnalysisSpec)
and stored with it (codec), so that analysing a study never parses its file again. For a
study stored before analysis specs were (or one whose stored spec lacks a variant), the
same decisions are taken from its stored file: `of_stored_file`."""

from ..records import AnalysisSpec


def decide(config, variants=(), planned=True):
    """The AnalysisSpec of a study: the baseline of each of its cells' variants (planned) and
    of the further `variants` (dicts, as stored: a later stage's), its looks, its findings, which metrics are answered (analysis/quantities.py)."""
    from ...analysis.findings import runtimes_of
    from ...analysis.quantities import plan_of
    from ..config.ids import variant_id
    from .plan import baseline_of, cells
    from .sequential import looks_of

    baselines = {}
    for v in [c.variant for c in (cells(config) if planned else ())] + list(variants):
        baselines.setdefault(variant_id(v), variant_id(baseline_of(config, v)))
    looks, alpha = looks_of(config.study)
    return AnalysisSpec(baselines=baselines, looks=looks, alpha_per_look=alpha, adaptive=bool(config.study.adaptive),
                        exclude_disturbed=bool(config.study.exclude_disturbed), description=config.study.description,
                        findings=[f.model_dump() for f in config.finding], runtimes=runtimes_of(config),
                        metrics=plan_of(config))


def of_stored_file(study_row, variants):
    """The AnalysisSpec of a study stored without one, decided from its stored study file
    for its stored `variants` ({id: dict}); None where there is no file to read (an imported
    study, which carries its baseline in baseline_json)."""
    from ...errors import NearmetalError
    from . import study_file

    if not study_row["config_toml"]:
        return None
    try:
        config = study_file.parse(study_row["config_toml"], source=f"study '{study_row['name']}'")
    except NearmetalError:
        return None  # imported studies carry their own baseline in baseline_json
    return decide(config, variants.values(), planned=False)  # the cells as planned then: those stored
