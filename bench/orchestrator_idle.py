#!/usr/bin/env python3
"""nearmetal's own process while ranks run: how much CPU it takes (getrusage RUSAGE_SELF).

A small real study (native 8-byte latency, both MPIs, `--runs` blocks) is planned and run in
this process through the study's Executor, as `nearmetal study` runs it; per run, this
process's CPU seconds against the run's wall time. The executor blocks in the job's pipes
(Popen.communicate: a selector with the time-out) while ranks run, so what it takes is the
launch's own work (starting nm-supervise, storing the result) — not a polling loop.

Then what contention sampling costs (study/execute/contention.py: two snapshots per run, /proc/stat
and /proc/loadavg), and the pre-check's scan of every process (study/execute/machine_check.py),
each timed over many calls.

usage: bench/orchestrator_idle.py [--runs 8] [--out DIR]
"""

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

STUDY = """\
[study]
name = "idle"
repetitions = {runs}
warmup = 1
seed = 3
[matrix]
mode = ["native"]
mpi = ["openmpi", "mpich"]
[[benchmark]]
kernel = "latency"
args = ["-m", "8:8", "-i", "20000"]
"""


def self_cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def per_call(fn, n):
    """CPU seconds of one call of fn, over n calls."""
    c0 = self_cpu()
    for _ in range(n):
        fn()
    return (self_cpu() - c0) / n


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--out", default="results/bench")
    a = ap.parse_args()
    from nearmetal.study.execute import contention, machine_check, runner
    from nearmetal.study.plan import study_file as config_mod
    from nearmetal.study.execute.executor import Executor

    text = STUDY.format(runs=a.runs)
    cfg = config_mod.parse(text)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        store, sid, _ = runner.open_study(cfg, text, Path(tmp) / "idle.db", resume=False, say=lambda m: None)
        with store:
            ex = Executor(cfg, store, sid, progress=False)
            for row in store.pending(sid):
                c0, t0 = self_cpu(), time.perf_counter()
                status = ex.execute(row)
                rows.append({"variant": row["variant"], "warmup": row["warmup"], "status": status,
                             "wall_s": time.perf_counter() - t0, "self_cpu_s": self_cpu() - c0})
            ex.close()
    snapshot_s = per_call(contention.snapshot, 2000)
    scan_s = per_call(machine_check._proc_cpu, 50)
    measured = [r for r in rows if not r["warmup"]]  # a cell's first run also composes its launch
    walls, cpus = [r["wall_s"] for r in measured], [r["self_cpu_s"] for r in measured]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "orchestrator_idle.json").write_text(json.dumps({"runs": rows, "snapshot_cpu_s": snapshot_s,
                                                            "process_scan_cpu_s": scan_s}, indent=1))
    print(f"{len(measured)} measured runs (+{len(rows) - len(measured)} warm-up runs that compose each cell), "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f} (the machine is shared: other work runs beside)")
    print(f"nearmetal's own CPU per run: median {1000 * statistics.median(cpus):.1f} ms "
          f"[{1000 * min(cpus):.1f}-{1000 * max(cpus):.1f}] over median {statistics.median(walls):.2f} s of run "
          f"({100 * sum(cpus) / sum(walls):.2f}% of one CPU)")
    print(f"contention sampling: {1e6 * snapshot_s:.0f} us CPU per snapshot, two per run "
          f"({2e6 * snapshot_s:.0f} us a run); quiet = true adds two per 0.5 s window waited")
    print(f"pre-check's process scan: {1000 * scan_s:.1f} ms CPU per scan of {len(os.listdir('/proc'))} /proc "
          f"entries, two per study start")
    print(f"statuses: {sorted({r['status'] for r in rows})}; raw: {out / 'orchestrator_idle.json'}", file=sys.stderr)


if __name__ == "__main__":
    main()
