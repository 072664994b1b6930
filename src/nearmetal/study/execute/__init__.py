"""The study pipeline's execution stage: `nearmetal study` (runner.py: plan into the store,
then run what is pending), each run's launch and process group (executor.py), and what a
run records besides its output (context, contention, provenance)."""
