"""Any program as a benchmark: figures of merit read from what it prints or writes.

A study benchmark with `command = [...]` instead of `kernel = ...` runs that program the
way `nearmetal run` does; its results are the figures of merit (FOMs) of its preset
(apps/presets/: one module per known application) and of its own `[[benchmark.fom]]`
entries (a regular expression whose first group is the value), plus the run's wall time.
A FOM that is not found, a number that does not parse, or a missing `success` line makes
the run failed with the reason: never a silent zero.
"""
