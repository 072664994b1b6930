"""Contention: how busy the machine was while a run ran, from /proc (docs/store.md, run_load).

Per run, sampled just before the job starts and just after it has been reaped:

- load: the 1-minute load average at start and end (/proc/loadavg), for the record only;
- steal: CPU time the hypervisor gave to other guests, in % of all the machine's CPU time
  over the run (/proc/stat, every CPU);
- others: CPU seconds used during the run by processes *outside* it: the machine's
  non-idle CPU time over the run (/proc/stat: user + nice + system + irq + softirq of every
  CPU; guest time is already in user) minus the run's own process tree and nearmetal's
  own process.

The run's tree is measured as the kernel accounts it, not by sampling /proc/<pid>: the job
runs under nm-supervise, whose keeper is a child subreaper that reaps every process of the
job (orphans and daemonized ones included) before the front process exits, so each
process's CPU time is added to its reaper's children time and, level by level, to ours:
getrusage(RUSAGE_CHILDREN) after the front is reaped minus before it started is the whole
tree's CPU time, short-lived processes included (sampling /proc would miss those, and a
process that ended between two samples). Only a process whose parent ignores SIGCHLD
(reaped by the kernel, accounted to no one) escapes it; its CPU time then counts as others'.

**Disturbed** (one rule, `is_disturbed`): others used more than OTHERS_CPUS (a quarter
of one CPU) on average over the run, beyond the counters' rounding (`slack_s`), or steal
took more than STEAL_PCT % of the machine. The load average is recorded but not part of the rule:
it decays over a minute, so the study's own previous run (2 busy-polling ranks make a
load of 2) would flag the next one.
"""

import os
import resource
import time
from collections import namedtuple

OTHERS_CPUS = 0.25    # others' CPU seconds per second of run (0.25 = a quarter of one CPU)
SLACK_S = 0.05        # CPU seconds of others that never count (kernel threads, a short run's noise)
STEAL_PCT = 5.0       # steal, % of all CPU time of the machine
QUIET_WINDOW_S = 0.5  # the window `wait_quiet` measures the others over

Stat = namedtuple("Stat", "busy steal total cpus")                 # ticks, over all CPUs
Snapshot = namedtuple("Snapshot", "t stat load self_s children_s")  # seconds


def parse_stat(text):
    """/proc/stat's aggregate `cpu` line as Stat (ticks); cpus = the number of `cpuN` lines."""
    busy = steal = total = None
    cpus = 0
    for line in text.splitlines():
        if line.startswith("cpu "):
            f = [int(x) for x in line.split()[1:]]
            f += [0] * (8 - len(f))  # user nice system idle iowait irq softirq steal [guest guest_nice]
            user, nice, system, idle, iowait, irq, softirq, steal = f[:8]
            busy = user + nice + system + irq + softirq
            total = busy + idle + iowait + steal
        elif line.startswith("cpu") and line[3:4].isdigit():
            cpus += 1
    if busy is None:
        raise ValueError("no aggregate 'cpu' line in /proc/stat")
    return Stat(busy, steal, total, cpus or 1)


def parse_loadavg(text):
    """The 1-minute load average from /proc/loadavg's text."""
    return float(text.split()[0])


def _read(path):
    with open(path) as f:
        return f.read()


def _cpu_s(who):
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def snapshot(read=_read):
    """The machine's counters now (ticks), the load average, and this process's own and its
    reaped children's CPU seconds. None where /proc cannot be read (not Linux)."""
    try:
        stat, load = parse_stat(read("/proc/stat")), parse_loadavg(read("/proc/loadavg"))
    except (OSError, ValueError, IndexError):
        return None
    return Snapshot(time.monotonic(), stat, load, _cpu_s(resource.RUSAGE_SELF), _cpu_s(resource.RUSAGE_CHILDREN))


def slack_s(cpus, hz=100):
    """What others' CPU time may be off by without anyone disturbing: SLACK_S plus three
    standard deviations of /proc/stat's rounding. Each CPU's busy time advances a tick at a
    time, so at either end of the run up to a tick per CPU is not counted yet: the
    difference is off by up to a tick per CPU, sd sqrt(cpus / 3) ticks (2 CPUs: 8 ms)."""
    return SLACK_S + 3 * (max(cpus, 1) / 3) ** 0.5 / hz


