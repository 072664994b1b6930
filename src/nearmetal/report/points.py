"""Reading the analysis dict (docs/analysis.md): its variants and their baselines, its
points grouped and ordered for tables, and each entry's median, comparison, verdict and
noise. Everything tolerates missing fields: a report of a half-finished or imported study
must still render."""

import json
from collections import OrderedDict

from . import formatting as F


VERDICTS = ("equivalent", "slower", "faster", "inconclusive")
# rank values that aggregate over ranks: preferred where a table or plot shows one point
AGGREGATE_RANKS = ("total", "mean", "max")


def variants_of(analysis):
    """Variant ids in a stable order: as listed in analysis['variants'], then any that only
    appear in points."""
    out = [v.get("id") for v in analysis.get("variants") or [] if v.get("id")]
    seen = set(out)
    for p in analysis.get("points") or []:
        vid = p.get("variant")
        if vid and vid not in seen:
            seen.add(vid)
            out.append(vid)
    return out


def variant_order(analysis):
    """Variant ids for display: each baseline followed by the variants compared with it,
    then any others. Returns {variant id: position}."""
    ids = variants_of(analysis)
    base_of = baseline_of_variant(analysis)
    bases = baseline_ids(analysis)
    out = []
    for b in ids:
        if base_of.get(b) is None:
            deps = [v for v in ids if base_of.get(v) == b]
            if deps or b in bases:
                out.append(b)
                out += deps
    out += [v for v in ids if v not in out]
    return {v: i for i, v in enumerate(out)}


def baseline_ids(analysis):
    """Variants that are somebody's baseline (or their own)."""
    out = set()
    for v in analysis.get("variants") or []:
        if v.get("baseline"):
            out.add(v["baseline"])
    for p in analysis.get("points") or []:
        if p.get("baseline"):
            out.add(p["baseline"])
    return out


def baseline_of_variant(analysis):
    """variant id -> its baseline id (None for a baseline)."""
    out = {}
    for v in analysis.get("variants") or []:
        b = v.get("baseline")
        out[v.get("id")] = b if b and b != v.get("id") else None
    for p in analysis.get("points") or []:
        if p.get("baseline") and not out.get(p.get("variant")):
            out[p["variant"]] = p["baseline"]
    return out


def short_variant_labels(analysis):
    """Variant ids without the dimensions every containerized variant shares (a runtime or
    image used by all of them): 'hybrid/charliecloud/openmpi/default' -> 'hybrid/openmpi'
    when charliecloud and default are the only runtime and image. Returns (labels, dropped)
    where dropped describes what was left out, e.g. 'runtime charliecloud, image default'."""
    ids = variants_of(analysis)
    parsed = {}
    for vid in ids:
        parts = vid.split("/")
        if len(parts) == 4:
            image, plus, rest = parts[3].partition("+")  # +squashfs, +cold, ...: the optional dimensions
            parsed[vid] = dict(zip(("mode", "runtime", "mpi", "image"), parts[:3] + [image]), extra=plus + rest)
        elif len(parts) == 2:
            parsed[vid] = {"mode": parts[0], "runtime": None, "mpi": parts[1], "image": None}
        else:
            parsed[vid] = None
    containers = [d for d in parsed.values() if d and d["runtime"] is not None]
    drop = []
    for dim in ("runtime", "image"):
        values = {d[dim] for d in containers}
        if len(values) == 1 and containers:
            drop.append((dim, values.pop()))
    labels = {}
    for vid in ids:
        d = parsed[vid]
        if d is None or d["runtime"] is None:
            labels[vid] = vid
            continue
        keep = [d["mode"]] + [d[k] for k in ("runtime", "mpi", "image") if k not in dict(drop) or k == "mpi"]
        labels[vid] = "/".join(keep) + d.get("extra", "")
    if len(set(labels.values())) != len(labels):  # never ambiguous
        return {vid: vid for vid in ids}, ""
    return labels, ", ".join(f"{dim} {val}" for dim, val in drop)


def point_json(point):
    return json.dumps(point or {}, sort_keys=True)


def group_points(points):
    """(benchmark, metric) -> list of entries, in the analysis's order."""
    groups = OrderedDict()
    for p in points:
        groups.setdefault((p.get("benchmark"), p.get("metric")), []).append(p)
    return groups


def row_key(p):
    """What identifies a row apart from the variant: point parameters and placement."""
    return (point_json(p.get("point")), p.get("ranks"), p.get("threads"))


