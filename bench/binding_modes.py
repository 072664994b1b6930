#!/usr/bin/env python3
"""Ranks bound to cores or not: what it does to the modes of 8-byte latency (launchers/_binding.py).

Native 2-rank launches of the latency kernel (8 B), for each host MPI, bound (`binding =
"core"`: mpirun --map-by core --bind-to core, hydra -bind-to core) and unbound (`"none"`),
interleaved: every repetition runs the four configurations once, in a shuffled order, so
drift of the machine hits all alike. Each launch is composed as a study composes it
(run.RunRequest with binding, run.plan) and its ranks' affinity is checked from the plan's
decision. Per configuration: the median, min-max, and the modes analysis/modes.py detects
(locations, counts, share of launches in the slow ones).

Also: this process's own CPU time (getrusage RUSAGE_SELF) over each launch, against the
launch's wall time: the orchestrator blocks on the job's pipes while ranks run.

usage: bench/binding_modes.py [--repetitions 24] [--mpi openmpi,mpich] [--iterations 2000] [--out DIR]
"""

import argparse
import json
import os
import random
import resource
import statistics
import sys
import time
from pathlib import Path


def self_cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def launch(mpi, binding, iterations):
    """(8-byte latency in us, wall s, this process's CPU s) of one launch."""
    from nearmetal import kernels
    from nearmetal.run import RunRequest, capture, plan

    spec = kernels.get("latency")
    p = plan(RunRequest(spec.program, ["-m", "8:8", "-i", str(iterations)], mpi=mpi, ranks=2, binding=binding))
    assert p.binding["used"] == binding, p.binding
    c0, t0 = self_cpu(), time.perf_counter()
    rc, out, err = capture(p, timeout=300)
    wall, cpu = time.perf_counter() - t0, self_cpu() - c0
    if rc != 0:
        raise RuntimeError(f"{mpi}/{binding}: exit {rc}: {err.strip()[-300:]}")
    values = [r["value"] for r in kernels.parse(spec, out, {}) if str(r["params"].get("size")) == "8"]
    return values[0], wall, cpu


def describe(values):
    from nearmetal.analysis.modes import detect

    m = detect(values)
    if m is None:
        return "one group"
    slow = sum(m["counts"][1:]) / m["n"]
    return (f"{len(m['locations'])} modes at " + " / ".join(f"{x:.3g}" for x in m["locations"])
            + f" us (counts {m['counts']}, {100 * slow:.0f}% slow)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repetitions", type=int, default=24)
    ap.add_argument("--mpi", default="openmpi,mpich")
    ap.add_argument("--iterations", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--out", default="results/bench")
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else int(time.time())
    rng = random.Random(seed)
    configs = [(mpi, b) for mpi in a.mpi.split(",") for b in ("core", "none")]
    from nearmetal.study.execute import contention

    runs = []
    for rep in range(a.repetitions):
        order = configs[:]
        rng.shuffle(order)
        for mpi, binding in order:
            before = contention.snapshot()
            lat, wall, cpu = launch(mpi, binding, a.iterations)
            load = contention.figures(before, contention.snapshot()) if before else {}
            runs.append({"repetition": rep, "mpi": mpi, "binding": binding, "latency_us": lat, "wall_s": wall,
                         "self_cpu_s": cpu, "others_cpu_s": load.get("others_cpu_s"), "busy": load.get("busy")})
            print(f"  rep {rep + 1}/{a.repetitions} {mpi:8s} {binding:5s} {lat:8.3f} us  wall {wall:5.2f} s  "
                  f"self {cpu * 1000:5.1f} ms", file=sys.stderr, flush=True)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "binding_modes.json").write_text(json.dumps({"seed": seed, "cpus": os.cpu_count(), "runs": runs}, indent=1))
    busy = sum(1 for r in runs if r["busy"])
    load = os.getloadavg()[0]
    print(f"\nnm latency 8 B, 2 native ranks, {a.iterations} iterations, {a.repetitions} interleaved repetitions "
          f"(seed {seed}), {os.cpu_count()} CPUs")
    print(f"NOTE: {busy} of {len(runs)} launches ran on a busy machine (others > a quarter CPU; load now "
          f"{load:.1f}): figures taken while other work shares the machine are noisier than on a quiet one")
    print(f"{'MPI':8s} {'binding':7s} {'median us':>9s} {'min-max':>15s}  modes")
    for mpi, binding in configs:
        lat = [r["latency_us"] for r in runs if (r["mpi"], r["binding"]) == (mpi, binding)]
        print(f"{mpi:8s} {binding:7s} {statistics.median(lat):9.3f} {min(lat):7.3f}-{max(lat):<7.3f}  "
              f"{describe(lat)}")
    walls, cpus = [r["wall_s"] for r in runs], [r["self_cpu_s"] for r in runs]
    print(f"\nthis process while ranks ran: median {1000 * statistics.median(cpus):.1f} ms CPU per launch of "
          f"median {statistics.median(walls):.2f} s ({100 * sum(cpus) / sum(walls):.1f}% of one CPU over all launches; "
          f"composing each plan is outside this figure)")
    print(f"raw runs: {out / 'binding_modes.json'}")


if __name__ == "__main__":
    main()
