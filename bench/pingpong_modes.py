#!/usr/bin/env python3
"""8-byte ping-pong latency and 1 MiB bandwidth: native vs hybrid vs bind on a container
runtime, for each host MPI, interleaved (every configuration once per repetition, in a
shuffled order) so machine drift hits all configurations alike.

usage: bench/pingpong_modes.py [--repetitions N] [--runtime charliecloud] [--mpi openmpi,mpich] [--out DIR]
Prints medians and min-max per configuration; writes raw runs to DIR/pingpong_modes.json.
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

NEARMETAL = [sys.executable, "-m", "nearmetal.cli"]
SIZES = (8, 1048576)


def run_once(mode, mpi, runtime, image):
    argv = NEARMETAL + ["run", "--mode", mode, "--mpi", mpi, "-n", "2"]
    if mode != "native":
        argv += ["--runtime", runtime] + (["--image", image] if image else [])
    argv += ["--", "nm-pingpong", "-s", "8", "-s", "1048576", "-i", "1000", "-x", "100"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"{mode}/{mpi}: exit {out.returncode}: {out.stderr.strip()[-300:]}")
    result = {}
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0].isdigit():
            result[int(parts[0])] = (float(parts[1]), float(parts[2]))
    return {"latency_us": result[8][0], "bandwidth_MBps": result[1048576][1]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repetitions", type=int, default=10)
    ap.add_argument("--runtime", default="charliecloud")
    ap.add_argument("--image", default=None)
    ap.add_argument("--mpi", default="openmpi,mpich")
    ap.add_argument("--modes", default="native,hybrid,bind")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--out", default="results/bench")
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else int(time.time())
    rng = random.Random(seed)
    configs = [(m, f) for f in a.mpi.split(",") for m in a.modes.split(",")]
    runs = []
    for rep in range(a.repetitions):
        order = configs[:]
        rng.shuffle(order)
        for mode, mpi in order:
            r = run_once(mode, mpi, a.runtime, a.image)
            runs.append({"repetition": rep, "mode": mode, "mpi": mpi, "runtime": a.runtime, **r})
            print(f"  rep {rep + 1}/{a.repetitions} {mpi:8s} {mode:7s} lat {r['latency_us']:8.2f} us  "
                  f"bw {r['bandwidth_MBps']:9.1f} MB/s", file=sys.stderr, flush=True)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "pingpong_modes.json").write_text(json.dumps({"seed": seed, "runs": runs}, indent=1))
    print(f"\nnm-pingpong, 2 ranks, {a.repetitions} interleaved repetitions (seed {seed}), runtime {a.runtime}")
    print(f"{'MPI':8s} {'mode':7s} {'8 B latency us: median [min-max]':>34s} {'1 MiB MB/s: median [min-max]':>34s} {'lat/native':>10s} {'bw/native':>9s}")
    for mpi in a.mpi.split(","):
        base = None
        for mode in a.modes.split(","):
            sel = [r for r in runs if r["mpi"] == mpi and r["mode"] == mode]
            lat = [r["latency_us"] for r in sel]
            bw = [r["bandwidth_MBps"] for r in sel]
            ml, mb = statistics.median(lat), statistics.median(bw)
            if mode == "native":
                base = (ml, mb)
            ratio = f"{ml / base[0]:10.2f} {mb / base[1]:9.2f}" if base else ""
            print(f"{mpi:8s} {mode:7s} {ml:12.2f} [{min(lat):7.2f}-{max(lat):7.2f}] "
                  f"{mb:14.1f} [{min(bw):8.1f}-{max(bw):8.1f}] {ratio}")
    print(f"\nraw runs: {out / 'pingpong_modes.json'}")


if __name__ == "__main__":
    main()
