"""`trace report` formats: JSON (the analysis dict as is), Markdown tables, and one
self-contained HTML page with the call-path graph drawn by Graphviz (`dot -Tsvg`, Debian's
graphviz) inline, rendered from the report's templates (report/templates/trace.html). Renders
only: the numbers come from callpath.analyze."""

import html
import json
import shutil
import subprocess

from ..errors import NearmetalError
from . import COLOURS

FORMATS = ("html", "md", "json")
MAX_GRAPH_EDGES, DOT_TIMEOUT_S = 2000, 120
LAYER_COLOURS = {"app": "#eeeeee", **COLOURS}  # the application, then each layer's (csrc/nm-layers.def)


def _t(s):
    """Seconds, readably: 1.23 s, 45.6 ms, 789 µs."""
    if s >= 1:
        return f"{s:.3g} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} µs"


def _quote(text):
    """A DOT string literal: only what the tracer recorded, quotes and backslashes escaped."""
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'


def dot(a):
    """The call-path graph in Graphviz's language: one cluster per layer."""
    ids = {}
    lines = ["digraph callpath {", "  rankdir=TB; node [shape=box, style=filled, fontname=Helvetica, fontsize=10];",
             "  edge [fontname=Helvetica, fontsize=9];"]
    used = {(e["parent"]["layer"], e["parent"]["function"]) for e in a["edges"]} | \
           {(e["child"]["layer"], e["child"]["function"]) for e in a["edges"]}
    by_layer = {}
    for n in a["nodes"]:
        if (n["layer"], n["function"]) in used:
            by_layer.setdefault(n["layer"], []).append(n)
    ids[("app", "application")] = "root"
    lines.append(f'  root [label="application ({len(a["ranks"])} ranks)", fillcolor="{LAYER_COLOURS["app"]}"];')
    for k, (layer, nodes) in enumerate(by_layer.items()):
        lines.append(f"  subgraph cluster_{k} {{ label={_quote(layer)}; style=dashed;")
        for n in nodes:
            nid = f"n{len(ids)}"
            ids[(layer, n["function"])] = nid
            label = _quote(n["function"])[:-1] + "\\n" + _t(n["max_rank_s"]) + '"'  # \n: DOT's line break
            lines.append(f"    {nid} [label={label}, fillcolor=\"{LAYER_COLOURS.get(layer, '#ffffff')}\"];")
        lines.append("  }")
    for e in a["edges"]:
        p = ids.get((e["parent"]["layer"], e["parent"]["function"]))
        c = ids.get((e["child"]["layer"], e["child"]["function"]))
        if p and c:
            lines.append(f"  {p} -> {c} [label={_quote(_t(e['max_rank_s']) + ' [' + str(e['ranks']) + ']')}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def svg(a):
    """The graph as SVG text, or None with the reason when Graphviz is not installed."""
    exe = shutil.which("dot")
    if not exe:
        return None, "Graphviz is not installed (Debian: apt-get install graphviz): the graph is given as DOT text"
    if len(a["edges"]) > MAX_GRAPH_EDGES:  # a crafted trace's thousands of functions: Graphviz takes minutes
        return None, f"the graph has {len(a['edges'])} call paths, over the {MAX_GRAPH_EDGES} drawn: given as DOT text"
    try:
        out = subprocess.run([exe, "-Tsvg"], input=dot(a), capture_output=True, text=True, timeout=DOT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, f"Graphviz did not draw the graph within {DOT_TIMEOUT_S} s: given as DOT text"
    if out.returncode != 0:
        raise NearmetalError(f"dot -Tsvg failed: {(out.stderr.strip().splitlines() or ['no output'])[-1]}")
    text = out.stdout
    return text[text.find("<svg"):], None


def timeline_svg(a, width=900, row=16):
    """A per-rank timeline of a short run: one row per rank, one bar per call, coloured by
    layer (lower layers drawn over the calls that contain them); None without a timeline."""
    events = a.get("timeline")
    if not events:
        return None
    ranks = list(dict.fromkeys(str(e["rank"]) for e in events))
    end = max(e["end_s"] for e in events) or 1e-9
    left = 60
    scale = (width - left - 10) / end
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{row * len(ranks) + 24}" '
             f'font-family="sans-serif" font-size="10">']
    for k, r in enumerate(ranks):
        parts.append(f'<text x="2" y="{k * row + 12}">rank {html.escape(r)}</text>')
    order = {layer: i for i, layer in enumerate(LAYER_COLOURS)}
    for e in sorted(events, key=lambda e: order.get(e["layer"], 9)):
        k = ranks.index(str(e["rank"]))
        x, w = left + e["start_s"] * scale, max(0.5, (e["end_s"] - e["start_s"]) * scale)
        colour = LAYER_COLOURS.get(e["layer"], "#999999")
        title = html.escape(f"{e['layer']} {e['function']}: {_t(e['end_s'] - e['start_s'])} at {_t(e['start_s'])}")
        parts.append(f'<rect x="{x:.2f}" y="{k * row + 2}" width="{w:.2f}" height="{row - 4}" fill="{colour}" '
                     f'stroke="#555" stroke-width="0.3"><title>{title}</title></rect>')
    parts.append(f'<text x="{left}" y="{row * len(ranks) + 18}">0</text>'
                 f'<text x="{width - 60}" y="{row * len(ranks) + 18}">{html.escape(_t(end))}</text></svg>')
    return "".join(parts)


def write_paths_svg(a, width=900, bar=14):
    """Seed 004's Fig. 13: for each layer's main write path, one bar per rank (its time in
    that function), on one scale, so the ranks that write at each layer (domain roots,
    aggregators) and the gap between the layers (the aggregation overhead) show at a glance."""
    paths = a.get("write_paths") or []
    if not paths:
        return None
    top = max((r["s"] for w in paths for r in w["per_rank_s"]), default=0) or 1e-9
    left, y = 230, 4
    scale = (width - left - 90) / top
    parts = []
    for w in paths:
        parts.append(f'<text x="2" y="{y + 11}" font-weight="bold">{html.escape(w["layer"])} '
                     f'{html.escape(w["function"])}</text>')
        y += bar + 2
        for r in w["per_rank_s"]:
            length = r["s"] * scale
            parts.append(f'<text x="{left - 6}" y="{y + 10}" text-anchor="end">rank {html.escape(str(r["rank"]))}</text>'
                         f'<rect x="{left}" y="{y}" width="{max(length, 0.5):.2f}" height="{bar - 3}" '
                         f'fill="{LAYER_COLOURS.get(w["layer"], "#999999")}" stroke="#555" stroke-width="0.4"/>'
                         f'<text x="{left + length + 4:.2f}" y="{y + 10}">{html.escape(_t(r["s"]))}</text>')
            y += bar
        y += 6
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y}" font-family="sans-serif" '
            f'font-size="10">' + "".join(parts) + "</svg>")


