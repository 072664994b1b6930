"""Time per I/O layer of a study's traced runs (`trace = true` benchmarks, study/config/traced.py):
each layer's calls' inclusive time (a layer's time holds the layers it calls, e.g. MPI-IO's
holds its POSIX calls), the mean over the run's traced processes, median over runs."""

import statistics

from ..errors import NearmetalError


def layer_seconds(trace_dir):
    """{layer: mean seconds per process} of one traced run, or None when it cannot be read."""
    from ..trace import LAYERS
    from ..trace.reader import read

    try:
        trace = read(trace_dir)
    except NearmetalError:
        return None
    if not trace.processes:
        return None
    totals = dict.fromkeys(LAYERS, 0.0)
    for proc in trace.processes:
        ev = proc.events
        for i, layer in enumerate(LAYERS):
            mine = ev[ev["layer"] == i]
            totals[layer] += float((mine["end_ns"] - mine["start_ns"]).sum()) / 1e9
    return {k: v / len(trace.processes) for k, v in totals.items() if v > 0}


def by_variant(traces):
    """{variant id: {layer: median over its traced runs}} from analysis["traces"]."""
    runs = {}
    for t in traces or []:
        if not isinstance(t, dict) or t.get("status") != "ok" or not t.get("dir"):
            continue
        seconds = layer_seconds(t["dir"])
        if seconds:
            runs.setdefault(t.get("variant"), []).append(seconds)
    out = {}
    for vid, rows in runs.items():
        layers = {k for r in rows for k in r}
        out[vid] = {k: statistics.median(r.get(k, 0.0) for r in rows) for k in layers}
    return out
