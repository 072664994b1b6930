#!/usr/bin/env python3
"""Restricted run vs full sweep of the OSU-compatible kernels, before and after the warm-up
time floor (docs/kernels-osu.md, "Warm-up"): bw and bibw at 1 MiB, latency at 8 B, read
from a run restricted to that size (-m S:S) and from OSU's default full sweep, natively with
2 ranks, for each host MPI. Interleaved: every configuration once per repetition, in a
shuffled order, so machine drift hits all alike; medians, min-max and ratios.

"before" is the kernel source tree of a git revision (default: the parent of the commit
that added the floor, or HEAD while it is not committed), extracted with `git archive`;
"after" is the working tree's. Both are built with the kernels' own Makefile into a
temporary prefix and started with `nearmetal run --mpi F -n 2 -- PATH ...` (native).

The ratio restricted/full is what the floor is for: 1.00 = a restricted run reads like the
same size in a full sweep (bandwidth: < 1 means the restricted run reads lower; latency:
> 1 means it reads slower). "ratio" is the ratio of the two medians; "paired" the median of
the per-repetition ratios, which cancels machine states that last a repetition or longer
(a shared machine's latency can be bimodal, e.g. 0.18 or 0.68 us for minutes at a time).

usage: bench/osu_warmup.py [--repetitions 10] [--mpi openmpi,mpich] [--tests bw,bibw,latency]
       [--before REV] [--floors MS,...] [--seed N] [--out DIR]
--floors adds "after" configurations with NM_OSU_WARMUP_MS=MS (the floor's override), to
see how long a floor has to be. Writes raw runs to DIR/osu_warmup.json.
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NEARMETAL = [sys.executable, "-m", "nearmetal.cli"]
ROOT = Path(__file__).resolve().parent.parent
CSRC = "src/nearmetal/kernels/csrc"
TESTS = {  # name: (program, size, unit, higher is better)
    "bw": ("nm-bw", 1048576, "MB/s", True),
    "bibw": ("nm-bibw", 1048576, "MB/s", True),
    "latency": ("nm-latency", 8, "us", False),
}


def git(*args):
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout.strip()


def default_before():
    """The parent of the commit that added nm_osu_warmup; HEAD while no commit has it."""
    added = git("log", "--format=%H", "--reverse", "-S", "nm_osu_warmup", "--", f"{CSRC}/common/osu.h").split()
    return f"{added[0]}^" if added else "HEAD"


def build(src, prefix, family, programs):
    env = dict(os.environ)
    for prog in programs:
        subprocess.run(["make", "-s", "-C", str(src), f"MPI={family}", f"PREFIX={prefix}", f"{prefix}/bin/{prog}"],
                       check=True, env=env, capture_output=True)
    return Path(prefix) / "bin"


def value_at(text, size):
    for line in text.splitlines():
        tok = line.split()
        if len(tok) >= 2 and not line.startswith("#") and tok[0] == str(size):
            return float(tok[1])
    raise RuntimeError(f"no row for size {size} in:\n{text}")


def run_once(bindir, family, test, restricted, floor_ms):
    prog, size, _, _ = TESTS[test]
    kargs = ["-m", f"{size}:{size}"] if restricted else []
    env = ["--env", f"NM_OSU_WARMUP_MS={floor_ms}"] if floor_ms is not None else []
    argv = NEARMETAL + ["run", "--mpi", family, "-n", "2", *env, "--", str(bindir / prog), *kargs]
    t0 = time.monotonic()
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    wall = time.monotonic() - t0
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {out.returncode}: {out.stderr.strip()[-400:]}")
    return value_at(out.stdout, size), wall


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repetitions", type=int, default=10)
    ap.add_argument("--mpi", default="openmpi,mpich")
    ap.add_argument("--tests", default="bw,bibw,latency")
    ap.add_argument("--before", default=None, help="git revision of the 'before' kernels (default: see above)")
    ap.add_argument("--floors", default="", help="extra 'after' configurations with NM_OSU_WARMUP_MS=MS,...")
    ap.add_argument("--no-before", action="store_true", help="measure the working tree only")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--out", default="results/bench")
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else int(time.time())
    rng = random.Random(seed)
    families = a.mpi.split(",")
    tests = a.tests.split(",")
    programs = sorted({TESTS[t][0] for t in tests})
    before = a.before or default_before()

    with tempfile.TemporaryDirectory(prefix="nm-osu-warmup-") as tmp:
        tmp = Path(tmp)
        (tmp / "before").mkdir()
        builds = {}  # name: (source dir, NM_OSU_WARMUP_MS or None)
        if not a.no_before:
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", before, CSRC], capture_output=True, check=True)
            subprocess.run(["tar", "-x", "-C", str(tmp / "before")], input=archive.stdout, check=True)
            builds["before"] = (tmp / "before" / CSRC, None)
        builds["after"] = (ROOT / CSRC, None)
        for ms in filter(None, a.floors.split(",")):
            builds[f"after@{int(ms)}ms"] = (ROOT / CSRC, int(ms))
        bins = {}
        for name, (src, _) in builds.items():
            for family in families:
                key = (str(src), family)
                if key not in bins:
                    bins[key] = build(src, tmp / f"prefix-{len(bins)}", family, programs)

        configs = [(f, b, t, r) for f in families for b in builds for t in tests for r in (True, False)]
        runs = []
        for rep in range(a.repetitions):
            order = configs[:]
            rng.shuffle(order)
            for family, b, test, restricted in order:
                src, floor_ms = builds[b]
                v, wall = run_once(bins[(str(src), family)], family, test, restricted, floor_ms)
                mode = "restricted" if restricted else "full"
                runs.append({"repetition": rep, "mpi": family, "build": b, "test": test, "mode": mode,
                             "value": v, "unit": TESTS[test][2], "wall_s": round(wall, 3)})
                print(f"  rep {rep + 1}/{a.repetitions} {family:8s} {b:12s} {test:8s} {mode:10s} {v:10.2f} "
                      f"{TESTS[test][2]:5s} {wall:6.2f} s", file=sys.stderr, flush=True)

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "osu_warmup.json").write_text(json.dumps({"seed": seed, "before": before, "runs": runs}, indent=1))

    def sel(**k):
        return [r for r in runs if all(r[x] == y for x, y in k.items())]

    print(f"\nOSU-compatible kernels, native, 2 ranks, {a.repetitions} interleaved repetitions (seed {seed});"
          f" before = {before}")
    print(f"{'MPI':8s} {'test':16s} {'build':12s} {'restricted':>22s} {'full sweep':>22s} {'ratio':>6s}"
          f" {'paired':>6s} {'wall restr':>10s}")
    for family in families:
        for test in tests:
            _, size, unit, _ = TESTS[test]
            for b in builds:
                cells = []
                for mode in ("restricted", "full"):
                    vals = [r["value"] for r in sel(mpi=family, build=b, test=test, mode=mode)]
                    cells.append((statistics.median(vals), min(vals), max(vals)))
                wall = statistics.median(r["wall_s"] for r in sel(mpi=family, build=b, test=test, mode="restricted"))
                by_rep = {}
                for r in sel(mpi=family, build=b, test=test):
                    by_rep.setdefault(r["repetition"], {})[r["mode"]] = r["value"]
                paired = statistics.median(v["restricted"] / v["full"] for v in by_rep.values())
                fmt = "{:9.2f} ({:.0f}-{:.0f})" if unit == "MB/s" else "{:9.2f} ({:.2f}-{:.2f})"
                print(f"{family:8s} {test + ' ' + str(size) + ' B':16s} {b:12s} {fmt.format(*cells[0]):>22s} "
                      f"{fmt.format(*cells[1]):>22s} {cells[0][0] / cells[1][0]:6.3f} {paired:6.3f} {wall:9.2f}s")
    print(f"\n(bandwidth in MB/s, latency in us: median (min-max)); raw runs: {out / 'osu_warmup.json'}")


if __name__ == "__main__":
    main()
