#!/usr/bin/env python3
"""OSU-compatible 8-byte latency (nm-latency -m 8:8) and 1 MiB bandwidth (nm-bw -m
1048576:1048576), natively, for each host MPI, with OSU's default iterations; interleaved
(every configuration once per repetition, in a shuffled order) so machine drift hits all
configurations alike.

usage: bench/osu_native.py [--repetitions 10] [--mpi openmpi,mpich] [--seed N] [--out DIR]
Prints the median and min-max per configuration; writes raw runs to DIR/osu_native.json.
"""

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

NEARMETAL = [sys.executable, "-m", "nearmetal.cli"]
TESTS = {  # name: (kernel, kernel arguments, metric, unit)
    "latency_8B": ("latency", ["-m", "8:8"], "latency", "us"),
    "bw_1MiB": ("bw", ["-m", "1048576:1048576"], "bandwidth", "MB/s"),
}


def run_once(test, mpi):
    kernel, kargs, metric, _ = TESTS[test]
    argv = NEARMETAL + ["bench", kernel, "--mpi", mpi, "-n", "2", "--json", "--", *kargs]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"{test}/{mpi}: exit {out.returncode}: {out.stderr.strip()[-300:]}")
    values = [r["value"] for r in map(json.loads, out.stdout.splitlines()) if r["metric"] == metric]
    if len(values) != 1:
        raise RuntimeError(f"{test}/{mpi}: expected one {metric} record, got {out.stdout!r}")
    return values[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repetitions", type=int, default=10)
    ap.add_argument("--mpi", default="openmpi,mpich")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--out", default="results/bench")
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else int(time.time())
    rng = random.Random(seed)
    families = a.mpi.split(",")
    configs = [(t, f) for t in TESTS for f in families]
    runs = []
    for rep in range(a.repetitions):
        order = configs[:]
        rng.shuffle(order)
        for test, mpi in order:
            v = run_once(test, mpi)
            runs.append({"repetition": rep, "test": test, "mpi": mpi, "value": v, "unit": TESTS[test][3]})
            print(f"  rep {rep + 1}/{a.repetitions} {mpi:8s} {test:11s} {v:10.2f} {TESTS[test][3]}",
                  file=sys.stderr, flush=True)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "osu_native.json").write_text(json.dumps({"seed": seed, "runs": runs}, indent=1))
    print(f"\nnearmetal OSU-compatible kernels, native, 2 ranks, {a.repetitions} interleaved repetitions (seed {seed})")
    print(f"{'MPI':8s} {'test':11s} {'median':>10s} {'min':>10s} {'max':>10s}  unit")
    for test in TESTS:
        for mpi in families:
            vals = [r["value"] for r in runs if r["test"] == test and r["mpi"] == mpi]
            print(f"{mpi:8s} {test:11s} {statistics.median(vals):10.2f} {min(vals):10.2f} {max(vals):10.2f}  "
                  f"{TESTS[test][3]}")
    print(f"\nraw runs: {out / 'osu_native.json'}")


if __name__ == "__main__":
    main()
