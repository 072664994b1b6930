"""The study engine: config -> plan (list of runs) -> executor -> store -> analysis -> report.

config.py validates a TOML study; plan.py expands its matrix into randomized blocks of
runs; executor.py runs them, one process group each, storing every result at once in
store.py's SQLite database; analysis.py groups the stored records per benchmark point and
variant and applies stats.py; nearmetal.report renders the result.
"""
