"""Slurm: a real local cluster for tests and studies (`cluster`), and what the reachable
Slurm offers (`info`). Submodules are imported on use: `import nearmetal.slurm` is free."""
