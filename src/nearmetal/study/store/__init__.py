"""The study pipeline's store: the SQLite results database, its schema and writer lock, the
one codec between the pipeline's records and its rows, and `nearmetal import`. Imports
nothing of execute/."""