def as_json(a):
    return json.dumps(a, indent=1, sort_keys=True) + "\n"


def _n(count, word):
    return f"{count} {word}{'s' * (count != 1)}"


def warning(a):
    """The line saying that events were dropped or ranks' traces are incomplete; '' when not."""
    said, incomplete = [], a["incomplete_ranks"]
    if a["dropped_events"]:
        said.append(f"{_n(a['dropped_events'], 'event')} dropped (a record the tracer could not keep)")
    if incomplete:  # ranks by number, processes that were not MPI ranks as "pid N"
        ranks = [str(r) for r in incomplete if isinstance(r, int)]
        named = ([f"rank{'s' * (len(ranks) != 1)} {', '.join(ranks)}"] if ranks else []) + \
            [r for r in incomplete if not isinstance(r, int)]
        said.append(f"{', '.join(named)} without a complete trace (ended before finishing: the last second or "
                    f"so of calls is missing)")
    return f"Warning: {'; '.join(said)}." if said else ""


def markdown(a):
    out = [f"# I/O trace: {a['directory']}", "",
           f"{len(a['ranks'])} process{'es' * (len(a['ranks']) != 1)}; layers seen: {', '.join(a['layers']) or 'none'}; "
           f"{a['omitted_edges']} call paths under {a['threshold']:.0%} of the largest node's time omitted."]
    said = warning(a)
    out += [said] if said else []
    out += ["", "## Functions", "", "| layer | function | calls | bytes | ranks | max per rank | total |",
            "|---|---|---|---|---|---|---|"]
    out += [f"| {n['layer']} | {n['function']} | {n['calls']} | {n['bytes']} | {n['ranks']} | "
            f"{_t(n['max_rank_s'])} | {_t(n['total_s'])} |" for n in a["nodes"]]
    out += ["", "## Call paths (parent → child: max per-rank time [ranks])", ""]
    out += [f"- {e['parent']['layer']}:{e['parent']['function']} → {e['child']['layer']}:{e['child']['function']}: "
            f"{_t(e['max_rank_s'])} [{e['ranks']}], {_n(e['calls'], 'call')}" for e in a["edges"]]
    out += ["", "## Main write path per layer (time per rank)", ""]
    for w in a["write_paths"]:
        per = ", ".join(f"{r['rank']}: {_t(r['s'])}" for r in w["per_rank_s"])
        out.append(f"- {w['layer']} `{w['function']}` ({_n(w['calls'], 'call')}, {_n(w['writing_ranks'], 'rank')} "
                   f"writ{'es' if w['writing_ranks'] == 1 else 'e'}): {per}")
    out += ["", "## Files", "", "| file | layer | calls | bytes written | bytes read |", "|---|---|---|---|---|"]
    for f in a["files"]:
        for layer, v in f["layers"].items():
            out.append(f"| {f['path']} | {layer} | {v['calls']} | {v['bytes_written']} | {v['bytes_read']} |")
    if a["hints"]:
        out += ["", "## MPI-IO hints in effect", ""]
        for path, pairs in a["hints"].items():
            out.append(f"- {path}: " + ", ".join(f"{k}={v}" for k, v in sorted(pairs.items())))
    return "\n".join(out) + "\n"


def page(a):
    """One HTML file (report/templates/trace.html): the graph first, then the tables (the
    Markdown's content, as HTML tables)."""
    from ..report.templating import render as render_template

    graph, why = svg(a)
    return render_template("trace.html", a=a, graph=graph, why=why, dot=None if graph else dot(a),
                           threshold=f"{a['threshold']:.0%}", timeline=timeline_svg(a) if a.get("timeline") else None,
                           write_paths=write_paths_svg(a) or "", warning=warning(a), seconds=_t)
