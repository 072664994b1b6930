#!/usr/bin/env python3
"""Replay the budget outlook (study/execute/outlook.py) on a stored quickstart
database at each of its looks, as the runner saw it there: only the runs of the blocks before
the look, the seconds they took, the points still open. Prints, per look, the open points,
how many the outlook projects out of reach (or that it says nothing), and the paragraph it
would say; then how many points the analysis leaves undecided at the study's end, to compare.

usage: bench/outlook_replay.py [--db PATH] [--looks 5,8,12]
"""

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from nearmetal.analysis.analyze import analyze  # noqa: E402
from nearmetal.study.execute import outlook  # noqa: E402
from nearmetal.study.execute.runner import _planned_alpha, outlook_of  # noqa: E402
from nearmetal.study.plan import sequential  # noqa: E402
from nearmetal.study.plan.study_file import builtin_quickstart  # noqa: E402
from nearmetal.study.store.store import Store  # noqa: E402
from modes_replay import record_end  # noqa: E402  (bench/, beside this file)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", default=str(Path(__file__).resolve().parents[2] / "shared/data/quickstart-2core.db"))
    ap.add_argument("--looks", default="5,8,12")
    args = ap.parse_args()
    cfg = builtin_quickstart()[0]
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "study.db"
        shutil.copy(args.db, db)  # the replay writes nothing, but the store may migrate
        with Store(db, what="replay") as store:
            sid = store.study(cfg.study.name)["id"]
            every = store.runs(sid)
            planned = _planned_alpha(store, sid)
            for blocks in (int(x) for x in args.looks.split(",")):
                runs = [r for r in every if r["block"] < blocks]
                spent = sum(r["wall_s"] or 0.0 for r in runs)
                still_open = sequential.open_points(store, sid, cfg, blocks, planned)
                found = outlook_of(cfg, store, sid, runs, blocks, spent, still_open)  # as the runner sees it
                if found is None:
                    print(f"after {blocks} blocks ({spent:.0f} s): {len(still_open)} points open; the outlook says nothing")
                else:
                    print(f"after {blocks} blocks ({spent:.0f} s): {len(still_open)} points open; {found['out']} "
                          f"projected out of reach\n  " + outlook.outlook_text(found, cfg, spent, blocks))
        for line in record_end(db):  # where the study ended, as this version's runner records it
            print(f"resumed: {line}")  # (the end only: a study over says no outlook)
        store = Store(db)
        try:
            result = analyze(store)
        finally:
            store.close()
    points = [p for p in result["points"] if p.get("comparison")]
    undecided = sum(1 for p in points if p["comparison"]["verdict"] == "inconclusive")
    print(f"at the end: {undecided} of {len(points)} compared points undecided")


if __name__ == "__main__":
    main()
