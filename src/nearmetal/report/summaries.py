"""The per-variant summary in words and the failures' headline, as every report format
prints them."""

from collections import defaultdict

from ..analysis.answer_text import variant_names
from ..analysis.answers import is_cost
from . import formatting as F
from . import method_words as MW
from . import points as PT


def where_label(p, multi_placement):
    bench, metric = p.get("benchmark"), p.get("metric")
    label = F.point_label(p.get("point"))
    what = bench if metric == bench else f"{bench} {metric}"
    s = what if label == "—" else f"{label} {what}"
    if multi_placement:
        s += f" ({F.fmt_placement(p.get('ranks'), p.get('threads'))})"
    return s


def _points(n):
    return f"{n} point{'' if n == 1 else 's'}"


def variant_summaries(analysis):
    """Per variant: counts of verdicts, the worst slower and best faster point, and a
    sentence. Returns a list of dicts in variant order:
    {variant, baseline, compared, measured, counts: {verdict: n}, worst, best, text}."""
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
    # metrics the answers leave out (wall time beside a program's own figure): said apart, so the
    # counts agree with the answers ("none slower" above must not meet "slower at 1" here)
    aside_why = {(n.get("benchmark"), n.get("metric")): n.get("why")
                 for n in (analysis.get("answers") or {}).get("not_answered") or []
                 if not n.get("answered_as")}  # a reciprocal is answered, as the metric it mirrors
    names = variant_names(analysis)  # one naming scheme for every variant in words
    out = []
    order = PT.variant_order(analysis)
    for vid in sorted(PT.variants_of(analysis), key=order.get):
        entries = by_variant.get(vid, [])
        compared, aside = [], []
        for p in filter(PT.comparison, entries):
            if (p.get("benchmark"), p.get("metric")) in aside_why:
                aside.append(p)
            elif is_cost(p):  # no count (bytes, files) nor a kernel's check value (a checksum): not costs
                compared.append(p)
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
                users = sorted(names.get(k, k) for k, b in base_of.items() if b == vid)
                text = f"{names.get(vid, vid)}: baseline for {', '.join(users)}" if users else \
                    f"{names.get(vid, vid)}: baseline, no variant compared with it"
                text += f" ({_points(len(entries))} measured, every metric and parameter)."
            else:
                text = f"{names.get(vid, vid)}: no point compared with a baseline ({_points(len(entries))} measured)."
        else:
            m = margin if F.is_num(margin) else (PT.comparison(compared[0]) or {}).get("margin")
            mtxt = f" within ±{m * 100:g}%" if F.is_num(m) else ""
            bname = baseline or (compared[0].get("baseline") or "the baseline")
            bname = names.get(bname, bname)
            # every compared point of the answered metrics (each parameter), not the answers' quantities
            # (no "equivalent ... at 0 of N": with none equivalent, the count of compared points alone)
            parts = [f"equivalent to {bname}{mtxt} at {counts['equivalent']} of {len(compared)} compared points"
                     if counts["equivalent"] else f"{_points(len(compared))} compared with {bname}"]
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
            text = f"{names.get(vid, vid)}: " + "; ".join(parts) + "." + _aside_words(aside, aside_why, multi)
        out.append({"variant": vid, "baseline": baseline, "compared": len(compared), "measured": len(entries),
                    "counts": counts, "worst": worst[0] if worst else None, "best": best[0] if best else None,
                    "text": text})
    return out


def _aside_words(aside, why, multi):
    """' Not answered: halo wall_time slower +23% (launch to exit, start-up included: ...).'"""
    if not aside:
        return ""
    by_reason = defaultdict(list)  # each metric with its own reason
    for p in aside:
        by_reason[why.get((p.get("benchmark"), p.get("metric")))].append(p)
    parts = []
    for reason, points in by_reason.items():
        said = []
        for p in points[:3]:
            oh = PT.comparison(p).get("overhead_pct")
            pct = f" {F.fmt_pct(oh, digits=0 if abs(oh) >= 10 else 1)}" if F.is_num(oh) else ""
            said.append(f"{where_label(p, len(multi[p.get('benchmark')]) > 1)} {PT.verdict_of(p)}{pct}")
        more = f" and {len(points) - 3} more" if len(points) > 3 else ""
        parts.append(f"{', '.join(said)}{more}" + (f" ({reason})" if reason else ""))
    return f" Not answered: {'; '.join(parts)}."


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
    for s in runs.get("skipped") or []:  # a benchmark, or one of its cells, stopped after a run
        head += f" {s['runs']} runs of {s['benchmark']} skipped: {s['why'].removeprefix('skipped: ')}"
    return head, (fails[0] if fails else None)


def answer(analysis):
    """The top-line answer of analysis['answers'] (analysis/answers.py) for every format, or
    None when the analysis has none: {"sentences": [(text, tone)], "note": str} (the verdict
    matrix is matrix.py's).
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
    sentences = []
    for s in a.get("headline") or []:
        sentences.append((s, tones.get(s, "inconclusive")))
        v = next((v for v in by_v if v.get("sentence") == s), None)
        for c in cells if v and v.get("more") else ():  # the other quantities follow the primary ones
            if c.get("variant") == v.get("variant") and c.get("text") in v["more"]:
                sentences.append((f"{v.get('name') or v.get('variant')}: {c['text']}.",
                                  c.get("verdict") or "inconclusive"))
    margin = a.get("margin")
    note = MW.answer_note(analysis, f"±{margin * 100:g}%" if F.is_num(margin) else "the margin")
    skipped = [n for n in a.get("not_answered") or [] if isinstance(n, dict)]
    if skipped:  # what has no answer of its own, and how to ask for it
        note += " Not answered on their own: " + "; ".join(f"{n.get('benchmark')} {n.get('metric')} ({n.get('why')})"
                                                          for n in skipped) + "."
    return {"sentences": sentences, "note": note}


FINDING_TONE = {"reproduced": "equivalent", "not reproduced": "slower", "undecided": "inconclusive",
                "not measurable here": "baseline"}


def findings(analysis):
    """The study's published findings and this study's verdict on each (analysis['findings'],
    analysis/findings.py), for every format: [{"verdict", "tone", "statement", "source",
    "compared", "result", "paper"}], or [] when the study states none."""
    out = []
    names = variant_names(analysis)
    for f in analysis.get("findings") or []:
        if not isinstance(f, dict):
            continue
        verdict = str(f.get("verdict") or "?")
        name = names.get(f.get("variant"), f.get("variant"))
        compared = f"{name} {f.get('benchmark')} vs {names.get(f.get('reference'), f.get('reference'))}"
        if f.get("reference") and str(f.get("reference")).startswith(f"{f.get('variant')} "):
            compared = f"{f.get('benchmark')} vs {str(f.get('reference'))[len(str(f.get('variant'))) + 1:]} " \
                       f"({name})"
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
