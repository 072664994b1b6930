#!/usr/bin/env python3
"""What the evidence library costs the ranks it records (issue 29: the MPI profile ≤ 1% on
allreduce at ≥ 1 KiB; for 8-byte latency, the nanoseconds added per wrapped call).

Each case runs the same program, arguments and ranks with the evidence library preloaded
(`nearmetal run --evidence DIR`: the ranks note their facts at load, time every wrapped MPI
call and write one file at MPI_Finalize) and without (`nearmetal run`), in interleaved pairs
whose order is drawn by a seeded RNG (one warm-up pair first, discarded). The figure is the
program's own timer: nearmetal's start-up is not the profile's cost.

- `allreduce-openmpi`, `allreduce-mpich`: nm-allreduce -m 1024:4096 (2 ranks), the latency at
  1 KiB and 4 KiB: each iteration is one wrapped MPI_Allreduce plus one wrapped MPI_Barrier.
- `latency-openmpi`, `latency-mpich`: nm-latency -m 8:8 (2 ranks): the one-way latency of an
  8-byte message, on whose path lie two wrapped calls (the sender's MPI_Send, the receiver's
  MPI_Recv); ns per wrapped call = (profiled - unprofiled) / 2.
- `percall-openmpi`, `percall-mpich`: one rank calls MPI_Allreduce of 8 bytes on
  MPI_COMM_SELF --calls times (built here with mpicc), timed in the thread's CPU time: the
  direct cost of one wrapped call in ns, with the least noise (no partner, no network, and
  time other processes take from the CPU is not counted).

- `blocks-openmpi`, `blocks-mpich`: the cost on allreduce at 1 KiB and 4 KiB (2 ranks) measured
  inside one launch: blocks of 200 MPI_Allreduce calls (through the profile's wrapper when the
  library is loaded) alternate with blocks of 200 PMPI_Allreduce calls (straight into the MPI
  library, never wrapped), 50 of each (built here with mpicc). Both halves share the launch's
  placement and the machine's mode at that moment, which launch-to-launch pairs cannot: on a
  2-core VM the latency of a launch falls into modes several % apart, more than the 1% to be
  resolved. The figure per launch is wrapped / direct; the unprofiled launch of each pair is the
  control (both halves call the same library function: its ratio must be 1), and a third launch
  preloads a bare forwarder instead (MPI_Allreduce → the next definition, nothing else: the
  least any PMPI-style profile costs, the floor the profile is compared with).
- `gromacs-openmpi`: a real application through its preset: Debian's gmx_mpi mdrun on a water
  box (221 SPC/E waters, --gromacs-steps steps, 2 ranks, 1 OpenMP thread each), as
  `nearmetal bench --command --preset gromacs`; its figures of merit ns/day and mdrun's wall time.
- `startup-openmpi`, `startup-mpich`: nm-startup (2 ranks): the mean over ranks of the time
  from the launch to main and to the end of MPI_Init, and the CPU time to main: what the
  library's loading and its constructor (the /proc and cgroup files it reads) add to a start.

--binding core (the default) binds each rank to a core of its own on both sides, as a study
does by default (Open MPI binds 2 ranks to cores by itself; MPICH's hydra is told through
HYDRA_BINDING): unbound MPICH ranks on a 2-core machine move between cores and stretch the
pairs' spread (1 KiB allreduce, 41 pairs: 1.033 [1.015, 1.099] unbound, 1.001 [0.981, 1.024]
bound). --binding none leaves them to the kernel.

--clock monotonic runs the profiled side with NM_EVIDENCE_CLOCK=monotonic (two clock_gettime
readings per call instead of the TSC's two rdtsc).

The machine may be shared (other processes): each pair records the CPU-seconds others used
during it (busy time in /proc/stat minus this script's children's), printed with the result.
Per case: the median of the per-pair profiled/unprofiled ratios with a percentile bootstrap
95% CI (2000 resamples, numpy, seed 0), the medians of both, and the added ns per call.

usage: bench/evidence_cost.py [--pairs 11] [--seed 1] [--cases allreduce-openmpi,...] [--calls 200000]
                              [--clock tsc|monotonic] [--binding core|none] [--json FILE]
"""

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile

import numpy as np

NEARMETAL = os.path.join(os.path.dirname(sys.executable), "nearmetal")
CASES = ("allreduce-openmpi", "allreduce-mpich", "blocks-openmpi", "blocks-mpich", "latency-openmpi", "latency-mpich", "percall-openmpi",
         "percall-mpich", "startup-openmpi", "startup-mpich", "gromacs-openmpi")
