"""The automatic I/O tuner: `nearmetal io sweep` and `nearmetal io best` (docs/io-tuning.md)."""
