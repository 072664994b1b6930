"""The one translation between the pipeline's records (study/records.py) and the store's
rows (study/store/store.py, docs/store.md): planned runs to rows and back, a finished run's
result to its columns, a study's analysis spec to its stored JSON and back. The stored
columns and values are those nearmetal has always written, so existing databases resume
and report unchanged."""

import json

from ... import kernels
from ...errors import NearmetalError
from ..records import AnalysisSpec, Cell, RunSpec

# The analysis spec is kept in the store's key-value table (meta), one entry per study: a
# new kind of row, not a new table, so the schema (and every older database) stays as it was.
_ANALYSIS_SPEC_KEY = "analysis spec of study {}"


def planned_row(spec):
    """The store's row (Store.create_study / add_planned) of a planned run."""
    c = spec.cell
    return {"run_key": spec.key, "position": spec.position, "block": spec.block, "repetition": spec.repetition,
            "warmup": spec.warmup, "benchmark": c.benchmark.label, "kernel": c.benchmark.kernel or kernels.PROGRAM.name,
            "variant": c.variant_id, "variant_json": c.variant, "ranks": c.ranks, "threads": c.threads}


def run_spec(row, benchmarks):
    """The RunSpec of a stored run (a runs row), its benchmark found among `benchmarks`
    ({label: config.Benchmark}, the study's); its stored run key and row id kept."""
    bench = benchmarks.get(row["benchmark"])
    if bench is None:
        raise NearmetalError(f"run {row['run_key']!r:.80}: benchmark {row['benchmark']!r:.60} is not in the study "
                             f"file (resume needs the file the study was planned from)")
    cell = Cell(bench, json.loads(row["variant_json"]), row["ranks"], row["threads"])
    return RunSpec(cell, row["block"], row["position"], row["repetition"], bool(row["warmup"]), key=row["run_key"],
                   run_id=row["id"])


def store_result(store, run_id, result):
    """Store a finished run (records.RunResult): its outcome, records and load in one transaction."""
    return store.finish_run(run_id, result.status, result.exit_status, result.argv, result.env, result.context_id,
                            result.started, result.wall_s, result.stderr_tail, result.records, load=result.load)


def store_analysis_spec(store, study_id, spec):
    store.set_meta(_ANALYSIS_SPEC_KEY.format(study_id), json.dumps(_spec_dict(spec), sort_keys=True))


def stored_analysis_spec(store, study_id):
    """The study's stored AnalysisSpec; None for a study stored before they were (or imported)."""
    text = store.meta(_ANALYSIS_SPEC_KEY.format(study_id))
    if text is None:
        return None
    try:
        return AnalysisSpec(**json.loads(text))
    except (ValueError, TypeError) as e:
        raise NearmetalError(f"{store.path}: the stored analysis spec of study {study_id} is unreadable: {e}")


def _spec_dict(spec):
    return {"baselines": spec.baselines, "looks": spec.looks, "alpha_per_look": spec.alpha_per_look,
            "adaptive": spec.adaptive, "exclude_disturbed": spec.exclude_disturbed, "description": spec.description,
            "findings": spec.findings, "runtimes": spec.runtimes, "metrics": spec.metrics}
