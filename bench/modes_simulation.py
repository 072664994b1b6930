#!/usr/bin/env python3
"""Launches that fall into modes: the mode detector and the mode-aware comparison checked by
simulation, from a study database's own per-cell values.

Part 1, the detector (analysis/modes.py): how often it splits single-group samples (normal,
heavy-tailed, with slow outliers) and how often it finds two real groups.
Part 2, the comparison, as a study runs it (study/plan/sequential.py: randomized blocks, looks at
fixed block counts, Pocock's level per look, the last look final: at max blocks, or where the
setting's time runs out, at the rest of alpha): each replicate takes one baseline cell of the database
and draws both arms' launches from that cell's values (with replacement): A/A. "planted"
multiplies the variant's launches by --effect (1.05: a 5% difference, both modes moved);
"at margin" by 1 + the setting's margin, where "equivalent" is the false verdict (<= 5%).
Cells are counted apart as multi-modal (detected on the cell's own values) or single-group.
Columns: equivalent; false (A/A called slower or faster); found (planted: called slower or
faster in the planted direction: x1.05 is slower for a time, faster for a rate); wrong (the
opposite direction); open; shown (the deciding interval excludes 1); blocks (mean used).
Each setting runs the procedure with the mode-aware comparison (modes on, what studies use)
and without it (modes off, the comparison before), on the same draws.

usage: bench/modes_simulation.py [--db PATH] [--replicates 1000] [--effect 1.05] [--seed 1]
"""

import argparse
import json
import shutil
import sqlite3
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from nearmetal.analysis import mode_compare, modes, stats  # noqa: E402
from nearmetal.study.plan import sequential  # noqa: E402

SETTINGS = {  # name: (min blocks, max blocks, margin, the look its time runs out at: None = max blocks)
    "quickstart (margin 10%, up to 60 blocks)": (5, 60, 0.10, None),
    "quickstart, its time runs out after 18 blocks (as in the database)": (5, 60, 0.10, 18),
    "default (margin 3%, up to 120 blocks)": (5, 120, 0.03, None),
}


def detector_calibration(rng, n_samples):
    rows = []
    for n in (10, 18, 36, 60, 120):
        nulls = {
            "one group: normal, sd 5%": lambda: rng.normal(0, 0.05, n),
            "one group: t(3), scale 5%": lambda: 0.05 * rng.standard_t(3, n),
            "sd 5%, 5% of launches x1.5 (a 2nd group)":
                lambda: rng.normal(0, 0.05, n) + np.log(1.5) * (rng.random(n) < 0.05),
            "one group, skewed: log(gamma(2) + 0.5)": lambda: np.log(rng.gamma(2.0, 1.0, n) + 0.5),
        }
        for name, draw in nulls.items():
            hits = sum(modes.detect(np.exp(draw())) is not None for _ in range(n_samples))
            rows.append((n, name, hits / n_samples))
        for p in (0.1, 0.25, 0.4):
            def two():
                slow = rng.random(n) < p
                return np.exp(rng.normal(0, 0.05, n) + np.log(2.5) * slow)
            hits = sum(modes.detect(two()) is not None for _ in range(n_samples))
            rows.append((n, f"two groups x2.5 apart, {p:.0%} slow", hits / n_samples))
    return rows


def baseline_cells(db):
    """{(benchmark, metric, point, ranks, threads, variant): (values, higher_is_better)} of the
    baseline variants' cells (measured runs only)."""
    con = sqlite3.connect(db)
    cfg = con.execute("select config_toml from studies").fetchone()[0]
    from nearmetal.study.plan import study_file as config_mod
    from nearmetal.study.plan.plan import baseline_of, variant_id

    conf = config_mod.parse(cfg, source="bench")
    rows = con.execute("select r.benchmark, rec.metric, rec.point_json, r.ranks, r.threads, r.variant, r.variant_json,"
                       " rec.unit, rec.value from records rec join runs r on r.id = rec.run_id"
                       " where r.warmup = 0 and r.status = 'ok'").fetchall()
    bases = set()
    for *_, variant, vjson, _, _ in rows:
        bases.add(variant_id(baseline_of(conf, json.loads(vjson))))
    cells = defaultdict(list)
    units = {}
    for bench, metric, point, ranks, threads, variant, _, unit, value in rows:
        if variant in bases:
            cells[(bench, metric, point, ranks, threads, variant)].append(value)
            units[(bench, metric, point, ranks, threads, variant)] = unit
    skip = {"count", "bytes", "byte", "b", "bool", "files", "ranks"}
    return {k: (np.asarray(v, float), stats.direction_for_unit(units[k])) for k, v in cells.items()
            if len(v) >= 5 and min(v) > 0 and units[k].strip().casefold() not in skip}


