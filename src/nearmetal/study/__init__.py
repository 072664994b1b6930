"""The study engine's stages up to the store (docs/architecture.md, "The study pipeline"):
config -> plan -> store -> execute -> store; the analysis is nearmetal.analysis.

config.py validates a TOML study; plan.py expands its matrix into cells and randomized
blocks of runs (records.Cell, records.RunSpec) and analysis_spec.py decides what the
analysis will compare; runner.py stores them (codec.py: records to rows and back) and
executor.py runs them, one process group each, storing every result at once in store.py's
SQLite database; nearmetal.analysis reads the rows back and nearmetal.report renders them.
"""