def is_disturbed(others_cpu_s, wall_s, steal_pct, cpus=1, hz=100):
    """THE rule: others used more than OTHERS_CPUS on average over the run (beyond
    slack_s), or steal exceeded STEAL_PCT % of the machine."""
    return (others_cpu_s > OTHERS_CPUS * max(wall_s, 0.0) + slack_s(cpus, hz)) or steal_pct > STEAL_PCT


def figures(before, after, hz=None):
    """What the store keeps of one run (run_load's columns) from two snapshots taken around
    it: load_start, load_end, steal_pct, others_cpu_s, own_cpu_s, cpus, busy (1/0), wall_s."""
    hz = hz or os.sysconf("SC_CLK_TCK")
    s0, s1 = before.stat, after.stat
    total = s1.total - s0.total
    steal_pct = 100.0 * (s1.steal - s0.steal) / total if total > 0 else 0.0
    own = after.children_s - before.children_s
    mine = after.self_s - before.self_s
    others = max(0.0, (s1.busy - s0.busy) / hz - own - mine)
    wall = after.t - before.t
    return {"load_start": before.load, "load_end": after.load, "steal_pct": round(steal_pct, 3),
            "others_cpu_s": round(others, 4), "own_cpu_s": round(own, 4), "cpus": s1.cpus,
            "busy": int(is_disturbed(others, wall, steal_pct, s1.cpus, hz)), "wall_s": round(wall, 4)}


def wait_quiet(limit_s, window_s=QUIET_WINDOW_S, take=snapshot, sleep=time.sleep, clock=time.monotonic):
    """Wait, at most about limit_s seconds, until the machine is quiet: others' CPU over one
    window of window_s is not disturbed by the rule above. (quiet, seconds waited); quiet is
    None where /proc cannot be read."""
    start = clock()
    while True:
        before = take()
        if before is None:
            return None, 0.0
        sleep(window_s)
        after = take()
        if after is None:
            return None, clock() - start
        f = figures(before, after)
        if not f["busy"]:
            return True, clock() - start
        if clock() - start + window_s > limit_s:
            return False, clock() - start


# -- per study (analysis) ------------------------------------------------------------------
def summary(rows, excluded=False):
    """analysis["contention"] from the study's run_load rows (joined with their run: variant,
    benchmark, ranks, threads, warmup, wall_s); None when no run was measured."""
    if not rows:
        return None
    bad = [r for r in rows if r["busy"]]
    by_variant = {}
    for r in bad:
        by_variant[r["variant"]] = by_variant.get(r["variant"], 0) + 1

    def rate(r):
        return r["others_cpu_s"] / r["wall_s"] if r["wall_s"] else 0.0

    out = {"runs": len(rows), "disturbed": len(bad), "excluded": bool(excluded and bad),
           "cpus": max(r["cpus"] or 0 for r in rows),
           "max_load": max(max(r["load_start"] or 0, r["load_end"] or 0) for r in rows),
           "max_others_pct": round(100 * max(rate(r) for r in rows), 1),
           "max_steal_pct": max(r["steal_pct"] or 0 for r in rows),
           "not_quiet": sum(1 for r in rows if r["quiet"] == 0),
           "by_variant": by_variant,
           "disturbed_runs": sorted(r["run_key"] for r in bad)}
    out["text"] = describe(out)
    return out


def describe(s):
    """The report's sentence for a contention summary (empty when nothing was disturbed)."""
    if not s or not s["disturbed"]:
        return ""
    text = (f"{s['disturbed']} of {s['runs']} measured runs were taken on a busy machine (load up to "
            f"{s['max_load']:.1f} on {s['cpus']} CPUs, other processes used up to {s['max_others_pct']:.0f}% CPU")
    if s["max_steal_pct"] > STEAL_PCT:
        text += f", steal up to {s['max_steal_pct']:.0f}%"
    text += ")"
    text += (": they are left out of the statistics (exclude_disturbed = true)" if s["excluded"]
             else ": their points are marked ⚠")
    if s["not_quiet"]:
        text += f"; {s['not_quiet']} started before the machine was quiet (quiet_wait ran out)"
    return text + "."