def simulate(cells, setting, effect, replicates, seed):
    min_n, max_n, margin, ends_at = setting
    planned = sequential.schedule(min_n, max_n)
    alpha = sequential.alpha_per_look(tuple(planned))
    # the study ends at its last look (max_repetitions) or where its time runs out: that look is
    # final (a difference shown is decided), at the rest of alpha in the second case
    looks = [n for n in planned if ends_at is None or n <= ends_at]
    final = (looks[-1], sequential.final_alpha(tuple(looks), tuple(planned)))
    rng = np.random.default_rng(seed)
    keys = sorted(cells)
    out = defaultdict(lambda: defaultdict(int))
    blocks = defaultdict(int)
    for r in range(replicates):
        key = keys[r % len(keys)]
        values, hib = cells[key]
        base = rng.choice(values, max_n)
        var = rng.choice(values, max_n) * effect
        bd, vd = dict(enumerate(base.tolist())), dict(enumerate(var.tolist()))
        # the planted direction: x effect on a time is slower, on a rate (higher is better) faster
        right = None if effect == 1 else ("faster" if (effect > 1) == hib else "slower")
        band = noise_band(values, hib)
        for flag in (True, False):
            c = sequential.decide(bd, vd, looks, alpha, margin, hib, n_boot=200, modes=flag, final=final)
            v = c["verdict"]
            key = v if v in ("equivalent", "inconclusive") else ("false" if right is None else
                                                                  "right" if v == right else "wrong")
            out[flag][key] += 1
            out[(flag, band)][key] += 1
            out[(flag, band)]["n"] += 1
            out[flag]["shown"] += int(c["ci_low"] is not None and (c["ci_low"] > 1 or c["ci_high"] < 1))
            blocks[flag] += c["look"]
    return out, blocks


def noise_band(values, hib):
    """The cell's noise within its modes (sd of the log values rescaled to the best mode)."""
    m = modes.detect(values)
    x = np.log(mode_compare.adjust(values, m, hib)) if m else np.log(values)
    sd = float(np.std(x, ddof=1))
    return "noise <= 4%" if sd <= 0.04 else "noise 4-8%" if sd <= 0.08 else "noise > 8%"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default="/work/shared/data/quickstart-2core.db")
    ap.add_argument("--replicates", type=int, default=1000, help="per cell class and scenario")
    ap.add_argument("--effect", type=float, default=1.05)
    ap.add_argument("--detector-samples", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", choices=("multi-modal", "single"), help="one class of cells only")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    t0 = time.time()
    print(f"Part 1: the detector ({a.detector_samples} samples each): share of samples split into modes")
    for n, what, rate in detector_calibration(rng, a.detector_samples):
        print(f"  n={n:3d}  {what:44s} {rate * 100:5.1f}%")
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "study.db"
        shutil.copy(a.db, db)  # the database is read-only; sqlite may want a journal beside it
        cells = baseline_cells(db)
    modal = {k: v for k, v in cells.items() if modes.detect(v[0]) is not None}
    single = {k: v for k, v in cells.items() if k not in modal}
    print(f"\nPart 2: {len(cells)} baseline cells of {a.db}: {len(modal)} multi-modal, {len(single)} single-group;"
          f" {a.replicates} replicates per class and scenario")
    for sname, setting in SETTINGS.items():
        print(f"\n{sname}")
        print(f"  {'cells':12s} {'truth':9s} {'method':9s} {'equivalent':>10s} {'false':>6s} {'found':>6s}"
              f" {'wrong':>6s} {'open':>6s} {'shown':>6s} {'blocks':>7s}")
        for cname, group in (("multi-modal", modal), ("single", single)):
            if not group or (a.only and a.only != cname):
                continue
            # at the margin: a real difference exactly at it must be called equivalent in <= 5%
            for truth, eff in (("A/A", 1.0), (f"x{a.effect:g}", a.effect), ("at margin", 1 + setting[2])):
                out, blocks = simulate(group, setting, eff, a.replicates, a.seed)
                for flag in (True, False):
                    o, n = out[flag], a.replicates
                    print(f"  {cname:12s} {truth:9s} {'modes on' if flag else 'modes off':9s}"
                          f" {o['equivalent'] / n:10.1%} {o['false'] / n:6.1%} {o['right'] / n:6.1%}"
                          f" {o['wrong'] / n:6.1%} {o['inconclusive'] / n:6.1%} {o['shown'] / n:6.1%}"
                          f" {blocks[flag] / n:7.1f}")
                    for band in ("noise <= 4%", "noise 4-8%", "noise > 8%"):
                        ob = out[(flag, band)]
                        k = ob["n"]
                        if k and flag:
                            print(f"    {band:26s} {k:5d} replicates: equivalent {ob['equivalent'] / k:6.1%},"
                                  f" false {ob['false'] / k:5.1%}, found {ob['right'] / k:6.1%}")
    print(f"\n{time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
