"""What a trace says, as one JSON-ready dict: the call-path graph across I/O layers, the
per-rank time of each layer's main write path, counts and bytes per function and file, and
the MPI-IO hints in effect (trace report renders it; docs/trace.md).

The graph follows the MOM5/FMS study's flowcharts (seed 004, Figs. 10-12): a node is a
function of one layer, labelled with the largest per-rank time spent inside it; an edge is
"called from", labelled with the largest per-rank time of the child's calls under that
parent and the number of ranks on that path. The parents come from the tracer (the
innermost traced call of a higher layer on the same thread), not from guesses. Edges that
carry less than `threshold` of the largest node's time are left out and counted.
"""

from collections import defaultdict

import numpy as np

from .reader import LAYERS

ROOT = ("app", "application")
WRITE_WORDS = ("put", "write")
READ_WORDS = ("get", "read")
# sizes that are not data moved: a file's new length (set_size, ftruncate, preallocate), a
# request's result (aio_return, counted at its aio_write/aio_read already)
NOT_DATA = ("set_size", "truncate", "preallocate", "aio_return", "aio_error", "aio_suspend")


def moves(name, words):
    """Whether a function moves data in the direction `words` name (put/write or get/read)."""
    low = name.lower()
    return any(w in low for w in words) and not any(n in low for n in NOT_DATA)
THRESHOLD = 0.01  # call paths under this share of the largest node's time are left out
TIMELINE_MAX = 5000  # events: a short run's per-rank timeline is kept (the HTML draws it)


def _rank_label(proc):
    return proc.rank if proc.rank >= 0 else f"pid {proc.pid}"


def analyze(trace, threshold=THRESHOLD):
    """The trace's analysis dict (docs/trace.md lists its keys)."""
    node_t = defaultdict(lambda: defaultdict(int))    # (layer, fn) -> rank -> ns
    node_n = defaultdict(int)
    node_b = defaultdict(int)
    edge_t = defaultdict(lambda: defaultdict(int))    # (parent node, child node) -> rank -> ns
    edge_n = defaultdict(int)
    files = defaultdict(lambda: defaultdict(lambda: {"calls": 0, "bytes_written": 0, "bytes_read": 0}))
    hints, ranks, dropped, incomplete = {}, [], 0, []
    for proc in trace.processes:
        ev = proc.events
        label = _rank_label(proc)
        ranks.append(label)
        dropped += proc.dropped
        if not proc.complete:
            incomplete.append(label)
        for path, pairs in proc.hints.items():
            if pairs:  # OMPIO answers MPI_File_get_info with no hints at all
                hints.setdefault(path, pairs)
        if not len(ev):
            continue
        names = proc.function_names()
        dur = (ev["end_ns"] - ev["start_ns"]).astype(np.int64)
        index = {int(s): k for k, s in enumerate(ev["seq"])}
        for k in range(len(ev)):
            layer = LAYERS[ev["layer"][k]] if ev["layer"][k] < len(LAYERS) else "?"
            node = (layer, names[k])
            d, size = int(dur[k]), int(ev["size"][k])
            node_t[node][label] += d
            node_n[node] += 1
            if size > 0 and (moves(names[k], WRITE_WORDS) or moves(names[k], READ_WORDS)):
                node_b[node] += size
            parent = index.get(int(ev["parent"][k]))
            if parent is None:
                pnode = ROOT
            else:
                pl = ev["layer"][parent]
                pnode = (LAYERS[pl] if pl < len(LAYERS) else "?", names[parent])
            edge_t[(pnode, node)][label] += d
            edge_n[(pnode, node)] += 1
            path = proc.file_of(ev[k])
            if path:
                f = files[path][layer]
                f["calls"] += 1
                if size > 0 and moves(names[k], WRITE_WORDS):
                    f["bytes_written"] += size
                elif size > 0 and moves(names[k], READ_WORDS):
                    f["bytes_read"] += size
    top = max((max(t.values()) for t in node_t.values()), default=0)
    nodes = [{"layer": layer, "function": fn, "max_rank_s": max(t.values()) / 1e9, "total_s": sum(t.values()) / 1e9,
              "calls": node_n[(layer, fn)], "bytes": node_b[(layer, fn)], "ranks": len(t)}
             for (layer, fn), t in node_t.items()]
    nodes.sort(key=lambda n: (_layer_order(n["layer"]), -n["max_rank_s"], n["function"]))
    edges, omitted = [], 0
    for (p, c), t in edge_t.items():
        if top and max(t.values()) < threshold * top:
            omitted += 1
            continue
        edges.append({"parent": {"layer": p[0], "function": p[1]}, "child": {"layer": c[0], "function": c[1]},
                      "max_rank_s": max(t.values()) / 1e9, "ranks": len(t), "calls": edge_n[(p, c)]})
    edges.sort(key=lambda e: (_layer_order(e["child"]["layer"]), -e["max_rank_s"]))
    return {"directory": trace.directory, "ranks": ranks, "layers": sorted({n["layer"] for n in nodes}, key=_layer_order),
            "threshold": threshold, "nodes": nodes, "edges": edges, "omitted_edges": omitted,
            "write_paths": _write_paths(node_t, node_n, ranks), "files": _files(files), "hints": hints,
            "dropped_events": dropped, "incomplete_ranks": incomplete, "timeline": _timeline(trace)}


