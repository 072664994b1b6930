"""The analysis stage of a study: from stored rows (and the stored analysis spec) to
per-point statistics, verdicts, answers and findings (docs/architecture.md, docs/analysis.md).
Reads the store through nearmetal.study; never the study file."""
