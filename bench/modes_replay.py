#!/usr/bin/env python3
"""Replay a stored study's analysis with and without the mode-aware comparison: how many of
its compared points are decided, and whether any decided point contradicts what all of that
cell's runs show.

"Contradicts" (cost ratio c = variant / baseline for a time, baseline / variant for a rate, so
c > 1 is always worse; m the study's margin):
  paired   equivalent while every block's c lies outside [1 - m, 1 + m];
           slower while every block's c < 1 (each variant run better than its block's
           baseline run); faster while every block's c > 1;
  by mode  (points with modes) equivalent while in every mode both groups have >= 2 launches
           in and the medians' c lies beyond the margin on the same side; slower while the
           variant's median is better in every such mode and its share of slow launches is not
           higher (faster: the mirror image).
All blocks of the cell are used, not only those of the deciding look.

First the study is resumed as this version would resume it (runner.extend: it plans no run
when the study is over, and records where and why it ended, so the analysis decides the
points still open at that final look); a database stored before that record existed gets it
here.

--margin M replays the same runs at another equivalence margin (a fraction): what a wider
margin would decide of them. A lower bound for a study run at that margin, whose looks would
have closed points earlier and given the open ones more blocks.

usage: bench/modes_replay.py [--db PATH] [--show-open] [--ended-at BLOCKS] [--margin M]
"""

import argparse
import functools
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from nearmetal.analysis import modes  # noqa: E402
from nearmetal.study.plan import sequential  # noqa: E402
from nearmetal.analysis.analyze import analyze  # noqa: E402
from nearmetal.study.store.store import Store  # noqa: E402


def _index(points):
    return {(p["benchmark"], p["metric"], repr(sorted(p["point"].items())), p["ranks"], p["threads"], p["variant"]): p
            for p in points}


def contradictions(p, base, margin):
    """The names of the rules above that a decided point breaks."""
    c, hib = p["comparison"], p["higher_is_better"]
    v = c["verdict"]
    if v == "inconclusive":
        return []
    bmap = dict(zip(map(repr, base["blocks"]), base["values"]))
    pairs = [(bmap[repr(b)], x) for b, x in zip(p["blocks"], p["values"]) if repr(b) in bmap]
    out = []
    if pairs and all(b > 0 and x > 0 for b, x in pairs):
        cost = np.asarray([(b / x) if hib else (x / b) for b, x in pairs])
        if v == "equivalent" and np.all((cost < 1 - margin) | (cost > 1 + margin)):
            out.append("paired: equivalent, every block outside the margin")
        if v == "slower" and np.all(cost < 1):
            out.append("paired: slower, every block better")
        if v == "faster" and np.all(cost > 1):
            out.append("paired: faster, every block worse")
    m = modes.detect(base["values"] + p["values"])
    if m is not None:
        ib, iv = modes.assign(base["values"], m), modes.assign(p["values"], m)
        bv, vv = np.asarray(base["values"]), np.asarray(p["values"])
        costs = []
        for j in range(len(m["locations"])):
            if np.sum(ib == j) >= 2 and np.sum(iv == j) >= 2:
                r = np.median(vv[iv == j]) / np.median(bv[ib == j])
                costs.append(1 / r if hib else r)
        best = len(m["locations"]) - 1 if hib else 0
        sb, sv = np.mean(ib != best), np.mean(iv != best)
        if costs:
            costs = np.asarray(costs)
            if v == "equivalent" and (np.all(costs > 1 + margin) or np.all(costs < 1 - margin)):
                out.append("by mode: equivalent, every mode beyond the margin")
            if v == "slower" and np.all(costs < 1) and sv <= sb:
                out.append("by mode: slower, every mode better and no more slow launches")
            if v == "faster" and np.all(costs > 1) and sv >= sb:
                out.append("by mode: faster, every mode worse and no fewer slow launches")
    return out


def cut_at(db, blocks):
    """Leave out the runs of the blocks from `blocks` on, and record that max_time ended the
    study there (the runner's record, sequential.record_end)."""
    import sqlite3

    from nearmetal.study.plan.sequential import record_end as record

    con = sqlite3.connect(db)
    with con:
        con.execute("DELETE FROM records WHERE run_id IN (SELECT id FROM runs WHERE block >= ?)", (blocks,))
        for table in ("run_evidence", "run_load"):
            con.execute(f"DELETE FROM {table} WHERE run_id IN (SELECT id FROM runs WHERE block >= ?)", (blocks,))
        con.execute("DELETE FROM runs WHERE block >= ?", (blocks,))
    con.close()
    store = Store(db)
    try:
        for row in store.studies():
            record(store, row["id"], blocks, "max_time")
    finally:
        store.close()


