#!/usr/bin/env python3
"""Store and analysis scale: N synthetic runs (default 100,000) imported from CSV and
reported (analysis + HTML), timed end to end and per phase.
usage: bench/store_scale.py [--runs 100000]
"""

import argparse
import csv
import random
import sys
import tempfile
import time
from pathlib import Path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=100_000)
    a = ap.parse_args()
    from nearmetal.report import write_report
    from nearmetal.analysis.analyze import analyze
    from nearmetal.study.store.importer import import_csv

    tmp = Path(tempfile.mkdtemp(prefix="nm-scale-"))
    # A realistic shape: 8 kernels x 23 message sizes x 5 placements x 4 variants, repeated in
    # blocks until N runs (27 blocks for 100,000).
    variants = ["native", "hybrid", "bind", "bind-bwrap"]
    kernels = [f"kernel{k}" for k in range(8)]
    sizes = [2 ** k for k in range(23)]
    placements = [2, 4, 8, 16, 32]
    cells = len(kernels) * len(sizes) * len(placements) * len(variants)
    reps = max(2, -(-a.runs // cells))  # ceil: at least N runs
    points = len(kernels) * len(sizes) * len(placements)
    rng = random.Random(1)
    path = tmp / "runs.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["variant", "benchmark", "metric", "unit", "size", "ranks", "block", "value"])
        for bench in kernels:
            for size in sizes:
                for ranks in placements:
                    for rep in range(reps):
                        for v in variants:
                            slow = {"native": 1.0, "hybrid": 1.1, "bind": 1.0, "bind-bwrap": 1.01}[v]
                            value = (1 + size / 1e4) * (1 + ranks / 64) * slow * rng.lognormvariate(0, 0.03)
                            w.writerow([v, bench, "latency", "us", size, ranks, rep, f"{value:.4f}"])
    t0 = time.perf_counter()
    store, _, rows = import_csv(path, tmp / "s.db", "scale", "native")
    t1 = time.perf_counter()
    analysis = analyze(store, "scale")
    t2 = time.perf_counter()
    out = write_report(analysis, tmp, "html")
    t3 = time.perf_counter()
    print(f"{rows} runs ({points} points x {len(variants)} variants x {reps} blocks)")
    print(f"  import {t1 - t0:.2f} s, analysis {t2 - t1:.2f} s ({len(analysis['points'])} points), "
          f"HTML report {t3 - t2:.2f} s; total {t3 - t0:.2f} s -> {out}")


if __name__ == "__main__":
    sys.exit(main())
