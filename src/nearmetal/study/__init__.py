"""The study engine's stages up to the store (docs/architecture.md, "The study pipeline"):
config -> plan -> store -> execute -> store; the analysis is nearmetal.analysis.

config/ validates a TOML study; plan/ expands its matrix into cells and randomized blocks of
runs (records.Cell, records.RunSpec) and decides what the analysis will compare
(plan/analysis_spec.py); store/ keeps them in SQLite (store/codec.py: records to rows and
back); execute/ runs them (execute/runner.py: `nearmetal study`; execute/executor.py: one
process group per run, each result stored at once). A stage imports only the stages before
it (tests/test_architecture.py); records.py holds the frozen records that cross them.
nearmetal.analysis reads the rows back and nearmetal.report renders them.
"""
