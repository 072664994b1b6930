#!/usr/bin/env python3
"""What `nearmetal trace` costs the program it traces (issue 15's target: ≤ 3% on raw MPI-IO
and netCDF-4; Darshan-like tools measured +1% and +6% here).

Each case runs the same kernel, the same arguments and ranks, traced
(`nearmetal trace ... --out TMP -- PROGRAM`) and untraced (`nearmetal run ... -- PROGRAM`), in
interleaved pairs whose order is drawn by a seeded RNG (one warm-up pair first, discarded).
The figure is the program's own timer, not the wall time: nearmetal's start-up and the trace
report written after the run are not the program's cost.

- `mpiio-openmpi`, `mpiio-mpich`: nm-iobench -p shared -L mpiio, io_layout = layout (every rank
  writes), on /dev/shm; `netcdf4-openmpi`: the same with -L netcdf4 (Debian builds parallel
  netCDF for Open MPI only). Metric: the kernel's max-over-ranks total_s (open + write + close
  + read-back: every phase the tracer intercepts, the hints query at each open included);
  the write_s and read_s ratios are printed beside it. --read picks iobench's read-back: serial
  (the default: each rank alone, independent I/O) or parallel (collective, like the writes).
- `latency-openmpi`, `latency-mpich`: nm-latency -m 1:4096, no file I/O: the tracer is loaded
  and wraps MPI_Init/Finalize but records nothing. Metric: the latency at each of --sizes;
  the ratio must be noise.

The machine may be shared: before each pair the script waits (up to --wait s) until the CPUs
have been idle for half a second, and a pair during which other processes used more than
--foreign CPU-seconds (busy time in /proc/stat minus this script's children's rusage) is
discarded and run again (at most --pairs extra times; each case says how many were).
Per case it prints the median of the per-pair traced/untraced ratios with a percentile
bootstrap 95% CI (2000 resamples, numpy, seed 0), the medians of both, and the pairs. --json
FILE also keeps every pair's figures.

usage: bench/trace_overhead.py [--pairs 9] [--seed 1] [--cases mpiio-openmpi,...]
                               [--grid 1024x1024x16] [--steps 8] [--dir /dev/shm] [--read serial|parallel]
                               [--json FILE]
                               [--foreign 0.3] [--wait 600]
"""

import argparse
import json
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

NEARMETAL = os.path.join(os.path.dirname(sys.executable), "nearmetal")
CASES = ("mpiio-openmpi", "mpiio-mpich", "netcdf4-openmpi", "latency-openmpi", "latency-mpich")
MAX_ROW = re.compile(r"^max\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$", re.M)
VERIFY = re.compile(r"verify (ok|skipped)")


def program(case, a):
    from nearmetal.kernels.build import host_bin

    kind, family = case.split("-")
    bindir = host_bin(family)
    if kind == "latency":
        return family, [os.path.join(bindir, "nm-latency"), "-m", "1:4096"]
    nx, ny, nz = a.grid.split("x")
    return family, [os.path.join(bindir, "nm-iobench"), "-x", nx, "-y", ny, "-z", nz, "-t", str(a.steps),
                    "-p", "shared", "-L", kind, "-l", "2x1", "-i", "2x1", "-d", a.dir, "-r", a.read]


def figures(case, text):
    """{name: value} from the program's output: iobench's max row, or latency per size."""
    if case.startswith("latency"):
        out = {}
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0].isdigit():
                out[f"lat_{parts[0]}"] = float(parts[1])
        if not out:
            raise RuntimeError(f"no latency table in:\n{text}")
        return out
    m = MAX_ROW.search(text)
    if not m or not VERIFY.search(text):
        raise RuntimeError(f"no iobench max row or failed verification in:\n{text}")
    o, w, c, r, t = map(float, m.groups())
    return {"total_s": t, "write_s": w, "close_s": c, "read_s": r, "open_s": o}


