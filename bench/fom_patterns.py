#!/usr/bin/env python3
"""Figure-of-merit patterns on RE2 (apps/linear.py) against Python's re: the time to read a
FOM (the last match) and to check a `success` pattern over program output of several sizes,
ordinary patterns and catastrophic ones. Python's re is left out where it would not end.

usage: bench/fom_patterns.py [--sizes 1,16,64] (MiB)
prints: pattern, output size, RE2 seconds, re seconds (or "skipped: backtracks").
"""

import argparse
import re
import time

from nearmetal.apps import linear

ORDINARY = [("Time per step: ([0-9.eE+-]+) s", "progress"), (r"^Performance:\s+([0-9.]+)", "progress"),
            (r"^\s*PWSCF\s*:\s*([0-9.]+s)\s*CPU", "progress")]
CATASTROPHIC = [r"(a+)+$", r"^(a|aa)+$", r"(\w+\s?)+$"]


def output(kind, size):
    if kind == "progress":  # a log: many progress lines, the summary near the end
        line = "step 12345 Time per step: 1.234e-03 s energy -1.5e+04\n"
        text = line * (size // len(line))
        return text + "Performance:      12.5 ns/day\n     PWSCF        :      1.23s CPU      1.45s WALL\n"
    return "a" * size + "!"


def timed(f):
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1,16,64")
    args = ap.parse_args()
    print(f"{'pattern':40} {'MiB':>4} {'RE2 s':>8} {'re s':>8}")
    for mib in [int(s) for s in args.sizes.split(",")]:
        for pattern, kind in ORDINARY:
            text = output(kind, mib << 20)
            fast = timed(lambda: linear.last(pattern, text))
            slow = timed(lambda: list(re.finditer(pattern, text, re.M))[-1:])
            print(f"{pattern[:40]:40} {mib:4} {fast:8.3f} {slow:8.3f}")
        for pattern in CATASTROPHIC:
            text = output("a", mib << 20)
            fast = timed(lambda: linear.found(pattern, text))
            print(f"{pattern[:40]:40} {mib:4} {fast:8.3f}  skipped: backtracks")


if __name__ == "__main__":
    main()
