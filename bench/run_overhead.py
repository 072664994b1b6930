#!/usr/bin/env python3
"""What `nearmetal run` adds over invoking the same launcher command directly.

For each MPI: the launcher argv comes from `nearmetal run --dry-run`; then both are timed
interleaved (nearmetal, direct, nearmetal, ...) for N rounds with 2 ranks of /bin/true.
Discovery is cached by the first call. Prints medians, the difference and the ratio (with
--against also each side's median CPU time: nearmetal's, its launcher's and its ranks').
--against SRC also times another checkout's package (its src/ directory, run by this
interpreter) in the same rounds: before/after figures measured side by side. Both are then
also started the same way (python -c, the package on PYTHONPATH, a home each), so the
difference is the package's alone, not the entry script's or sys.path's.
The order of the runs is shuffled in each round (--seed).
usage: bench/run_overhead.py [--rounds 20] [--against OTHER_CHECKOUT/src] [--seed 1]
"""

import argparse
import compileall
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

NEARMETAL = os.path.join(os.path.dirname(sys.executable), "nearmetal")


def timed(argv, env, cpu=None):
    """Wall seconds of one run; its CPU seconds (the process and everything it waited for:
    launcher and ranks too) appended to `cpu` when given."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=True)
    wall = time.perf_counter() - t
    if cpu is not None:
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--mpi", default="openmpi,mpich,auto",
                    help="'auto': no --mpi, nearmetal picks the MPI (reading the program's ELF, cached per file)")
    ap.add_argument("--against", help="another checkout's src/ directory, timed in the same rounds")
    ap.add_argument("--seed", type=int, default=1, help="the order of the runs within each round")
    a = ap.parse_args()
    true = shutil.which("true")
    other = f"{'this ms':>9s} {'other ms':>9s} {'this-other':>10s}" if a.against else ""
    print(f"{'MPI':8s} {'direct ms':>10s} {'nearmetal ms':>13s} {'added ms':>9s} {'ratio':>6s} {other}")
    for mpi in a.mpi.split(","):
        nm = [NEARMETAL, "run"] + (["--mpi", mpi] if mpi != "auto" else []) + ["-n", "2", "--", true]
        dry = subprocess.run(nm[:2] + ["--dry-run"] + nm[2:], capture_output=True, text=True, check=True)
        lines = [l for l in dry.stdout.splitlines() if l and not l.startswith("#")]
        env = dict(os.environ)
        for l in lines[:-1]:
            k, _, v = l.partition("=")
            env[k] = v
        direct = lines[-1].split()  # nearmetal's argv has no quoting for these plain paths
        by_path = [sys.executable, "-c", "import sys; from nearmetal.cli import main; sys.exit(main())"] + nm[1:]

        def started_alike(src, home):
            # Its own home: the two versions would otherwise invalidate each other's discovery cache.
            return dict(env, PYTHONPATH=os.path.abspath(src), NEARMETAL_HOME=os.path.join(tempfile.gettempdir(), home))

        if a.against:
            this_src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
            this_env, other_env = started_alike(this_src, "nearmetal-bench-this"), started_alike(a.against, "nearmetal-bench-other")
            for src in (this_src, a.against):
                # Fresh bytecode for both trees: under PYTHONDONTWRITEBYTECODE (set in many CI and
                # sandbox images) a module edited since its .pyc is compiled again on every start
                # (run.py: +4 ms), which would be measured as the package's overhead.
                compileall.compile_dir(src, quiet=1)
        timed(nm, env), timed(direct, env)  # warm caches
        if a.against:
            timed(by_path, this_env), timed(by_path, other_env)
        d, n, o, t = [], [], [], []
        # A shuffled order each round: a fixed one gives each kind the same predecessor every
        # time (an Open MPI job right after another leaves the next one slower or faster).
        rng = random.Random(a.seed)
        kinds = [("nm", nm, env, n), ("direct", direct, env, d)]
        if a.against:
            kinds += [("other", by_path, other_env, o), ("this", by_path, this_env, t)]
        cpu = {name: [] for name, _, _, _ in kinds}
        for _ in range(a.rounds):
            for name, argv, e, out in rng.sample(kinds, len(kinds)):
                out.append(timed(argv, e, cpu[name]))
        md, mn = statistics.median(d) * 1e3, statistics.median(n) * 1e3
        line = f"{mpi:8s} {md:10.1f} {mn:13.1f} {mn - md:9.1f} {mn / md:6.2f}"
        if a.against:
            mo, mt = statistics.median(o) * 1e3, statistics.median(t) * 1e3
            line += f" {mt:9.1f} {mo:9.1f} {mt - mo:+10.1f}"
            # CPU time moves less with the machine's noise than wall time does
            ct, co = statistics.median(cpu["this"]) * 1e3, statistics.median(cpu["other"]) * 1e3
            line += f"  CPU ms {ct:.2f} vs {co:.2f} ({ct - co:+.2f})"
        print(line)


if __name__ == "__main__":
    main()
