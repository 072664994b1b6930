"""Pre-selection: which parameters have a measurable effect (the paper's test_mpp_io step).

Seed 004 ran a stand-alone FMS I/O program over the whole parameter range first and found
that most parameters "had no measurable impact on performance"; only the rest were swept.
Here: one factor at a time around a base configuration (the first value of every
parameter, pattern `shared` when listed). Each value of each parameter with two or more
values is measured `preselect.repetitions` times, interleaved in randomized blocks, as a
study of its own ("<name>-preselect"). A parameter is kept when some value moves the
median of the max-over-ranks time away from the anchor's by more than `threshold` AND
the two groups are separated beyond the anchor's own spread (their ranges do not overlap,
or a rank test gives p < alpha). Parameters without effect are fixed at their best-measured
value. When a parameter cannot matter around the base (chunk around a raw MPI-IO base),
it is measured around the first pattern/library pair of the space where it applies.

Pattern and library are never pre-selected away: they are what the sweep compares (the
paper's Table 1 and its libraries), and they decide which of the tuning parameters apply;
fixing the pattern at `serial` because a tiny grid showed no difference would leave
nothing to tune. Pre-selection runs only for the tuning parameters.
"""

import json

from ..analysis import stats
from .space import Configuration, format_size
from .sweep import PARAMETERS, group_by_mpi, make, max_rank_values, space_values

STRUCTURAL = ("pattern", "library")   # always swept in full


def display(param, value):
    if value is None:
        return "default"
    if param == "buffer":
        return format_size(value)
    return str(value)


def base_configuration(space):
    """The first value of every parameter, pattern `shared` when listed and some library can
    write it, else the first writable pattern/library pair (io.config refuses spaces where
    `shared` has only posix, which made this raise StopIteration)."""
    vals = space_values(space)
    from .libraries import get

    pairs = [(p, lib) for p in vals["pattern"] for lib in vals["library"] if p != "shared" or get(lib).shared]
    pattern, library = next((pair for pair in pairs if pair[0] == "shared"), pairs[0])
    fields = {p: vals[p][0] for p in PARAMETERS}
    fields.update(pattern=pattern, library=library)
    return Configuration(**fields)


def _fields(cfg):
    return {p: getattr(cfg, p) for p in PARAMETERS}


def _anchor(param, base, vals):
    """The first configuration around which `param`'s values give >= 2 different runs."""
    candidates = [base]  # closest first: the base's pattern with another library, then other patterns
    for pattern in [base.pattern] + [p for p in vals["pattern"] if p != base.pattern]:
        for library in vals["library"]:
            c = make({**_fields(base), "pattern": pattern, "library": library})
            if c is not None and c not in candidates:
                candidates.append(c)
    for anchor in candidates:
        tried = [make({**_fields(anchor), param: v}) for v in vals[param]]
        if len({c.normalize() for c in tried if c is not None}) >= 2:
            return anchor, tried
    return None, None


def plan(space):
    """(base, tests, configurations): tests = [{param, values, anchor, tried}] for every
    parameter with two or more values; configurations = the raw configurations to measure."""
    vals = space_values(space)
    base = base_configuration(space)
    tests, raws = [], [base]
    for param in PARAMETERS:
        if len(vals[param]) < 2 or param in STRUCTURAL:
            tests.append({"param": param, "values": vals[param], "anchor": None, "tried": None})
            continue
        anchor, tried = _anchor(param, base, vals)
        tests.append({"param": param, "values": vals[param], "anchor": anchor, "tried": tried})
        if anchor is not None:
            raws.append(anchor)
            raws += [c for c in tried if c is not None]
    return base, tests, raws


def configurations(space, mpis):
    return group_by_mpi(plan(space)[2], mpis)


