"""Tabular reports: GitHub markdown (for papers and issues), CSV (one row per point x
variant, every statistic flattened) and JSON (the analysis dict itself)."""

import csv
import io
import json
import math

from . import formatting as F
from . import matrix as M
from . import method_words as MW
from . import points as PT
from . import summaries as S

FIXED_COLUMNS = ("benchmark", "kernel", "metric", "unit", "higher_is_better", "ranks", "threads", "variant",
                 "baseline", "variant.mode", "variant.runtime", "variant.mpi", "variant.image")
STATS_ORDER = ("n", "min", "max", "median", "mean", "std", "sem", "p5", "p95", "mad", "cv", "outliers")
COMPARISON_ORDER = ("verdict", "ratio", "ci_low", "ci_high", "overhead_pct", "overhead_ci.low",
                    "overhead_ci.high", "p_value", "test", "paired", "margin",
                    "n_baseline", "n_variant", "n_pairs")


# ---------------------------------------------------------------------- markdown

def _md(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(analysis):
    """The report as GitHub-flavoured markdown: study, verdicts in words, failures, then one
    section per benchmark with one full table per metric (every point x variant)."""
    study = analysis.get("study") or {}
    points = analysis.get("points") or []
    out = [f"# nearmetal report: {_md(study.get('name', '?'))}", ""]
    found = S.findings(analysis)
    if found:
        out += ["## Findings", ""] + [f"- {_md(S.finding_line(f))}" for f in found] + [""]
    out += _markdown_answer(analysis)
    if (analysis.get("machine_check") or {}).get("text"):  # busy at the start, or stopped early (study/execute/machine_check.py)
        out += [f"⚠ {_md(analysis['machine_check']['text'])}", ""]
    from .why import render_markdown as why_markdown

    out += why_markdown(analysis.get("why"), _md)
    if study.get("description"):
        out += [_md(study["description"]), ""]
    facts = []
    for key, label in (("created", "created"), ("seed", "seed"), ("nearmetal_version", "nearmetal")):
        if study.get(key) is not None:
            facts.append(f"{label} {study[key]}")
    if F.is_num(study.get("margin")):
        facts.append(f"equivalence margin ±{study['margin'] * 100:g}%")
    if facts:
        out += ["; ".join(facts) + ".", ""]
    out += [_md(f"{MW.ratio_note(analysis)[0].upper()}{MW.ratio_note(analysis)[1:]}; {MW.NOISE}."), ""]
    out += ["## Summary", ""]
    for s in S.variant_summaries(analysis):
        out.append(f"- {_md(s['text'])}")
    head, first = S.failures_summary(analysis)
    out += ["", head, ""]
    if first:
        why = f" {_md(first['why'])}" if first.get("why") else ""
        out += [f"First failure: `{_md(first.get('run_key'))}` ({first.get('status')}, exit status "
                f"{first.get('exit_status')}):{why}", "", "```", F.tail_lines(first.get("stderr_tail"), 10), "```", ""]
    from .io_section import markdown as io_markdown

    out += io_markdown(analysis, _md)  # the HTML's Parallel I/O tables, for studies with iobench benchmarks

    noise_index = PT.noise_by_row(points)
    vorder = PT.variant_order(analysis)
    bases = PT.baseline_ids(analysis)
    current = None
    for (bench, metric), entries in PT.group_points(points).items():
        if bench != current:
            current = bench
            out += [f"## {_md(bench)}", ""]
        first_e = entries[0]
        unit = first_e.get("unit") or ""
        better = PT.direction_words(first_e)
        out += [f"### {_md(bench)} · {_md(metric)}" + (f" ({_md(unit)})" if unit else "") + f", {better}", ""]
        out.append(f"| point | ranks×threads | variant | n | median | p5–p95 | {MW.ratio_column(analysis)} "
                   "| overhead | verdict "
                   "| p | noise |")
        out.append("|---|---|---|--:|--:|--:|--:|--:|---|--:|--:|")
        order = {k: i for i, k in enumerate(PT.ordered_row_keys(entries))}
        for p in sorted(entries, key=lambda p: (order[PT.row_key(p)], vorder.get(p.get("variant"), 1e9))):
            s = p.get("stats") or {}
            c = PT.comparison(p)
            spread = f"{F.fmt_num(s.get('p5'))}–{F.fmt_num(s.get('p95'))}" if F.is_num(s.get("p5")) else "—"
            verdict = PT.row_verdict(p, bases) or "—"
            pv = c.get("p_value") if c else None
            out.append("| " + " | ".join(_md(x) for x in (
                F.point_label(p.get("point")), F.fmt_placement(p.get("ranks"), p.get("threads")), p.get("variant"),
                s.get("n", len(p.get("values") or [])), F.fmt_num(PT.median_of(p)), spread, F.fmt_ratio(c),
                F.fmt_pct(c.get("overhead_pct")) if c else "—", verdict,
                f"{pv:.2g}" if F.is_num(pv) else "—", PT.row_noise(p, noise_index))) + " |")
        out.append("")
    if not points:
        out += ["No measured points.", ""]
    return "\n".join(out)


def _markdown_answer(analysis):
    """## Answer: the summary and the verdict matrix (matrix.py), then one sentence per variant."""
    a = S.answer(analysis)
    if a is None:
        return []
    out = ["## Answer", ""]
    m = M.build(analysis)
    if m is not None:
        out += [_md(" ".join(m["summary"])), ""]
        out.append("| variant | " + " | ".join(_md(c) for c in m["cols"]) + " |")
        out.append("|---|" + "--:|" * len(m["cols"]))
        for r in m["rows"]:
            out.append(f"| {_md(r['name'])} | " + " | ".join(_md_cell(c) for c in r["cells"]) + " |")
        out += ["", _md(m["legend"]), "", "### Per variant", ""]
    out += [f"- {_md(text)}" for text, _ in a["sentences"]] + [""]
    return out + [_md(a["note"]), ""]


def _md_cell(c):
    """A matrix cell: mark, ratio and interval, the verdict in words (a table has no colour)."""
    if c is None:
        return "—"
    dist = f" {M.DISTURBED}" if c["disturbed"] else ""
    return _md(f"{c['mark']} {c['ratio_txt']} {c['interval_txt']} {c['word']}{dist}".replace("  ", " "))


# ---------------------------------------------------------------------- CSV

def _cell(v):
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else ("nan" if v != v else ("inf" if v > 0 else "-inf"))
    if isinstance(v, (list, tuple, dict)):
        return json.dumps(v)
    return str(v)


def _flatten(prefix, d, out):
    for k, v in d.items():
        if isinstance(v, dict):
            _flatten(f"{prefix}{k}.", v, out)
        elif k.endswith("_ci") and (v is None or isinstance(v, (list, tuple)) and len(v) == 2):
            out[f"{prefix}{k}.low"], out[f"{prefix}{k}.high"] = v or (None, None)  # an interval: two columns
        else:
            out[f"{prefix}{k}"] = v


def csv_rows(analysis):
    """(fieldnames, rows): one dict per point x variant, nested fields flattened with dots
    (point.size, stats.median, comparison.baseline_noise.cv, ...)."""
    rows = []
    point_keys, stats_keys, cmp_keys = {}, {}, {}
    for p in analysis.get("points") or []:
        dims = p.get("variant_dims") or {}
        row = {k: p.get(k) for k in FIXED_COLUMNS if "." not in k}
        for dim in ("mode", "runtime", "mpi", "image"):
            row[f"variant.{dim}"] = dims.get(dim)
        for k, v in (p.get("point") or {}).items():
            row[f"point.{k}"] = v
            point_keys.setdefault(f"point.{k}", None)
        flat = {}
        _flatten("stats.", p.get("stats") or {}, flat)
        stats_keys.update(dict.fromkeys(flat))
        row.update(flat)
        flat = {}
        _flatten("comparison.", PT.comparison(p) or {}, flat)
        cmp_keys.update(dict.fromkeys(flat))
        row.update(flat)
        row["values"] = " ".join(repr(float(v)) for v in p.get("values") or [])
        rows.append(row)

    def ordered(keys, prefix, known):
        first = [f"{prefix}{k}" for k in known if f"{prefix}{k}" in keys]
        return first + sorted(k for k in keys if k not in first)

    fields = list(FIXED_COLUMNS) + ordered(point_keys, "point.", ("size", "src", "dst", "rank", "phase")) + \
        ordered(stats_keys, "stats.", STATS_ORDER) + ordered(cmp_keys, "comparison.", COMPARISON_ORDER) + ["values"]
    return fields, rows


def write_csv(analysis, path):
    """One row per point x variant with the point parameters, every statistic and every
    comparison field as columns (see docs/reports.md); empty cells where a field does not
    apply (a baseline has no comparison)."""
    from ..safe_write import replacing

    fields, rows = csv_rows(analysis)
    with replacing(path, "report") as raw:
        f = io.TextIOWrapper(raw, encoding="utf-8", newline="")
        w = csv.writer(f)
        w.writerow(fields)
        for row in rows:
            w.writerow([_cell(row.get(k)) for k in fields])
        f.detach()  # flushes; replacing() syncs and closes the file itself
    return path


# ---------------------------------------------------------------------- JSON

def _clean(x):
    """Strict JSON: NaN and infinities become null."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


def _default(o):
    try:
        import numpy as np

        if isinstance(o, np.generic):
            return o.item()
        if isinstance(o, np.ndarray):
            return o.tolist()
    except ImportError:  # pragma: no cover
        pass
    if isinstance(o, (set, frozenset)):
        return sorted(o, key=str)
    return str(o)


def _dumps(x):
    return json.dumps(x, allow_nan=False, default=_default, ensure_ascii=False)


def render_json(analysis):
    """The analysis dict itself as strict JSON (NaN and infinities as null): one top-level
    key per line and one point per line (diff-friendly, and json's C encoder stays in use,
    which indent= would turn off)."""
    try:
        return _render_json(analysis)
    except ValueError:  # NaN or infinity somewhere
        return _render_json(_clean(json.loads(json.dumps(analysis, default=_default))))


def _render_json(analysis):
    if not isinstance(analysis, dict):
        return _dumps(analysis) + "\n"
    parts = []
    for k, v in analysis.items():
        if isinstance(v, list) and v:
            body = ",\n".join(_dumps(x) for x in v)
            parts.append(f"{_dumps(str(k))}: [\n{body}\n]")
        else:
            parts.append(f"{_dumps(str(k))}: {_dumps(v)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"