PERCALL_C = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
/* this thread's CPU time: what other processes on a busy machine take is not counted */
static double cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    long n = atol(argv[1]);
    double x = 1, y = 0;
    for (long i = 0; i < n / 10; i++) MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_SELF); /* warm-up */
    double t0 = cpu_ns();
    for (long i = 0; i < n; i++) MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_SELF);
    double t1 = cpu_ns();
    printf("ns_per_call %.3f\n", (t1 - t0) / n);
    MPI_Finalize();
    return y == 1 ? 0 : 1;
}
"""
BLOCKS_C = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
/* blocks of MPI_Allreduce (the profile's wrapper when it is preloaded) and of PMPI_Allreduce
   (never wrapped) alternated in one launch; the order within a block pair alternates too */
int main(int argc, char **argv)
{
    static float s[1024], r[1024];
    const int sizes[] = {1024, 4096}, blocks = 50, iters = 200;
    int rank, size;
    MPI_Init(&argc, &argv);
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int k = 0; k < 2; k++) {
        int count = sizes[k] / (int)sizeof(float);
        double t[2] = {0, 0}, sum[2];
        for (int b = -2; b < blocks; b++) /* two warm-up block pairs */
            for (int j = 0; j < 2; j++) {
                int wrapped = (b + j) & 1;
                PMPI_Barrier(MPI_COMM_WORLD);
                double t0 = PMPI_Wtime();
                for (int i = 0; i < iters; i++)
                    if (wrapped)
                        MPI_Allreduce(s, r, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                    else
                        PMPI_Allreduce(s, r, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                if (b >= 0) t[wrapped] += PMPI_Wtime() - t0;
            }
        PMPI_Reduce(t, sum, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD); /* the ranks' mean */
        if (rank == 0)
            printf("direct_us_%d %.5f\nwrapped_us_%d %.5f\n", sizes[k], sum[0] / size / blocks / iters * 1e6,
                   sizes[k], sum[1] / size / blocks / iters * 1e6);
    }
    MPI_Finalize();
    return 0;
}
"""


FORWARDER_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
typedef long (*fn)(long, long, long, long, long, long);
/* MPI_Allreduce's 6 arguments, passed on to the next definition: an interposer doing nothing */
long MPI_Allreduce(long a, long b, long c, long d, long e, long f)
{
    static fn real;
    if (!real) real = (fn)dlsym(RTLD_NEXT, "MPI_Allreduce");
    return real(a, b, c, d, e, f);
}
"""


def _compiled(source, name, scratch, compiler, flags=(), libs=()):
    """scratch/NAME compiled from `source` by `compiler` -O2 (once: a later call finds it)."""
    src, out = os.path.join(scratch, f"{name}.c"), os.path.join(scratch, name)
    if not os.path.exists(out):
        with open(src, "w") as f:
            f.write(source)
        subprocess.run([compiler, "-O2", *flags, "-o", out, src, *libs], check=True)
    return out


def forwarder(scratch):
    """The bare forwarder's shared library."""
    return _compiled(FORWARDER_C, "forwarder.so", scratch, "cc", ("-shared", "-fPIC"), ("-ldl",))


def program(case, a, scratch):
    from nearmetal.kernels.build import host_bin

    kind, family = case.split("-")
    if kind == "allreduce":
        return family, 2, [os.path.join(host_bin(family), "nm-allreduce"), "-m", "1024:4096", "-i", "5000", "-x", "500"]
    if kind == "latency":
        return family, 2, [os.path.join(host_bin(family), "nm-latency"), "-m", "8:8", "-i", "20000", "-x", "2000"]
    if kind == "startup":
        return family, 2, [os.path.join(host_bin(family), "nm-startup")]
    if kind == "gromacs":  # Debian's gmx_mpi (Open MPI) through its preset: tests/app_inputs.py's water box
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
        from app_inputs import gromacs_tpr

        tpr = gromacs_tpr(os.path.join(scratch, "gromacs"), nsteps=a.gromacs_steps)
        return family, 2, ["gmx_mpi", "mdrun", "-s", tpr, "-ntomp", "1"]
    if kind == "blocks":
        return family, 2, [_compiled(BLOCKS_C, f"blocks-{family}", scratch, f"mpicc.{family}")]
    return family, 1, [_compiled(PERCALL_C, f"percall-{family}", scratch, f"mpicc.{family}"), str(a.calls)]