def decide(space, store, study_id, settings, metric="total"):
    """The decision per parameter, from the stored pre-selection runs. Deterministic in the
    stored data, so a resumed sweep compiles the same study."""
    base, tests, _ = plan(space)
    data = max_rank_values(store, study_id, f"{metric}_s")
    variants = {}
    for r in store.runs(study_id):
        variants.setdefault(r["variant"], json.loads(r["variant_json"]))
    decisions = []
    for t in tests:
        param, values = t["param"], t["values"]
        shown = [display(param, v) for v in values]
        d = {"parameter": param, "values": shown, "anchor": None, "status": None, "fixed": None,
             "sweep": shown, "effects": []}
        decisions.append(d)
        if t["anchor"] is None:
            d["status"] = ("single value" if len(values) < 2 else
                           "always swept" if param in STRUCTURAL else "does not apply")
            continue
        anchor = t["anchor"]
        d["anchor"] = anchor.label()
        ratios = {}      # value index -> [ratio to the anchor (stats.compare's), per variant]
        any_effect = False
        for vid in sorted(variants):
            mpi = variants[vid]["mpi"]
            a_label = anchor.normalize(mpi).label()
            a_vals = list(data.get((a_label, vid), {}).values())
            labels = [c.normalize(mpi).label() if c is not None else None for c in t["tried"]]
            if all(l in (None, a_label) for l in labels) or not a_vals:
                continue
            a_block = data.get((a_label, vid), {})
            for i, (value, label) in enumerate(zip(values, labels)):
                e = {"variant": vid, "value": shown[i], "label": label, "n": 0, "median": None, "ratio": None,
                     "p_value": None, "separated": None, "effect": False}
                d["effects"].append(e)
                if label is None:
                    e["note"] = f"cannot be combined with {anchor.pattern}/{anchor.library}"
                    continue
                v_block = data.get((label, vid), {})
                v_vals = list(v_block.values())
                e["n"] = len(v_vals)
                if not v_vals:
                    e["note"] = "no successful run"
                    continue
                e["median"] = stats.summarize(v_vals)["median"]
                if label == a_label:
                    ratios.setdefault(i, []).append(1.0)
                    e["ratio"], e["note"] = 1.0, "anchor"
                    continue
                pairs = [(a_block[b], v_block[b]) for b in v_block if b in a_block]
                cmp = stats.compare(a_vals, v_vals, margin=settings.threshold, alpha=settings.alpha,
                                    pairs=pairs if len(pairs) >= 2 else None)
                separated = max(v_vals) < min(a_vals) or min(v_vals) > max(a_vals)
                e.update(ratio=cmp["ratio"], p_value=cmp["p_value"], separated=separated)
                if cmp["ratio"] is None:
                    continue
                ratios.setdefault(i, []).append(cmp["ratio"])
                outside = abs(cmp["ratio"] - 1.0) > settings.threshold
                significant = separated or (cmp["p_value"] is not None and cmp["p_value"] < settings.alpha)
                e["effect"] = bool(outside and significant)
                any_effect |= e["effect"]
        measured = [i for i in ratios if ratios[i]]
        if len(measured) < 2:
            d["status"] = "not measured"      # failed or impossible runs: keep every value
        elif any_effect:
            d["status"] = "kept"
        else:
            best = min(measured, key=lambda i: (sum(ratios[i]) / len(ratios[i]), i))
            d["status"], d["fixed"], d["sweep"] = "fixed", shown[best], [shown[best]]
    return {"base": base.normalize().label(), "metric": metric, "threshold": settings.threshold,  # as the runs name it
            "alpha": settings.alpha, "parameters": decisions}


def fixed_values(space, decision):
    """{parameter: Configuration value} for the parameters pre-selection fixed."""
    out = {}
    vals = space_values(space)
    for d in decision["parameters"]:
        if d["status"] == "fixed":
            p = d["parameter"]
            out[p] = vals[p][d["values"].index(d["fixed"])]
    return out


def render(decision, console):
    from rich.table import Table

    table = Table(title=f"pre-selection: {decision['metric']} time (max over ranks), threshold "
                        f"{decision['threshold']:.0%}, base {decision['base']}", title_justify="left")
    for col in ("parameter", "values", "median (s) / ratio to anchor", "decision", "swept"):
        table.add_column(col)
    several = len({e["variant"] for d in decision["parameters"] for e in d["effects"]}) > 1
    for d in decision["parameters"]:
        effects = []
        for e in d["effects"]:
            who = f"{e['variant']} {e['value']}" if several else e["value"]
            if e["median"] is None:
                effects.append(f"{who}: {e.get('note', '-')}")
            elif e.get("note") == "anchor":
                effects.append(f"{who}: {e['median']:.4g} (anchor)")
            else:
                mark = " *" if e["effect"] else ""
                ratio = f" x{e['ratio']:.3f}" if e["ratio"] is not None else ""
                effects.append(f"{who}: {e['median']:.4g}{ratio}{mark}")
        status = d["status"] + (f" at {d['fixed']}" if d["fixed"] else "")
        table.add_row(d["parameter"], ", ".join(d["values"]), "\n".join(effects) or "-", status, ", ".join(d["sweep"]))
    console.print(table)
    console.print("* = a measurable effect: ratio outside 1±threshold and separated beyond the anchor's spread",
                  highlight=False)
