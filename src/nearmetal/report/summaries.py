"""The per-variant summary in words and the failures' headline, as every report format
prints them."""

from collections import defaultdict

from . import formatting as F
from . import points as PT


def where_label(p, multi_placement):
    bench, metric = p.get("benchmark"), p.get("metric")
    label = F.point_label(p.get("point"))
    what = bench if metric == bench else f"{bench} {metric}"
    s = what if label == "—" else f"{label} {what}"
    if multi_placement:
        s += f" ({F.fmt_placement(p.get('ranks'), p.get('threads'))})"
    return s


def variant_summaries(analysis):
    """Per variant: counts of verdicts, the worst slower and best faster point, and a
    sentence. Returns a list of dicts in variant order:
    {variant, baseline, compared, counts: {verdict: n}, worst, best, text}."""
    points = analysis.get("points") or []
    margin = (analysis.get("study") or {}).get("margin")
    multi = defaultdict(set)
    for p in points:
        multi[p.get("benchmark")].add((p.get("ranks"), p.get("threads")))
    by_variant = defaultdict(list)
    for p in points:
        by_variant[p.get("variant")].append(p)
    base_of = PT.baseline_of_variant(analysis)
    bases = PT.baseline_ids(analysis)
    out = []
    order = PT.variant_order(analysis)
    for vid in sorted(PT.variants_of(analysis), key=order.get):
        entries = by_variant.get(vid, [])
        compared = [p for p in entries if PT.comparison(p)]
        counts = {v: 0 for v in PT.VERDICTS}
        worst = best = noisiest = None
        for p in compared:
            c = PT.comparison(p)
            v = PT.verdict_of(p)
            counts[v] += 1
            oh = c.get("overhead_pct")
            if v == "slower" and F.is_num(oh) and (worst is None or oh > worst[0]):
                worst = (oh, p)
            if v == "faster" and F.is_num(oh) and (best is None or oh < best[0]):
                best = (oh, p)
            if v == "inconclusive":
                n, _ = PT.noise_rel(c)
                if n is not None and (noisiest is None or n > noisiest[0]):
                    noisiest = (n, p)
        baseline = base_of.get(vid)
        if not compared:
            if vid in bases:
                users = sorted(k for k, b in base_of.items() if b == vid)
                text = f"{vid}: baseline for {', '.join(users)}" if users else \
                    f"{vid}: baseline, no variant compared with it"
                text += f" ({len(entries)} points measured)."
            else:
                text = f"{vid}: no point compared with a baseline ({len(entries)} points measured)."
        else:
            m = margin if F.is_num(margin) else (PT.comparison(compared[0]) or {}).get("margin")
            mtxt = f" within ±{m * 100:g}%" if F.is_num(m) else ""
            bname = baseline or (compared[0].get("baseline") or "the baseline")
            parts = [f"equivalent to {bname}{mtxt} at {counts['equivalent']} of {len(compared)} points"]
            if counts["slower"]:
                s = f"slower at {counts['slower']}"
                if worst:
                    s += f" (worst: {F.fmt_pct(worst[0], digits=0 if abs(worst[0]) >= 10 else 1)} at " \
                         f"{where_label(worst[1], len(multi[worst[1].get('benchmark')]) > 1)})"
                parts.append(s)
            if counts["faster"]:
                s = f"faster at {counts['faster']}"
                if best:
                    s += f" (best: {F.fmt_pct(best[0], digits=0 if abs(best[0]) >= 10 else 1)} at " \
                         f"{where_label(best[1], len(multi[best[1].get('benchmark')]) > 1)})"
                parts.append(s)
            if counts["inconclusive"]:
                s = f"inconclusive at {counts['inconclusive']}"
                if noisiest:
                    s += f" (noisiest baseline: ±{noisiest[0] * 100:.1f}% at " \
                         f"{where_label(noisiest[1], len(multi[noisiest[1].get('benchmark')]) > 1)})"
                parts.append(s)
            ohs = sorted(c["overhead_pct"] for c in map(PT.comparison, compared) if F.is_num(c.get("overhead_pct")))
            if ohs and counts["inconclusive"] == len(compared):
                mid = ohs[len(ohs) // 2] if len(ohs) % 2 else (ohs[len(ohs) // 2 - 1] + ohs[len(ohs) // 2]) / 2
                lo, hi = F.fmt_pct(ohs[0]), F.fmt_pct(ohs[-1])
                # One value (or all that print alike) is said once: "overhead +18.7%".
                parts.append(f"overhead {lo}" if lo == hi else f"overhead {lo} to {hi} (median {F.fmt_pct(mid)})")
            text = f"{vid}: " + "; ".join(parts) + "."
        out.append({"variant": vid, "baseline": baseline, "compared": len(compared), "measured": len(entries),
                    "counts": counts, "worst": worst[0] if worst else None, "best": best[0] if best else None,
                    "text": text})
    return out


def failures_summary(analysis):
    """(headline sentence, first failure or None)."""
    runs = analysis.get("runs") or {}
    by = runs.get("by_status") or {}
    fails = runs.get("failures") or []
    total = runs.get("total")
    nfail = sum(by.get(s, 0) for s in ("failed", "timeout", "hung")) or len(fails)
    bits = ", ".join(f"{k} {v}" for k, v in sorted(by.items()))
    if not nfail:
        head = f"No failed runs ({total if total is not None else '?'} runs: {bits or 'none recorded'})."
    else:
        how = "failed, timed out or hung" if by.get("hung") else "failed or timed out"
        head = f"{nfail} of {total if total is not None else '?'} runs {how} ({bits})."
    if by.get("hung"):
        head += (f" {by['hung']} hung: ended at 10x their cell's median run time and run once more"
                 f" (their processes' state is in the failures).")
    for s in runs.get("skipped") or []:  # a benchmark stopped after its first run
        head += f" {s['runs']} runs of {s['benchmark']} skipped: {s['why'].removeprefix('skipped: ')}"
    return head, (fails[0] if fails else None)


def _answer_cell(e):
    """A benchmark's (or a variant's overall) answer in a table cell: '≈ ±1.2%',
    '+12% [+8 to +15%]', '? ±8%'."""
    v = e.get("verdict")
    res = e.get("resolution_pct")
    if v == "equivalent":
        return f"≈ ±{_res(res)}" if F.is_num(res) else "≈"
    if v in ("slower", "faster"):
        oh, ci = e.get("overhead_pct"), e.get("overhead_ci")
        if not F.is_num(oh):
            return v
        r, lo, hi = e.get("cost_ratio"), e.get("ci_low"), e.get("ci_high")
        if F.is_num(r) and (r >= 2 or r <= 0.5):  # as a factor, as analysis/answers.py writes it
            return f"×{r:.3g}" + (f" [×{lo:.3g} to ×{hi:.3g}]" if F.is_num(lo) and F.is_num(hi) else "")
        ok_ci = ci if ci and len(ci) == 2 and all(F.is_num(x) for x in ci) else None
        d = 1 if abs(oh) < 10 or (ok_ci and ok_ci[1] - ok_ci[0] < 4) else 0  # as analysis/answers.py's digits()
        s = F.fmt_pct(oh, digits=d)
        if ok_ci:
            s += f" [{ok_ci[0]:+.{d}f} to {ok_ci[1]:+.{d}f}%]"
        return s.replace("-", "−")
    return f"? ±{_res(res)}" if F.is_num(res) else "?"


def _res(pct):
    return f"{pct:.0f}%" if pct >= 10 else f"{pct:.1f}%"


def _answer_title(e, level):
    lo, hi = e.get("ci_low"), e.get("ci_high")
    s = f"{e.get('verdict')}: cost ratio {F.fmt_num(e.get('cost_ratio'), 4)}"
    if F.is_num(lo) and F.is_num(hi):
        s += f" [{F.fmt_num(lo, 4)}–{F.fmt_num(hi, 4)}] ({level} CI)"
    n = e.get("n_points")
    s += f", {n} point{'s' if n != 1 else ''}, {e.get('n_blocks')} blocks"
    if F.is_num(e.get("noise_pct")):
        s += f"; baseline noise (median CV) ±{e['noise_pct']:.1f}%"
    return s


def answer(analysis):
    """The top-line answer of analysis['answers'] (analysis/answers.py) for every format, or
    None when the analysis has none: {"sentences": [(text, tone)], "note": str, "cols":
    [variant words], "rows": [{"label", "cells": [{"text", "verdict", "title"} or None]}]}.
    tone: 'slower' when any of the variant's benchmarks is slower, else 'faster' when any
    is faster, 'equivalent' when all are, else 'inconclusive'."""
    a = analysis.get("answers")
    if not isinstance(a, dict) or not (a.get("headline") or a.get("by_variant")):
        return None
    by_v = [v for v in a.get("by_variant") or [] if isinstance(v, dict)]
    cells = [c for c in a.get("by_benchmark") or [] if isinstance(c, dict)]
    tones = {}
    for v in by_v:
        verdicts = {c.get("verdict") for c in cells if c.get("variant") == v.get("variant")} | {v.get("verdict")}
        tones[v.get("sentence")] = ("slower" if "slower" in verdicts else "faster" if "faster" in verdicts else
                                    "equivalent" if verdicts == {"equivalent"} else "inconclusive")
    sentences = [(s, tones.get(s, "inconclusive")) for s in a.get("headline") or []]
    level, margin = a.get("ci_level"), a.get("margin")
    level = f"{level * 100:.4g}%" if F.is_num(level) else "95%"
    note = ("Cost ratio = variant / baseline for times, baseline / variant for rates (> 1: the variant is slower), "
            f"geometric mean over a benchmark's points; {level} CI from a paired bootstrap over the randomized "
            "blocks; equivalent (≈): the CI lies within "
            + (f"±{margin * 100:g}%" if F.is_num(margin) else "the margin")
            + "; ?: neither equivalent nor a difference, ± is the resolution reached.")
    cols = [v.get("variant") for v in by_v]
    labels = []
    for c in cells:
        if c.get("label") not in labels:
            labels.append(c.get("label"))
    index = {(c.get("label"), c.get("variant")): c for c in cells}
    rows = []
    for label in labels:
        row = []
        for vid in cols:
            c = index.get((label, vid))
            row.append({"text": _answer_cell(c), "verdict": c.get("verdict"), "title": _answer_title(c, level)}
                       if c else None)
        rows.append({"label": label, "cells": row})
    if by_v and len(labels) > 1:  # one benchmark: its row is the overall answer
        rows.insert(0, {"label": "all points", "overall": True,
                     "cells": [{"text": _answer_cell(v), "verdict": v.get("verdict"),
                                "title": _answer_title(v, level)} for v in by_v]})
    return {"sentences": sentences, "note": note, "cols": [v.get("name") or v.get("variant") for v in by_v],
            "rows": rows}


FINDING_TONE = {"reproduced": "equivalent", "not reproduced": "slower", "undecided": "inconclusive",
                "not measurable here": "baseline"}


def findings(analysis):
    """The study's published findings and this study's verdict on each (analysis['findings'],
    analysis/findings.py), for every format: [{"verdict", "tone", "statement", "source",
    "compared", "result", "paper"}], or [] when the study states none."""
    out = []
    for f in analysis.get("findings") or []:
        if not isinstance(f, dict):
            continue
        verdict = str(f.get("verdict") or "?")
        compared = f"{f.get('variant')} {f.get('benchmark')} vs {f.get('reference')}"
        if f.get("reference") and str(f.get("reference")).startswith(f"{f.get('variant')} "):
            compared = f"{f.get('benchmark')} vs {str(f.get('reference'))[len(str(f.get('variant'))) + 1:]} " \
                       f"({f.get('variant')})"
        out.append({"verdict": verdict, "tone": FINDING_TONE.get(verdict, "inconclusive"), "id": f.get("id"),
                    "statement": str(f.get("statement") or ""), "source": str(f.get("source") or ""),
                    "compared": compared, "expect": f.get("expect"), "result": str(f.get("why") or ""),
                    "paper": str(f.get("paper") or "")})
    return out


def finding_line(f):
    """One finding in one line of text: verdict, statement, what was compared and measured."""
    tail = f" (paper: {f['paper']})" if f["paper"] else ""
    src = f" [{f['source']}]" if f["source"] else ""
    return f"{f['verdict'].upper()}: {f['statement'].rstrip('.')}{src}. Here, {f['compared']}: {f['result']}{tail}."
