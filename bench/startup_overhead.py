#!/usr/bin/env python3
"""Container instantiation overhead, as in seed 001 section 9:
    overhead = wall - CPU;  instantiation overhead = (wall - CPU)container - (wall - CPU)native
measured with `nearmetal bench startup` (nm-startup): wall from a launch timestamp to
main(), CPU of the rank process at main(). Natively and in each runtime x mode, for each
MPI, N interleaved repetitions (every configuration once per repetition, in a shuffled
order). Per run the job's figure is the max over ranks (the slowest rank gates the job).

Each configuration runs twice per repetition:
  total   NM_LAUNCH_NS taken here just before starting `nearmetal` and passed with --env
          (it reaches every rank): nearmetal's start-up and planning (image resolution, bind
          staging, ELF checks) + launcher + runtime + loader;
  launch  no --env: the stamp nearmetal itself puts on the launcher when it starts it:
          launcher + runtime + loader only.
Printed per configuration: medians of wall, CPU, idle = wall - CPU and MPI_Init (total
runs); then the instantiation overhead: per repetition (idle in the container) - (idle
natively in the same repetition), median [min .. max] over repetitions, in ms and in percent
of the native idle (seed 001's overhead %), for total and launch; and the in-process part
(from /proc/self/stat: what ran inside the rank's own process before main, e.g. ch-run
setting up the container and exec'ing in place).

A runtime written NAME-sif (apptainer-sif) runs the image's SIF file instead of its directory
(seed 002 compared image formats): `--runtime NAME --image <the image's .sif>`.

usage: bench/startup_overhead.py [--repetitions 10] [--mpi mpich,openmpi]
                                 [--runtimes charliecloud,bwrap,podman,apptainer,apptainer-sif]
                                 [--modes hybrid,bind]
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


def sif_of(image):
    from nearmetal import image as image_mod

    img = image_mod.resolve(image or image_mod.default_name(image_mod.host_distro(), ("mpich", "openmpi")))
    if not img.sif:
        raise SystemExit(f"image {img.name} has no SIF: nearmetal image build --format sif --name {img.name}")
    return str(img.sif)


def bench_argv(mpi, mode, runtime, ranks, image):
    argv = [NEARMETAL] if NEARMETAL else [sys.executable, "-m", "nearmetal.cli"]
    argv += ["bench", "startup", "--json", "--mpi", mpi, "-n", str(ranks), "--mode", mode]
    if mode != "native":
        if runtime.endswith("-sif"):
            runtime, image = runtime[:-len("-sif")], sif_of(image)
        argv += ["--runtime", runtime] + (["--image", image] if image else [])
    return argv


def run_once(mpi, mode, runtime, ranks, image, own_stamp, tries=3):
    """The max-over-ranks row of one run (+ proc_idle), with our NM_LAUNCH_NS or nearmetal's."""
    argv = bench_argv(mpi, mode, runtime, ranks, image)
    for attempt in range(tries):
        launch = time.time_ns()
        out = subprocess.run(argv + (["--env", f"NM_LAUNCH_NS={launch}"] if own_stamp else []),
                             capture_output=True, text=True, timeout=300)
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
        who = "--env NM_LAUNCH_NS" if own_stamp else "nearmetal's own NM_LAUNCH_NS stamp"
        raise RuntimeError(f"{mpi} {mode} {runtime}: {who} did not reach every rank (sources {sources})")
    if own_stamp and row["wall_to_main"] * 1e9 > time.time_ns() - launch:
        raise RuntimeError(f"{mpi} {mode} {runtime}: wall to main exceeds the time the whole run took")
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
    ap.add_argument("--runtimes", default="charliecloud,bwrap,podman,apptainer,apptainer-sif")
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
        run_once(mpi, mode, rt, a.ranks, a.image, own_stamp=True)
    runs = []
    for rep in range(a.repetitions):
        order = [(c, own) for c in configs for own in (True, False)]
        rng.shuffle(order)
        rows = {}
        for (mpi, mode, rt), own in order:
            rows[mpi, mode, rt, own] = run_once(mpi, mode, rt, a.ranks, a.image, own_stamp=own)
        for mpi, mode, rt in configs:
            total, launch = rows[mpi, mode, rt, True], rows[mpi, mode, rt, False]
            runs.append({"repetition": rep, "mpi": mpi, "mode": mode, "runtime": rt, "total": total, "launch": launch})
            print(f"  rep {rep + 1}/{a.repetitions} {mpi:8s} {rt:12s} {mode:7s} wall {total['wall_to_main'] * 1e3:8.1f} ms"
                  f"  cpu {total['cpu_to_main'] * 1e3:6.1f} ms  idle {total['idle'] * 1e3:8.1f} ms"
                  f"  (from the launcher: idle {launch['idle'] * 1e3:8.1f} ms)", file=sys.stderr, flush=True)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "startup_overhead.json").write_text(json.dumps({"seed": seed, "ranks": a.ranks, "runs": runs}, indent=1))

    print(f"\nnm-startup, {a.ranks} ranks, {a.repetitions} interleaved repetitions (seed {seed}); per run the max "
          f"over ranks; ms, median [min .. max]")
    print("instantiation overhead = idle - native idle (same repetition); total: from before `nearmetal` starts; "
          "launch: from nearmetal starting the launcher; in-process: /proc/self/stat age - CPU (total runs)")
    print(f"{'MPI':8s} {'runtime':12s} {'mode':7s} {'wall':>7s} {'CPU':>5s} {'idle':>7s} {'MPI_Init':>8s}   "
          f"{'overhead total':>32s} {'%':>5s}   {'overhead launch':>32s} {'%':>5s}   {'in-process':>27s}")
    for mpi in a.mpi.split(","):
        native = {r["repetition"]: r for r in runs if r["mpi"] == mpi and r["mode"] == "native"}
        base = {k: statistics.median(r[k]["idle"] for r in native.values()) for k in ("total", "launch")}
        for m, mode, rt in [c for c in configs if c[0] == mpi]:
            sel = [r for r in runs if r["mpi"] == mpi and r["mode"] == mode and r["runtime"] == rt]
            med = {k: statistics.median(r["total"][k] for r in sel) * 1e3
                   for k in ("wall_to_main", "cpu_to_main", "idle", "mpi_init")}
            line = (f"{mpi:8s} {rt:12s} {mode:7s} {med['wall_to_main']:7.1f} {med['cpu_to_main']:5.1f} "
                    f"{med['idle']:7.1f} {med['mpi_init']:8.1f}")
            if mode != "native":
                for k in ("total", "launch"):
                    diff = [r[k]["idle"] - native[r["repetition"]][k]["idle"] for r in sel]
                    pct = 100.0 * statistics.median(diff) / base[k] if base[k] > 0 else float("nan")
                    line += f"   {fmt(diff, width=7):>32s} {pct:5.0f}"
                pdiff = [r["total"]["proc_idle"] - native[r["repetition"]]["total"]["proc_idle"] for r in sel]
                line += f"   {fmt(pdiff, width=5):>27s}"
            print(line)
    print(f"\nraw runs: {out / 'startup_overhead.json'}")


if __name__ == "__main__":
    main()