def _natural(v):
    return (0, v, "") if F.is_num(v) else (1, 0, str(v))


def row_sort_key(k):
    """Natural order of row keys: placement, then point parameters with numbers before
    words and numbers by value (216 before 1152; rank 0, 1, ..., then 'total')."""
    pj, r, t = k
    pt = json.loads(pj)
    return (r if F.is_num(r) else 0, t if F.is_num(t) else 0, tuple((name, _natural(v)) for name, v in sorted(pt.items())))


def ordered_row_keys(entries):
    return sorted({row_key(p) for p in entries}, key=row_sort_key)


SCALE_PARAMS = ("cores", "nodes", "ranks", "np", "procs", "processes", "tasks")


def scale_param(entries):
    """A point parameter that counts processors ('cores', 'nodes', ...) with 2 or more
    values, for results that give the scale as a parameter rather than as ranks × threads
    (imported studies); None otherwise."""
    if len(placements(entries)) > 1:
        return None
    for name in SCALE_PARAMS:
        vals = {(p.get("point") or {}).get(name) for p in entries}
        if len(vals) >= 2 and all(F.is_num(v) and v > 0 for v in vals):
            return name
    return None


def placements(entries):
    return sorted({(p.get("ranks"), p.get("threads")) for p in entries}, key=lambda x: (x[0] or 0, x[1] or 0))


def is_size_swept(entries):
    sizes = {p["point"]["size"] for p in entries if isinstance(p.get("point"), dict) and F.is_num(p["point"].get("size"))}
    return len(sizes) >= 2


def median_of(p):
    s = p.get("stats") or {}
    return s.get("median") if F.is_num(s.get("median")) else None


def comparison(p):
    c = p.get("comparison")
    return c if isinstance(c, dict) else None


def verdict_of(p):
    c = comparison(p)
    if c is None:
        return None
    v = c.get("verdict")
    return v if v in VERDICTS else "inconclusive"


def count_verdict(p):
    """What a table says of a count or check value (bytes, files, a checksum, a hint's 0 or 1:
    no cost, so no verdict): "same" where it equals the baseline's in every run (the analysis'
    same_as_baseline), else "differs"; None for a cost or a point without comparison."""
    from ..analysis.answers import is_cost

    if comparison(p) is None or is_cost(p):
        return None
    return "same" if p.get("same_as_baseline") else "differs"  # the analysis compared the values


def row_verdict(p, bases):
    """A table row's verdict column: the comparison's verdict, a count's "same"/"differs",
    "baseline" for the baseline variant's own row; None where nothing applies."""
    return count_verdict(p) or verdict_of(p) or ("baseline" if p.get("variant") in bases else None)


def overhead_ci(c):
    """The interval of overhead_pct as the analysis computed it (analysis.stats.with_overhead):
    (low, high), or None when the comparison has no interval."""
    ci = (c or {}).get("overhead_ci")
    return tuple(ci) if ci else None


def noise_rel(c):
    """The baseline's noise of a comparison as a fraction: its coefficient of variation, the
    one noise figure every report and answer gives (report/method_words.NOISE)."""
    if not c:
        return None, None
    n = c.get("baseline_noise") or {}
    for key in ("cv",):
        if F.is_num(n.get(key)):
            return n[key], key
    return None, None


def noise_text(c):
    v, _ = noise_rel(c)
    return f"±{v * 100:.1f}%" if v is not None else "—"


def noise_by_row(points):
    """row key + baseline id -> the baseline noise (from any comparison against it), so a
    baseline's own row shows the same measure as the rows compared with it."""
    out = {}
    for p in points:
        c = comparison(p)
        if c and p.get("baseline"):
            k = (p.get("benchmark"), p.get("metric")) + row_key(p) + (p["baseline"],)
            if k not in out:
                out[k] = c
    return out


def row_noise(p, noise_index):
    c = comparison(p)
    if c:
        return noise_text(c)
    k = (p.get("benchmark"), p.get("metric")) + row_key(p) + (p.get("variant"),)
    if k in noise_index:
        return noise_text(noise_index[k])
    s = p.get("stats") or {}
    return f"±{s['cv'] * 100:.1f}%" if F.is_num(s.get("cv")) else "—"


def direction_words(p):
    """'lower is better', 'higher is better', or, for a count or a check value (no cost:
    analysis.answers.is_cost), what it is."""
    from ..analysis.answers import is_cost

    if not is_cost(p):
        return "a count or check value, not a cost"
    return "higher is better" if p.get("higher_is_better") else "lower is better"
