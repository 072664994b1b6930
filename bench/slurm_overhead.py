#!/usr/bin/env python3
"""Slurm on the local cluster (`nearmetal cluster`):
1. per-run launch overhead: `srun` inside an allocation vs local `mpiexec`/`mpirun`
   (2 ranks of /bin/true), and the round trip of a batch submission (`nearmetal run
   --scheduler slurm` outside an allocation: sbatch, poll, collect), medians of N;
2. the coupled kernel as a heterogeneous step (1 atmosphere rank native + 2 ocean ranks in
   native/bind/hybrid), main-loop times per component, interleaved repetitions.
usage: bench/slurm_overhead.py [--rounds 20] [--reps 5]
"""

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))
NEARMETAL = os.path.join(os.path.dirname(sys.executable), "nearmetal")


def med(xs):
    return f"{statistics.median(xs) * 1e3:8.1f} ms [{min(xs) * 1e3:.1f}-{max(xs) * 1e3:.1f}]"


def timed(argv, env):
    t = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--coupled-mpi", default="mpich,openmpi")
    ap.add_argument("--skip-launch", action="store_true")
    a = ap.parse_args()
    from nearmetal.discovery.mpi import get
    from nearmetal.kernels import get as kget, parse
    from nearmetal.slurm import cluster

    d = tempfile.mkdtemp(prefix="nm-slurm-bench-")
    cl = cluster.up(nodes=3, dir=d)
    env = dict(os.environ, **cl.env())
    true = shutil.which("true")
    try:
        print(f"launch overhead, 2 ranks of {true}, {a.rounds} rounds (medians [min-max])")
        for fam, plugin in (() if a.skip_launch else (("mpich", "pmi2"), ("openmpi", "pmix"))):
            launcher = get(fam)["launcher"]
            local = [launcher, "-n", "2", true] if fam == "mpich" else [launcher, "--allow-run-as-root", "-np", "2", true]
            # one allocation, srun timed inside it by a small Python loop
            loop = ("import subprocess,time,sys,json\nts=[]\nfor i in range(%d):\n t=time.perf_counter();"
                    "subprocess.run(['srun','--mpi=%s','-n','2','%s'],check=True,stdout=subprocess.DEVNULL,"
                    "stderr=subprocess.DEVNULL);ts.append(time.perf_counter()-t)\nprint(json.dumps(ts))" % (a.rounds, plugin, true))
            out = subprocess.run(["salloc", "-N1", "-n2", sys.executable, "-c", loop], env=env, capture_output=True,
                                 text=True, check=True)
            srun_t = __import__("json").loads(out.stdout.strip().splitlines()[-1])
            local_t = [timed(local, env) for _ in range(a.rounds)]
            batch_t = [timed([NEARMETAL, "run", "--scheduler", "slurm", "--mpi", fam, "-n", "2", "--", true], env)
                       for _ in range(max(5, a.rounds // 2))]
            print(f"  {fam:8s} local {med(local_t)}   srun in allocation {med(srun_t)}   "
                  f"batch round trip {med(batch_t)}")
        print(f"\ncoupled kernel as a heterogeneous step: atm 1 rank native, ocn 2 ranks in MODE, {a.reps} reps")
        spec = kget("coupled")
        rng = random.Random(1)
        for fam in a.coupled_mpi.split(","):
            results = {m: {"atm": [], "ocn": []} for m in ("native", "bind", "hybrid")}
            for rep in range(a.reps):
                modes = list(results)
                rng.shuffle(modes)
                for mode in modes:
                    argv = [NEARMETAL, "run", "--scheduler", "slurm", "--mpi", fam, "--nodes", "2", "-n", "1", "--",
                            "nm-coupled", "--role", "atm", ":", "-n", "2", "--mode", mode, "--", "nm-coupled",
                            "--role", "ocn"]
                    try:
                        out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
                    except subprocess.TimeoutExpired:
                        print(f"  {fam} {mode}: no result within 120 s (job cancelled)")
                        continue
                    if out.returncode != 0:
                        print(f"  {fam} {mode}: failed: {out.stderr.strip()[-300:]}")
                        continue
                    for r in parse(spec, out.stdout):
                        if r["metric"] == "main_loop_s" and r["params"].get("component") in ("atm", "ocn"):
                            results[mode][r["params"]["component"]].append(r["value"])
            for mode, comp in results.items():
                if comp["atm"]:
                    print(f"  {fam:8s} ocean {mode:7s} main loop: atm {statistics.median(comp['atm']):.4f} s "
                          f"[{min(comp['atm']):.4f}-{max(comp['atm']):.4f}], ocn {statistics.median(comp['ocn']):.4f} s "
                          f"[{min(comp['ocn']):.4f}-{max(comp['ocn']):.4f}]")
    finally:
        cluster.down(dir=d)


if __name__ == "__main__":
    main()
