"""Before a study spends its budget: is this machine busy? (docs/statistics.md, "Before
spending the budget").

A few seconds of sampling before the first run: other processes' CPU (the machine's busy
time from /proc/stat minus nearmetal's own, as study/execute/contention.py measures a run), steal,
the load average, and which processes used the CPU (/proc/PID/stat, the few busiest). A busy
machine (contention.is_disturbed over the window) is said at once, with what would help:

- `quiet = true`: wait, at most quiet_wait seconds, for a quiet machine, then start; still
  busy then: stop before the first run, with the reason and the advice (the runs stay
  planned; --resume starts them later);
- `exclude_disturbed = true`: every run would be left out of the statistics: stop at once;
- otherwise the study starts, marked, and the first look projects whether the margin can be
  reached with the noise it sees (study/execute/budget_check.py).

What was found is kept with the study (the store's meta table, `machine_check:<id>`) and the
report shows it (analysis["machine_check"])."""

import json
import os
import time

from . import contention

PRECHECK_S = 2.0   # the sampling window: a few seconds, before anything else runs
TOP = 5            # processes kept in the record (the sentence names the first three)
MIN_SHOWN = 0.05   # a process below 5% of a CPU over the window is not named
_KEY = "machine_check:{}"


def _proc_cpu(root="/proc"):
    """{pid: (comm, CPU ticks so far)} of every process readable now."""
    out = {}
    for name in os.listdir(root):
        if not name.isdigit():
            continue
        try:
            with open(f"{root}/{name}/stat") as f:
                text = f.read()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        head, _, tail = text.rpartition(")")
        fields = tail.split()
        try:  # after the comm: state is field 3, utime 14 and stime 15 (proc(5)), here 0-based from state
            out[int(name)] = (head.partition("(")[2][:32], int(fields[11]) + int(fields[12]))
        except (IndexError, ValueError):
            continue
    return out


def busiest(before, after, seconds, hz, exclude=()):
    """[{pid, name, cpus}] of the processes that used the most CPU between two _proc_cpu
    readings (cpus: CPUs used on average over `seconds`), busiest first, at most TOP."""
    rows = []
    for pid, (name, ticks) in after.items():
        if pid in exclude or pid not in before or seconds <= 0:
            continue
        cpus = (ticks - before[pid][1]) / hz / seconds
        if cpus >= MIN_SHOWN:
            rows.append({"pid": pid, "name": name, "cpus": round(cpus, 2)})
    return sorted(rows, key=lambda r: -r["cpus"])[:TOP]


def sample(window_s=PRECHECK_S, sleep=time.sleep):
    """How busy the machine is over window_s seconds: {window_s, cpus, others_cpus (CPUs other
    processes used on average), steal_pct, load, busy (contention's rule), top (busiest())};
    None where /proc cannot be read."""
    hz = os.sysconf("SC_CLK_TCK")
    before, procs = contention.snapshot(), _proc_cpu()
    if before is None:
        return None
    sleep(window_s)
    after, procs_after = contention.snapshot(), _proc_cpu()
    if after is None:
        return None
    f = contention.figures(before, after, hz=hz)
    wall = max(f["wall_s"], 1e-9)
    return {"window_s": round(wall, 2), "cpus": f["cpus"], "others_cpus": round(f["others_cpu_s"] / wall, 2),
            "steal_pct": f["steal_pct"], "load": f["load_end"], "busy": bool(f["busy"]),
            "top": busiest(procs, procs_after, wall, hz, exclude={os.getpid()})}


def busy_sentence(m):
    """'the machine is busy: 1.0 of 2 CPUs used by other processes (pid 1234 'stress' 0.98, ...)'."""
    text = f"the machine is busy: {m['others_cpus']:.1f} of {m['cpus']} CPUs used by other processes"
    named = [f"pid {p['pid']} '{p['name']}' {p['cpus']:.2f}" for p in m["top"][:3]]
    if named:
        text += f" ({', '.join(named)})"
    if m["steal_pct"] > contention.STEAL_PCT:
        text += f", and the hypervisor took {m['steal_pct']:.0f}% of the machine (steal)"
    return text


def precheck(cfg, say, take=sample, wait=contention.wait_quiet, clock=time.monotonic):
    """The check before a study's runs: the record kept with the study ({sample, action:
    "start" | "waited" | "stop", waited_s, text}), or None where /proc cannot be read.
    action "stop": the study must not start its runs; text says why and what would help."""
    start = clock()
    m = take()
    if m is None:
        return None
    rec = {"sample": m, "action": "start", "waited_s": 0.0, "text": ""}
    if not m["busy"]:
        return rec
    study = cfg.study
    busy = busy_sentence(m)
    if study.quiet:
        say(f"⚠ study {study.name}: {busy}; waiting at most {study.quiet_wait:g} s for a quiet machine "
            f"(quiet = true)")
        quiet, waited = wait(study.quiet_wait)
        rec["waited_s"] = round(clock() - start, 1)
        if quiet:
            rec.update(action="waited",
                       text=f"{busy}; it was quiet after {rec['waited_s']:.0f} s, the runs started then")
            say(f"⚠ study {study.name}: quiet after {rec['waited_s']:.0f} s; starting")
            return rec
        rec.update(action="stop", text=(
            f"Stopped before the first run: {busy}, still after waiting {study.quiet_wait:g} s (quiet_wait). "
            f"Runs on this machine would be disturbed. What would help: run again when it is quiet "
            f"(`nearmetal study FILE --resume` starts the planned runs), raise quiet_wait to wait longer, or set "
            f"quiet = false to measure on the busy machine with its runs marked."))
    elif study.exclude_disturbed:
        rec.update(action="stop", text=(
            f"Stopped before the first run: {busy}, and exclude_disturbed = true would leave every run taken now "
            f"out of the statistics. What would help: wait for a quiet machine (quiet = true waits at most "
            f"quiet_wait = {study.quiet_wait:g} s before each run), or resume later with --resume."))
    else:
        after = ("; the first look says whether the margin is still reachable" if study.adaptive else
                 "; with fixed repetitions, the answers say how far the noise let them resolve")
        rec["text"] = (f"At the start {busy}: its runs may be disturbed and noisier. What would help: quiet = true "
                       f"(waits at most quiet_wait = {study.quiet_wait:g} s for a quiet machine before each run)"
                       f"{after}.")
    say(f"⚠ study {study.name}: {rec['text']}")
    return rec


def record(store, study_id, **entries):
    """Keep entries (precheck, stop, outlook, elapsed) with the study: merged into its stored record."""
    kept = load(store, study_id) or {}
    kept.update(entries)
    store.set_meta(_KEY.format(study_id), json.dumps(kept, sort_keys=True))


def load(store, study_id):
    """The study's stored machine check, or None (a study run before they were kept)."""
    text = store.meta(_KEY.format(study_id))
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def summary(kept):
    """analysis["machine_check"]: the stored record and the one paragraph the reports print
    (the stop's reason and advice, else the pre-check's warning and the outlook of the look
    that found most open points out of the budget's reach); None when there is nothing to say."""
    if not kept:
        return None
    stop = kept.get("stop") or {}
    text = stop.get("text") or " ".join(t for t in ((kept.get("precheck") or {}).get("text"),
                                                    (kept.get("outlook") or {}).get("text")) if t)
    if not text:
        return None
    return {**kept, "text": text, "stopped": bool(stop)}