def _layer_order(layer):
    return LAYERS.index(layer) if layer in LAYERS else len(LAYERS)


def _write_paths(node_t, node_n, ranks):
    """Per layer, the time each rank spent in the layer's data writes (every put/write function
    of the layer together: a study writing doubles and floats has two netCDF put functions,
    and their MPI-IO writes share one), with the functions named: which ranks write at each
    layer (domain roots, aggregators) and how much longer the layer above takes (the
    aggregation overhead), as in seed 004's Fig. 13."""
    out = []
    for layer in LAYERS:
        fns = sorted((fn for (lay, fn) in node_t if lay == layer and moves(fn, WRITE_WORDS)),
                     key=lambda fn: -sum(node_t[(layer, fn)].values()))
        if not fns:
            continue
        per = {r: sum(node_t[(layer, fn)].get(r, 0) for fn in fns) for r in ranks}
        out.append({"layer": layer, "function": " + ".join(fns), "functions": fns,
                    "calls": sum(node_n[(layer, fn)] for fn in fns),
                    "per_rank_s": [{"rank": r, "s": per[r] / 1e9} for r in ranks],
                    "writing_ranks": sum(1 for r in ranks if per[r] > 0)})
    return out


def _files(files):
    return [{"path": path, "layers": {layer: dict(v) for layer, v in sorted(by.items(), key=lambda kv: _layer_order(kv[0]))}}
            for path, by in sorted(files.items())]


def _timeline(trace):
    """[{rank, layer, function, start_s, end_s}] of a short run (at most TIMELINE_MAX events),
    times from the earliest traced call of the same host (one clock per node); None if longer."""
    procs = [p for p in trace.processes if len(p.events)]
    if not procs or sum(len(p.events) for p in procs) > TIMELINE_MAX:
        return None
    t0 = {}
    for p in procs:
        t0[p.host] = min(t0.get(p.host, int(p.events["start_ns"].min())), int(p.events["start_ns"].min()))
    out = []
    for p in procs:
        names = p.function_names()
        for k, e in enumerate(p.events):
            layer = LAYERS[e["layer"]] if e["layer"] < len(LAYERS) else "?"
            out.append({"rank": _rank_label(p), "layer": layer, "function": names[k],
                        "start_s": (int(e["start_ns"]) - t0[p.host]) / 1e9, "end_s": (int(e["end_ns"]) - t0[p.host]) / 1e9})
    return out