def figures(text):
    """{name: value}: a size's latency (two-column rows) or ns_per_call."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit():
            out[f"lat_{parts[0]}"] = float(parts[1])
        elif len(parts) == 2 and parts[0] == "ns_per_call":
            out["ns_per_call"] = float(parts[1])
        elif len(parts) == 2 and parts[0].startswith(("direct_us_", "wrapped_us_")):
            out[parts[0]] = float(parts[1])
        elif len(parts) == 8 and parts[0] == "mean":  # nm-startup's mean row
            out |= {"to_main_s": float(parts[2]), "cpu_to_main_s": float(parts[3]), "to_after_init_s": float(parts[6])}
    if not out:
        raise RuntimeError(f"no figures in:\n{text}")
    return out


def preset_figures(text):
    """{metric: value} of `nearmetal bench --command --preset P --json`'s records."""
    out = {}
    for line in text.splitlines():
        if line.startswith("{") and '"metric"' in line:
            r = json.loads(line)
            out[r["metric"]] = float(r["value"])
    if not out:
        raise RuntimeError(f"no figures of merit in:\n{text}")
    return out


def _preset_of(argv):
    """The preset that reads this program's figures of merit (None: the program prints them)."""
    return "gromacs" if argv[0] == "gmx_mpi" else None


def run(argv, profiled, family, ranks, scratch, clock="tsc", preload=None):
    cmd = [NEARMETAL, "run", "--mpi", family, "-n", str(ranks)]
    if preload:  # the bare forwarder's arm
        cmd += ["--env", f"LD_PRELOAD={preload}"]
    preset = _preset_of(argv)
    if preset:  # its figures of merit read from md.log by the preset, in a working directory of its own
        work = tempfile.mkdtemp(prefix="gmx-", dir=scratch)
        cmd = [NEARMETAL, "bench", "--command", "--preset", preset, "--json", "--workdir", work,
               "--mpi", family, "-n", str(ranks)]
    out = None
    if profiled:
        out = tempfile.mkdtemp(prefix="ev-", dir=scratch)
        cmd += ["--evidence", out] + (["--env", "NM_EVIDENCE_CLOCK=monotonic"] if clock == "monotonic" else [])
    p = subprocess.run(cmd + ["--"] + argv, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    calls = None
    if out:
        files = os.listdir(out)
        if len(files) != ranks:  # the profile really ran: one file per rank
            raise RuntimeError(f"{len(files)} evidence files for {ranks} ranks in {out}")
        calls = max(_profiled_calls(os.path.join(out, f)) for f in files)
        shutil.rmtree(out, ignore_errors=True)
    if preset:
        shutil.rmtree(work, ignore_errors=True)
    found = preset_figures(p.stdout) if preset else figures(p.stdout)
    return found if calls is None else {**found, CALLS: calls}


CALLS = "wrapped_calls"  # a profiled run's figure: the most MPI calls one rank's profile counted, and its wall time


def _profiled_calls(path):
    """(calls, wall seconds) of one rank's evidence file's MPI profile."""
    with open(path) as f:
        prof = json.load(f).get("mpi_profile") or {}
    return (sum(c.get("calls", 0) for c in (prof.get("classes") or {}).values()), prof.get("wall_s") or 0.0)


def busy_s():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def children_s():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def bootstrap_median(x, resamples=2000, seed=0):
    x = np.asarray(x, float)
    rng = np.random.default_rng(seed)
    meds = np.median(x[rng.integers(0, len(x), (resamples, len(x)))], axis=1)
    return float(np.median(x)), float(np.percentile(meds, 2.5)), float(np.percentile(meds, 97.5))


def report_blocks(case, pairs):
    """The in-launch ratio wrapped / direct per size: profiled launches (the cost), launches
    through the bare forwarder (the floor) and unprofiled ones (the control, both halves the
    same function)."""
    sizes = sorted(int(k.rsplit("_", 1)[1]) for k in pairs[0]["plain"] if k.startswith("direct_us_"))
    for size in sizes:
        for side in ("profiled", "forwarder", "plain"):
            direct = np.array([p[side][f"direct_us_{size}"] for p in pairs])
            wrapped = np.array([p[side][f"wrapped_us_{size}"] for p in pairs])
            med, lo, hi = bootstrap_median(wrapped / direct)
            added = np.median(wrapped - direct) * 1000
            print(f"{case:18s} {size:5d} B {side:8s}  direct {np.median(direct):.4g} us  through MPI_Allreduce "
                  f"{np.median(wrapped):.4g} us  ratio median {med:.4f}  95% CI [{lo:.4f}, {hi:.4f}]  "
                  f"added {added:+.1f} ns a call  (n={len(pairs)} launches)", flush=True)


def report(case, pairs, per_call_ns):
    if case.startswith("blocks"):
        return report_blocks(case, pairs)
    keys = sorted(pairs[0]["plain"])
    for k in keys:
        plain = np.array([p["plain"][k] for p in pairs])
        prof = np.array([p["profiled"][k] for p in pairs])
        med, lo, hi = bootstrap_median(prof / plain)
        added = np.median(prof - plain)
        unit = ("ns" if k == "ns_per_call" else "s" if k.endswith(("_s", "_time", "_wall")) else
                "ns/day" if k == "ns_per_day" else "us")
        line = (f"{case:18s} {k:11s} unprofiled {np.median(plain):9.4g} {unit}  profiled {np.median(prof):9.4g} {unit}  "
                f"ratio median {med:.4f}  95% CI [{lo:.4f}, {hi:.4f}]  (n={len(pairs)})")
        if k == "ns_per_call":
            line += f"  added {added:+.1f} ns per wrapped call"
        elif case.startswith("latency"):
            line += f"  added {added * 1000 / 2:+.1f} ns per wrapped call (2 on the one-way path)"
        print(line, flush=True)
    counted = [p["profiled"][CALLS] for p in pairs if CALLS in p["profiled"]]
    if counted:  # what the per-call cost comes to for this program: computed, not measured
        calls, wall = np.median([c for c, _ in counted]), np.median([w for _, w in counted])
        if wall > 0:
            share = calls * per_call_ns * 1e-9 / wall
            print(f"{case:18s} estimate    {calls:.0f} wrapped calls in a rank's {wall:.3g} s: "
                  f"at {per_call_ns:g} ns each (percall) {share:.3%} of the run", flush=True)
    foreign = [p["foreign_cpu_s"] for p in pairs]
    print(f"  CPU-s used by other processes during the pairs: median {np.median(foreign):.2f}, max {max(foreign):.2f}",
          flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=11)
    ap.add_argument("--seed", type=int, default=1, help="the order within each pair")
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma list of: {', '.join(CASES)}")
    ap.add_argument("--calls", type=int, default=200000, help="percall: MPI_Allreduce calls timed")
    ap.add_argument("--gromacs-steps", type=int, default=2000, help="gromacs: MD steps of the water box")
    ap.add_argument("--per-call-ns", type=float, default=13.0,
                    help="the wrapped call's cost (percall's figure) for the estimate printed per case")
    ap.add_argument("--clock", default="tsc", choices=("tsc", "monotonic"), help="the profile's clock (profiled side)")
    ap.add_argument("--binding", default="core", choices=("core", "none"),
                    help="each rank on a core of its own (both sides), or where the kernel puts it")
    ap.add_argument("--json", help="write every pair's figures here")
    a = ap.parse_args()
    # read by the launchers nearmetal run starts (it passes its environment on); "none" said to
    # Open MPI too, which binds 2 ranks to cores by itself
    os.environ.update(HYDRA_BINDING=a.binding, OMPI_MCA_hwloc_base_binding_policy=a.binding)
    rng = random.Random(a.seed)
    scratch = tempfile.mkdtemp(prefix="nm-evidence-cost-")
    raw = {}
    try:
        for case in a.cases.split(","):
            if case not in CASES:
                ap.error(f"unknown case {case}")
            family, ranks, argv = program(case, a, scratch)
            preset = _preset_of(argv)
            how = f"bench --command --preset {preset}" if preset else "run"
            print(f"## {case} (profile clock: {a.clock}, binding: {a.binding}): nearmetal {how} [--evidence DIR] "
                  f"--mpi {family} -n {ranks} -- {' '.join(argv)}", flush=True)
            for profiled in (False, True):  # warm-up: builds, discovery caches, page cache
                run(argv, profiled, family, ranks, scratch, a.clock)
            pairs = []
            for _ in range(a.pairs):
                got, b, c = {}, busy_s(), children_s()
                arms = ["plain", "profiled"] + (["forwarder"] if case.startswith("blocks") else [])
                for arm in rng.sample(arms, len(arms)):
                    got[arm] = run(argv, arm == "profiled", family, ranks, scratch, a.clock,
                                   forwarder(scratch) if arm == "forwarder" else None)
                got["foreign_cpu_s"] = round((busy_s() - b) - (children_s() - c), 3)
                pairs.append(got)
            raw[case] = pairs
            report(case, pairs, a.per_call_ns)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"args": vars(a), "pairs": raw}, f, indent=1)


if __name__ == "__main__":
    main()