def record_end(db):
    """What `nearmetal study --resume` of this version does first with a finished study: the
    runner's look (extend) finds nothing to plan and keeps where and why the study ended. A
    database stored before the runner recorded that (quickstart-2core.db) gets the end its
    runner took: every point decided, max_repetitions, or else max_time (that runner took no
    shortened final look, so a resume would now plan one with the time it left)."""
    from nearmetal.study.config.config import validated
    from nearmetal.study.execute.runner import _planned_alpha, extend
    from nearmetal.study.plan.sequential import blocks_measured, looks_of, open_points, recorded_end

    store = Store(db)
    try:
        said = []
        for row in store.studies():
            cfg = validated(row["config_toml"], row["name"])
            blocks = blocks_measured(store.runs(row["id"]))
            if recorded_end(store, row["id"]) is None and cfg.study.adaptive:
                looks, _ = looks_of(cfg.study)
                done = not open_points(store, row["id"], cfg, blocks, _planned_alpha(store, row["id"]))
                reason = "decided" if done else "max_repetitions" if blocks >= looks[-1] else "max_time"
                sequential.record_end(store, row["id"], blocks, reason)
                said.append(f"stored before ends were recorded: ended after {blocks} blocks ({reason})")
            added = extend(cfg, store, row["id"], say=said.append)
            if added:
                raise SystemExit(f"{db}: study {row['name']} is not finished ({added} runs would be planned)")
        return said
    finally:
        store.close()


def replay(db, use_modes):
    orig = sequential.decide
    sequential.decide = functools.partial(orig, modes=use_modes)
    try:
        t = time.time()
        a = analyze(Store(db))
        return a, time.time() - t
    finally:
        sequential.decide = orig


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default="/work/shared/data/quickstart-2core.db")
    ap.add_argument("--show-open", action="store_true", help="list the points left open")
    ap.add_argument("--ended-at", type=int, metavar="BLOCKS",
                    help="replay as if the time had run out after these blocks (a look the study took): the runs "
                         "of later blocks are left out and the study ended there, as it did before the shortened "
                         "final look")
    ap.add_argument("--margin", type=float, metavar="M",
                    help="replay at this equivalence margin (0 < M < 1) instead of the study's")
    a = ap.parse_args()
    if a.margin is not None and not 0 < a.margin < 1:
        ap.error("--margin is a fraction between 0 and 1, e.g. 0.15")
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "study.db"
        shutil.copy(a.db, db)  # the database is read-only; sqlite may want a journal beside it
        if a.ended_at is not None:
            cut_at(db, a.ended_at)
        for line in record_end(db):
            print(f"resumed: {line}")
        if a.margin is not None:  # after the end is recorded: the study's own margin decided where it ended
            import sqlite3

            with sqlite3.connect(db) as con:
                con.execute("UPDATE studies SET margin = ?", (a.margin,))
            print(f"replayed at the margin ±{a.margin * 100:g}%")
        runs = None
        for use in (False, True):
            an, secs = replay(db, use)
            runs = an["runs"]["total"]
            margin = an["study"]["margin"]
            idx = _index(an["points"])
            pts = [p for p in an["points"] if p["comparison"]]
            verdicts = Counter(p["comparison"]["verdict"] for p in pts)
            decided = sum(n for v, n in verdicts.items() if v != "inconclusive")
            modal = [p for p in pts if p["comparison"].get("modes")]
            bad = Counter()
            for p in pts:
                base = idx[(p["benchmark"], p["metric"], repr(sorted(p["point"].items())), p["ranks"], p["threads"],
                            p["baseline"])]
                for why in contradictions(p, base, margin):
                    bad[why] += 1
            ans = an["answers"]
            vd = sum(e["verdict"] != "inconclusive" for e in ans["by_variant"])
            bd = sum(e["verdict"] != "inconclusive" for e in ans["by_benchmark"])
            print(f"modes {'on ' if use else 'off'}: {decided} of {len(pts)} compared points decided"
                  f" ({decided / len(pts):.1%}): {dict(verdicts)}; analysis {secs:.1f} s")
            if use:
                mv = Counter(p["comparison"]["verdict"] for p in modal)
                by = Counter(p["comparison"]["modes"]["decided_by"] for p in modal)
                print(f"  {len(modal)} points compared by mode: {dict(mv)}; decided by {dict(by)}")
            print(f"  answers decided: {vd} of {len(ans['by_variant'])} variants,"
                  f" {bd} of {len(ans['by_benchmark'])} variant x benchmark")
            print(f"  contradictions: {sum(bad.values())}" + (f" {dict(bad)}" if bad else ""))
            if use and a.show_open:
                for p in pts:
                    c = p["comparison"]
                    if c["verdict"] == "inconclusive":
                        extra = (" " + c["modes"]["text"]) if c.get("modes") else ""
                        print(f"    open: {p['benchmark']} {p['metric']} {p['point']} {p['variant']}"
                              f" [{c['ci_low']:.3f}, {c['ci_high']:.3f}]{extra}")
            if use:
                for e in ans["headline"]:
                    print("  | " + e)
        print(f"{runs} runs in {a.db}")


if __name__ == "__main__":
    main()
