#!/usr/bin/env python3
"""Container instantiation overhead, as in seed 001 section 9:
    overhead = wall - CPU;  instantiation overhead = (wall - CPU)container - (wall - CPU)native
measured with `nearmetal bench startup` (nm-startup): wall from NM_LAUNCH_NS (taken here,
just before each run, and passed with --env so it reaches every rank) to main(), CPU of the
rank process at main(). Natively and in each runtime x mode, for each MPI, N interleaved
repetitions (every configuration once per repetition, in a shuffled order). Per run the
job's figure is the max over ranks (the slowest rank gates the job).

Printed per configuration: medians of wall, CPU, idle = wall - CPU, MPI_Init; then the
instantiation overhead: per repetition (idle in the container) - (idle natively in the same
repetition), median [min-max] over repetitions, in ms and in percent of the native idle
(seed 001's overhead %); the in-process part (from /proc/self/stat: what ran inside the
rank's own process before main, e.g. ch-run exec'ing in place) likewise, and the part that
is nearmetal's own planning (`nearmetal bench --dry-run` time, container minus native, one
dry run after every measured run).

usage: bench/startup_overhead.py [--repetitions 10] [--mpi mpich,openmpi]
                                 [--runtimes charliecloud,bwrap,podman] [--modes hybrid,bind]
                                 [--ranks 2] [--image IMG] [--out results/bench]
Writes the raw records to OUT/startup_overhead.json.
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

NEARMETAL = os.path.join(os.path.dirname(sys.executable), "nearmetal")
if not os.path.exists(NEARMETAL):
    NEARMETAL = None


def bench_argv(mpi, mode, runtime, ranks, image):
    argv = [NEARMETAL] if NEARMETAL else [sys.executable, "-m", "nearmetal.cli"]
    argv += ["bench", "startup", "--json", "--mpi", mpi, "-n", str(ranks), "--mode", mode]
    if mode != "native":
        argv += ["--runtime", runtime] + (["--image", image] if image else [])
    return argv


def plan_time(mpi, mode, runtime, ranks, image):
    """Seconds `nearmetal bench --dry-run` takes: start-up and planning, no launch."""
    t = time.perf_counter()
    subprocess.run(bench_argv(mpi, mode, runtime, ranks, image) + ["--dry-run"], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True, timeout=300)
    return time.perf_counter() - t


def run_once(mpi, mode, runtime, ranks, image, tries=3):
    argv = bench_argv(mpi, mode, runtime, ranks, image)
    for attempt in range(tries):
        launch = time.time_ns()
        out = subprocess.run(argv + ["--env", f"NM_LAUNCH_NS={launch}"], capture_output=True, text=True, timeout=300)
        if out.returncode == 0:
            break
        error = f"{mpi} {mode} {runtime}: exit {out.returncode}: {out.stderr.strip()[-400:]}"
        if attempt + 1 == tries:
            raise RuntimeError(error)
        # a shared machine: the image may be being rebuilt under us; wait and retry
        print(f"  retrying in 30 s: {error}", file=sys.stderr, flush=True)
        time.sleep(30)
    recs = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    row = {r["metric"]: r["value"] for r in recs if r["params"]["rank"] == "max"}
    sources = {r["params"]["source"] for r in recs if r["metric"] == "wall_to_main"}
    if sources != {"launch_env"}:
        raise RuntimeError(f"{mpi} {mode} {runtime}: NM_LAUNCH_NS did not reach every rank (sources {sources})")
    # in-process part: the rank's own age at main() minus its CPU, max over ranks
    per_rank = {}
    for r in recs:
        if isinstance(r["params"]["rank"], int):
            per_rank.setdefault(r["params"]["rank"], {})[r["metric"]] = r["value"]
    row["proc_idle"] = max(v["proc_wall_to_main"] - v["cpu_to_main"] for v in per_rank.values())
    return row


def fmt(values, scale=1e3, width=7, prec=1):
    med = statistics.median(values)
    return f"{med * scale:{width}.{prec}f} [{min(values) * scale:{width}.{prec}f} .. {max(values) * scale:{width}.{prec}f}]"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repetitions", type=int, default=10)
    ap.add_argument("--mpi", default="mpich,openmpi")
    ap.add_argument("--runtimes", default="charliecloud,bwrap,podman")
    ap.add_argument("--modes", default="hybrid,bind")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--image", default=None)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--out", default="results/bench")
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else int(time.time())
    rng = random.Random(seed)
    configs = []
    for mpi in a.mpi.split(","):
        configs.append((mpi, "native", "-"))
        configs += [(mpi, mode, rt) for rt in a.runtimes.split(",") for mode in a.modes.split(",")]
    # one warm-up run per configuration (host kernel build, image resolution, bind staging, caches)
    for mpi, mode, rt in configs:
        run_once(mpi, mode, rt, a.ranks, a.image)
    runs = []
    for rep in range(a.repetitions):
        order = configs[:]
        rng.shuffle(order)
        for mpi, mode, rt in order:
            r = run_once(mpi, mode, rt, a.ranks, a.image)
            r["plan"] = plan_time(mpi, mode, rt, a.ranks, a.image)
            runs.append({"repetition": rep, "mpi": mpi, "mode": mode, "runtime": rt, **r})
            print(f"  rep {rep + 1}/{a.repetitions} {mpi:8s} {rt:12s} {mode:7s} wall {r['wall_to_main'] * 1e3:8.1f} ms"
                  f"  cpu {r['cpu_to_main'] * 1e3:6.1f} ms  idle {r['idle'] * 1e3:8.1f} ms", file=sys.stderr, flush=True)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "startup_overhead.json").write_text(json.dumps({"seed": seed, "ranks": a.ranks, "runs": runs}, indent=1))

    print(f"\nnm-startup, {a.ranks} ranks, {a.repetitions} interleaved repetitions (seed {seed}); "
          f"per run the max over ranks; ms, median [min .. max]")
    print(f"{'MPI':8s} {'runtime':12s} {'mode':7s} {'wall to main':>12s} {'CPU':>6s} {'idle=wall-CPU':>13s} "
          f"{'MPI_Init':>8s}   {'instantiation overhead (idle - native idle)':>44s} {'%':>6s}   "
          f"{'of it in-process':>32s}   {'of it nearmetal planning':>32s}")
    for mpi in a.mpi.split(","):
        native = {r["repetition"]: r for r in runs if r["mpi"] == mpi and r["mode"] == "native"}
        native_idle = statistics.median(r["idle"] for r in native.values())
        for m, mode, rt in [c for c in configs if c[0] == mpi]:
            sel = [r for r in runs if r["mpi"] == mpi and r["mode"] == mode and r["runtime"] == rt]
            med = {k: statistics.median(r[k] for r in sel) * 1e3 for k in ("wall_to_main", "cpu_to_main", "idle", "mpi_init")}
            line = (f"{mpi:8s} {rt:12s} {mode:7s} {med['wall_to_main']:12.1f} {med['cpu_to_main']:6.1f} "
                    f"{med['idle']:13.1f} {med['mpi_init']:8.1f}")
            if mode != "native":
                diff = [r["idle"] - native[r["repetition"]]["idle"] for r in sel]
                pdiff = [r["proc_idle"] - native[r["repetition"]]["proc_idle"] for r in sel]
                plan = [r["plan"] - native[r["repetition"]]["plan"] for r in sel]
                pct = 100.0 * statistics.median(diff) / native_idle if native_idle > 0 else float("nan")
                line += f"   {fmt(diff, width=10):>44s} {pct:6.0f}   {fmt(pdiff):>32s}   {fmt(plan):>32s}"
            print(line)
    print(f"\nraw runs: {out / 'startup_overhead.json'}")


if __name__ == "__main__":
    main()
