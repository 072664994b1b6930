#!/usr/bin/env python3
"""The adaptive procedure (study/plan/sequential.py) by simulation: false verdicts on A/A points
and power against a known slowdown, with the looks and levels nearmetal uses.

Each simulated point is a pair of variants measured in the same randomized blocks: a value
is base x exp(block effect + run noise), block effects N(0, sb) shared by both variants of a
block, run noise N(0, s) with a 5% chance of a slow outlier (x(1 + |N(0, 5s)|)): a noisy
shared machine. A/A: the variant has the same distribution; a slowdown multiplies it by
1 + effect. The procedure is run exactly as a study runs it: the first look deciding wins.

usage: bench/sequential_sim.py [--points 400] [--noise 0.02] [--block 0.02] [--effect 0.05] [--max 120]
                               [--margin 0.03]
prints: per scenario the share of points equivalent / slower / faster / inconclusive and the
mean number of blocks used.
"""

import argparse
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from nearmetal.study.plan.sequential import alpha_per_look, decide, ended_looks, final_alpha, schedule  # noqa: E402


def simulate(points, noise, block, effect, min_n=5, max_n=30, margin=0.03, seed=0, n_boot=1000, ends_at=None):
    """ends_at: the blocks where the study's time runs out (None: it ends at max_n): a planned
    look, or between two a shortened final look (runner.extend); the last look taken is final
    (a difference shown is decided), at the rest of alpha when early."""
    rng = np.random.default_rng(seed)
    planned = schedule(min_n, max_n)
    alpha = alpha_per_look(tuple(planned))
    looks = list(ended_looks(planned, ends_at)) if ends_at is not None else planned
    final = (looks[-1], final_alpha(tuple(looks), tuple(planned)))
    verdicts, used = Counter(), []
    for _ in range(points):
        b = rng.normal(0, block, max_n)

        def draw(scale):
            v = np.exp(b + rng.normal(0, noise, max_n)) * scale
            slow = rng.random(max_n) < 0.05
            return v * np.where(slow, 1 + np.abs(rng.normal(0, 5 * noise, max_n)), 1.0)

        base, var = draw(1.0), draw(1.0 + effect)
        r = decide(dict(enumerate(base)), dict(enumerate(var)), looks, alpha, margin, False, n_boot=n_boot,
                   final=final)
        verdicts[r["verdict"]] += 1
        used.append(r["look"])
    return {k: verdicts[k] / points for k in ("equivalent", "slower", "faster", "inconclusive")}, float(np.mean(used))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=400)
    ap.add_argument("--noise", type=float, default=0.02)
    ap.add_argument("--block", type=float, default=0.02)
    ap.add_argument("--effect", type=float, default=0.05)
    ap.add_argument("--max", type=int, default=120, help="max_repetitions (the study default: 120)")
    ap.add_argument("--margin", type=float, default=0.03, help="the equivalence margin (the study default: 0.03)")
    ap.add_argument("--ends-at", type=int, help="the blocks where the study's time runs out, a planned look or "
                    "a shortened one between two (default: --max)")
    a = ap.parse_args()
    if a.ends_at is not None and not 5 <= a.ends_at <= a.max:
        ap.error(f"--ends-at must lie between the first look (5 blocks) and --max ({a.max})")
    looks = schedule(5, a.max)
    taken = ended_looks(looks, a.ends_at) if a.ends_at is not None else tuple(looks)
    print(f"looks {looks}, alpha {alpha_per_look(tuple(looks)):.4g} per look (Pocock), the final look at {taken[-1]} "
          f"blocks at {final_alpha(taken, tuple(looks)):.4g}, margin {a.margin:.0%}, "
          f"run noise {a.noise:.0%}, block effect {a.block:.0%}, {a.points} points each")
    for name, effect in (("A/A", 0.0), ("at the margin", a.margin), (f"slowdown {a.effect:.0%}", a.effect)):
        shares, blocks = simulate(a.points, a.noise, a.block, effect, max_n=a.max, margin=a.margin,
                                  ends_at=a.ends_at)
        print(f"{name:14s} " + "  ".join(f"{k} {v:6.1%}" for k, v in shares.items()) + f"  mean blocks {blocks:.1f}")


if __name__ == "__main__":
    main()
