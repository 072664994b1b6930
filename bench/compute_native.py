#!/usr/bin/env python3
"""Compute proxies natively: STREAM triad (host-optimized and portable builds), the memory
bandwidth a plain memcpy loop gets (bench/memcpy_bw.c, gcc -O2, one process per rank), and
CG GFLOP/s (host-optimized and portable). Every configuration once per repetition, in a
shuffled order, so machine drift hits all alike; medians with min-max.

Prints triad/memcpy (how much of the memcpy bandwidth STREAM's triad reaches) and
portable/optimized for triad and CG (the portability penalty: 1.0 = none).

usage: bench/compute_native.py [--repetitions 10] [--ranks 2] [--mpi mpich] [--out DIR]
       [--stream-size 33554432] [--cg-box 64]
Writes raw runs to DIR/compute_native.json.
"""

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NEARMETAL = [sys.executable, "-m", "nearmetal.cli"]
HERE = Path(__file__).resolve().parent


def bench_json(kernel, mpi, ranks, kargs):
    argv = NEARMETAL + ["bench", kernel, "--mpi", mpi, "-n", str(ranks), "--json", "--"] + kargs
    out = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"{kernel}: exit {out.returncode}: {out.stderr.strip()[-400:]}")
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def one(records, metric, **match):
    (value,) = [r["value"] for r in records
                if r["metric"] == metric and all(r["params"].get(k) == v for k, v in match.items())]
    return value


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repetitions", type=int, default=10)
    ap.add_argument("--ranks", type=int, default=2, help="MPI ranks (and memcpy processes); default 2")
    ap.add_argument("--mpi", default="mpich")
    ap.add_argument("--stream-size", type=int, default=1 << 25, help="doubles per STREAM array per rank")
    ap.add_argument("--cg-box", type=int, default=64, help="CG local box edge per rank")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--out", default="results/bench")
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else int(time.time())
    rng = random.Random(seed)

    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / "memcpy_bw"
        subprocess.run(["gcc", "-O2", "-o", str(probe), str(HERE / "memcpy_bw.c")], check=True)
        stream_args = ["-s", str(a.stream_size), "-n", "10"]
        cg_args = ["-x", str(a.cg_box), "-y", str(a.cg_box), "-z", str(a.cg_box)]
        simd = {}

        def stream(kernel):
            recs = bench_json(kernel, a.mpi, a.ranks, stream_args)
            simd[kernel] = recs[0]["params"]["simd"]
            return one(recs, "triad", rank="total")

        def cg(kernel):
            recs = bench_json(kernel, a.mpi, a.ranks, cg_args)
            simd[kernel] = recs[0]["params"]["simd"]
            return one(recs, "gflops")

        def memcpy():
            # the same bytes per process as one STREAM array
            out = subprocess.run([str(probe), "-s", str(8 * a.stream_size), "-n", "10", "-p", str(a.ranks)],
                                 capture_output=True, text=True, timeout=600, check=True)
            return float(out.stdout.split("total_GBps")[1].split()[0])

        configs = {"stream triad GB/s": lambda: stream("stream"),
                   "stream-portable triad GB/s": lambda: stream("stream-portable"),
                   "memcpy GB/s": memcpy,
                   "cg GFLOP/s": lambda: cg("cg"),
                   "cg-portable GFLOP/s": lambda: cg("cg-portable")}
        runs = []
        for rep in range(a.repetitions):
            order = list(configs)
            rng.shuffle(order)
            for name in order:
                value = configs[name]()
                runs.append({"repetition": rep, "config": name, "value": value})
                print(f"  rep {rep + 1}/{a.repetitions} {name:28s} {value:10.3f}", file=sys.stderr, flush=True)

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "compute_native.json").write_text(json.dumps({"seed": seed, "ranks": a.ranks, "mpi": a.mpi,
                                                          "stream_size": a.stream_size, "cg_box": a.cg_box,
                                                          "simd": simd, "runs": runs}, indent=1))
    med = {}
    print(f"\nnative, {a.ranks} ranks x 1 thread, {a.mpi}, {a.repetitions} interleaved repetitions (seed {seed}); "
          f"STREAM {a.stream_size} doubles per array per rank, CG {a.cg_box}^3 per rank")
    print(f"{'configuration':30s} {'simd':>7s} {'median':>10s} {'[min - max]':>22s}")
    for name in configs:
        vals = [r["value"] for r in runs if r["config"] == name]
        med[name] = statistics.median(vals)
        kernel = name.split()[0]
        print(f"{name:30s} {simd.get(kernel, '-'):>7s} {med[name]:10.3f} [{min(vals):9.3f} - {max(vals):9.3f}]")
    print(f"\n{'ratio':32s} {'of medians':>10s} {'per-repetition: median [min - max]':>36s}")
    for label, num, den in (("triad / memcpy", "stream triad GB/s", "memcpy GB/s"),
                            ("stream portable / optimized", "stream-portable triad GB/s", "stream triad GB/s"),
                            ("cg portable / optimized", "cg-portable GFLOP/s", "cg GFLOP/s")):
        by_rep = {}
        for r in runs:
            by_rep.setdefault(r["repetition"], {})[r["config"]] = r["value"]
        paired = [v[num] / v[den] for v in by_rep.values() if num in v and den in v]
        print(f"{label:32s} {med[num] / med[den]:10.3f} {statistics.median(paired):14.3f} "
              f"[{min(paired):6.3f} - {max(paired):6.3f}]")
    print(f"\nraw runs: {out / 'compute_native.json'}")


if __name__ == "__main__":
    main()