def run(case, argv, traced, family, scratch):
    cmd = [NEARMETAL, "trace" if traced else "run", "--mpi", family, "-n", "2"]
    out = None
    if traced:
        out = tempfile.mkdtemp(prefix="trace-", dir=scratch)
        cmd += ["--out", out]
    p = subprocess.run(cmd + ["--"] + argv, capture_output=True, text=True)
    if out:
        shutil.rmtree(out, ignore_errors=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return figures(case, p.stdout)


def busy_s():
    """CPU-seconds all CPUs spent busy since boot (/proc/stat: all but idle and iowait)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def children_s():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def wait_idle(limit):
    """Until the CPUs were less than 10% busy over half a second (or `limit` s passed)."""
    end = time.monotonic() + limit
    while True:
        b = busy_s()
        time.sleep(0.5)
        if busy_s() - b < 0.05 * os.cpu_count() or time.monotonic() > end:
            return


def bootstrap_median(x, resamples=2000, seed=0):
    x = np.asarray(x, float)
    rng = np.random.default_rng(seed)
    meds = np.median(x[rng.integers(0, len(x), (resamples, len(x)))], axis=1)
    return float(np.median(x)), float(np.percentile(meds, 2.5)), float(np.percentile(meds, 97.5))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=9)
    ap.add_argument("--seed", type=int, default=1, help="the order within each pair")
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma list of: {', '.join(CASES)}")
    ap.add_argument("--grid", default="1024x1024x16", help="iobench -x/-y/-z as NXxNYxNZ")
    ap.add_argument("--steps", type=int, default=8, help="iobench -t")
    ap.add_argument("--dir", default="/dev/shm", help="iobench -d")
    ap.add_argument("--read", default="serial", choices=("serial", "parallel"),
                    help="iobench -r: each rank reads its block back alone (serial: HDF5 turns that into "
                         "row-sized independent calls) or with the file's communicator (parallel: collective)")
    ap.add_argument("--sizes", default="1,64,4096", help="latency sizes compared")
    ap.add_argument("--json", help="write every pair's figures here")
    ap.add_argument("--foreign", type=float, default=0.3,
                    help="CPU-seconds other processes may use during a pair before it is run again")
    ap.add_argument("--wait", type=float, default=600, help="longest wait for idle CPUs before a pair (s)")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    scratch = tempfile.mkdtemp(prefix="nm-trace-overhead-")
    raw = {}
    try:
        for case in a.cases.split(","):
            if case not in CASES:
                ap.error(f"unknown case {case}")
            family, argv = program(case, a)
            print(f"## {case}: nearmetal run|trace --mpi {family} -n 2 -- {' '.join(argv)}", flush=True)
            for traced in (False, True):  # warm-up: builds, discovery caches, page cache
                run(case, argv, traced, family, scratch)
            pairs, redone = [], 0
            while len(pairs) < a.pairs:
                wait_idle(a.wait)
                got, b, c = {}, busy_s(), children_s()
                for traced in rng.sample([False, True], 2):
                    got["traced" if traced else "plain"] = run(case, argv, traced, family, scratch)
                got["foreign_cpu_s"] = round((busy_s() - b) - (children_s() - c), 3)
                if got["foreign_cpu_s"] > a.foreign and redone < a.pairs:
                    redone += 1
                    continue
                pairs.append(got)
            raw[case] = pairs
            print(f"  {redone} pairs run again (other processes used > {a.foreign} CPU-s during them); "
                  f"foreign CPU-s of the kept ones: max {max(p['foreign_cpu_s'] for p in pairs):.2f}", flush=True)
            keys = [f"lat_{s}" for s in a.sizes.split(",")] if case.startswith("latency") else ["total_s", "write_s", "read_s"]
            for k in keys:
                ratios = [p["traced"][k] / p["plain"][k] for p in pairs]
                med, lo, hi = bootstrap_median(ratios)
                mp = np.median([p["plain"][k] for p in pairs])
                mt = np.median([p["traced"][k] for p in pairs])
                print(f"{case:16s} {k:9s} untraced {mp:10.4g}  traced {mt:10.4g}  "
                      f"ratio median {med:.4f}  95% CI [{lo:.4f}, {hi:.4f}]  (n={len(ratios)})", flush=True)
            print("  pairs (" + ("total_s" if not case.startswith("latency") else keys[0]) + " untraced/traced): "
                  + " ".join(f"{p['plain'][keys[0]]:.4g}/{p['traced'][keys[0]]:.4g}" for p in pairs), flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"args": vars(a), "pairs": raw}, f, indent=1)


if __name__ == "__main__":
    main()
