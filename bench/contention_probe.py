#!/usr/bin/env python3
"""What the contention figures (study/execute/contention.py, the store's run_load) look like: N
native runs of a tiny study without, then with CPU burners of this script's own
(`python -c "while True: pass"`), run through the study executor as `nearmetal study` runs
them; one line per run, then the medians per condition.

usage: bench/contention_probe.py [--runs 5] [--burners 1] [--mpi mpich] [--ranks 2]
       [--args "-m 8:8 -i 2000"] [--kernel latency] [--out DIR]
Writes every run's figures to DIR/contention_probe.json (DIR: a temporary directory).
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STUDY = """\
[study]
name = "{name}"
repetitions = {runs}
warmup = 0
seed = 1

[matrix]
mode = ["native"]
mpi = ["{mpi}"]
ranks = [{ranks}]

[[benchmark]]
kernel = "{kernel}"
args = {args}
"""


def study(out, name, a):
    from nearmetal.study.plan import study_file as config_mod
    from nearmetal.study.execute import runner
    from nearmetal.study.execute.executor import Executor

    text = STUDY.format(name=name, runs=a.runs, mpi=a.mpi, ranks=a.ranks, kernel=a.kernel,
                        args=json.dumps(shlex.split(a.args)))
    cfg = config_mod.parse(text, source=f"{name}.toml")
    store, sid, _ = runner.open_study(cfg, text, out / f"{name}.db", resume=False, say=lambda m: None)
    with store:
        ex = Executor(cfg, store, sid, progress=False)
        for row in store.pending(sid):
            ex.execute(row)
        rows = store.db.execute("SELECT l.*, r.wall_s, r.status FROM run_load l JOIN runs r ON r.id = l.run_id "
                                "ORDER BY r.position").fetchall()
        return [dict(r) for r in rows]


def show(label, rows):
    for r in rows:
        rate = r["others_cpu_s"] / r["wall_s"] if r["wall_s"] else 0.0
        print(f"{label:14s} wall {r['wall_s']:6.3f} s  run CPU {r['own_cpu_s']:6.3f} s  others {r['others_cpu_s']:6.3f} s "
              f"({100 * rate:4.0f}% CPU)  steal {r['steal_pct']:4.1f}%  load {r['load_start']:.2f}->{r['load_end']:.2f}"
              f"  {'DISTURBED' if r['busy'] else 'quiet'}  [{r['status']}]")


def median(rows, f):
    return statistics.median(f(r) for r in rows) if rows else float("nan")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--burners", type=int, default=1)
    p.add_argument("--mpi", default="mpich")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--kernel", default="latency")
    p.add_argument("--args", default="-m 8:8 -i 2000")
    p.add_argument("--out")
    a = p.parse_args()
    out = Path(a.out or tempfile.mkdtemp(prefix="nm-contention-"))
    out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%H%M%S")
    result = {"cpus": os.cpu_count(), "burners": a.burners, "kernel": a.kernel, "args": a.args}
    result["without"] = without = study(out, f"calm-{stamp}", a)
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(a.burners)]
    try:
        time.sleep(0.3)
        result["with"] = burnt = study(out, f"burnt-{stamp}", a)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    from nearmetal.study.execute.contention import OTHERS_CPUS, STEAL_PCT, slack_s

    print(f"{a.kernel} {a.args}, {a.ranks} ranks ({a.mpi}), {os.cpu_count()} CPUs; disturbed = others > "
          f"{100 * OTHERS_CPUS:.0f}% of one CPU over the run (+{slack_s(os.cpu_count() or 1) * 1000:.0f} ms) "
          f"or steal > {STEAL_PCT:g}%")
    show("no burner", without)
    show(f"{a.burners} burner(s)", burnt)
    for label, rows in (("no burner", without), (f"{a.burners} burner(s)", burnt)):
        print(f"{label:14s} median: others {100 * median(rows, lambda r: r['others_cpu_s'] / r['wall_s']):.0f}% CPU, "
              f"run CPU {median(rows, lambda r: r['own_cpu_s']):.3f} s, wall {median(rows, lambda r: r['wall_s']):.3f} s;"
              f" disturbed {sum(r['busy'] for r in rows)} of {len(rows)}")
    (out / "contention_probe.json").write_text(json.dumps(result, indent=1))
    print(f"raw: {out / 'contention_probe.json'}")


if __name__ == "__main__":
    main()
