#!/usr/bin/env python3
"""A real A/A study, repeated: two named variants of identical settings (hybrid, Charliecloud,
MPICH), bw 1 KiB-1 MiB and latency 1 B-64 KiB, adaptive repetitions with their defaults.
Every verdict other than `equivalent` or `inconclusive` is a false one.

usage: bench/aa_study.py [--studies 5] [--out results/bench/aa]
prints per study: wall time, blocks, points equivalent / slower / faster / inconclusive, and
the aggregate answer; then the totals.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

NEARMETAL = os.path.join(os.path.dirname(sys.executable), "nearmetal")
STUDY = """
[study]
name = "aa-{i}"
warmup = 1
[baseline]
variant = "first"
[[variant]]
name = "first"
mode = "hybrid"
mpi = "mpich"
[[variant]]
name = "second"
mode = "hybrid"
mpi = "mpich"
[[benchmark]]
kernel = "bw"
args = ["-m", "1024:1048576"]
[[benchmark]]
kernel = "latency"
args = ["-m", "1:65536"]
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--studies", type=int, default=5)
    ap.add_argument("--out", default="results/bench/aa")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    total = Counter()
    for i in range(a.studies):
        f, db = out / f"aa-{i}.toml", out / f"aa-{i}.db"
        f.write_text(STUDY.format(i=i))
        for p in out.glob(f"aa-{i}.db*"):
            p.unlink()
        t0 = time.monotonic()
        subprocess.run([NEARMETAL, "study", str(f), "--db", str(db), "--no-progress", "--out", str(out / f"aa-{i}")],
                       check=True, capture_output=True)
        wall = time.monotonic() - t0
        subprocess.run([NEARMETAL, "report", "--db", str(db), "--format", "json", "--out", str(out / f"aa-{i}")],
                       check=True, capture_output=True)
        analysis = json.loads((out / f"aa-{i}" / "analysis.json").read_text())
        verdicts = Counter(p["comparison"]["verdict"] for p in analysis["points"] if p.get("comparison"))
        total.update(verdicts)
        n = sum(verdicts.values())
        at_final = sum(1 for p in analysis["points"] if (p.get("comparison") or {}).get("final")
                       and p["comparison"]["verdict"] != "inconclusive")
        headline = " ".join(analysis.get("answers", {}).get("headline", []))
        print(f"study {i}: {wall:5.0f} s, {analysis['sequential']['blocks']} blocks, {n} points: "
              + ", ".join(f"{k} {verdicts[k]}" for k in ("equivalent", "slower", "faster", "inconclusive"))
              + f" ({at_final} decided at the final look)\n  {headline}", flush=True)
    n = sum(total.values())
    print(f"all {a.studies} studies, {n} points: " + ", ".join(f"{k} {total[k] / n:.1%}" for k in
                                                               ("equivalent", "slower", "faster", "inconclusive")))


if __name__ == "__main__":
    main()
