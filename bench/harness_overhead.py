#!/usr/bin/env python3
"""What the study harness adds per run: a 100-run study of a trivial program (the
mpi-info kernel, 2 ranks, native) vs the same 100 launcher invocations in a shell loop.

Per-run cycle time in the study = difference between consecutive runs' start times
(stored in the database); per-invocation time in the loop = the same, measured by the
shell (date +%s%N). Prints medians and the difference.
usage: bench/harness_overhead.py [--runs 100] [--mpi mpich]
"""

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

NEARMETAL = os.path.join(os.path.dirname(sys.executable), "nearmetal")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--mpi", default="mpich")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="nm-harness-"))
    study = tmp / "h.toml"
    study.write_text(f"""[study]
name = "harness"
repetitions = {a.runs}
warmup = 0
seed = 1
[matrix]
mode = ["native"]
mpi = ["{a.mpi}"]
[[benchmark]]
kernel = "mpi-info"
""")
    db = tmp / "h.db"
    t0 = time.perf_counter()
    subprocess.run([NEARMETAL, "study", str(study), "--db", str(db), "--no-progress", "--out", str(tmp)],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    study_total = time.perf_counter() - t0
    con = sqlite3.connect(db)
    rows = con.execute("SELECT started, wall_s, argv_json FROM runs ORDER BY position").fetchall()
    starts = [datetime.fromisoformat(r[0]).timestamp() for r in rows]
    cycles = [b - a_ for a_, b in zip(starts, starts[1:])]
    walls = [r[1] for r in rows]
    argv = json.loads(rows[0][2])
    # the same launcher command, in a shell loop, each invocation timed by the shell
    script = ('for i in $(seq %d); do s=$(date +%%s%%N); "$@" >/dev/null 2>&1; e=$(date +%%s%%N); '
              'echo $((e - s)); done' % a.runs)
    t0 = time.perf_counter()
    out = subprocess.run(["bash", "-c", script, "loop"] + argv, capture_output=True, text=True, check=True)
    loop_total = time.perf_counter() - t0
    loop = [int(x) / 1e9 for x in out.stdout.split()]
    med_cycle, med_loop = statistics.median(cycles), statistics.median(loop)
    print(f"{a.runs} runs of `{' '.join(argv[:3])} ... nm-mpi-info` ({a.mpi}, 2 ranks, native)")
    print(f"  study: total {study_total:.2f} s, per-run cycle median {med_cycle * 1e3:.1f} ms "
          f"(min {min(cycles) * 1e3:.1f}, max {max(cycles) * 1e3:.1f}); launcher wall inside the study median "
          f"{statistics.median(walls) * 1e3:.1f} ms")
    print(f"  shell loop: total {loop_total:.2f} s, per-invocation median {med_loop * 1e3:.1f} ms "
          f"(min {min(loop) * 1e3:.1f}, max {max(loop) * 1e3:.1f})")
    print(f"  harness overhead per run (median cycle - median loop): {(med_cycle - med_loop) * 1e3:.1f} ms; "
          f"totals: {(study_total - loop_total) / a.runs * 1e3:.1f} ms/run including start-up, planning and report")


if __name__ == "__main__":
    main()
