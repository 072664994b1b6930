"""Which answers are slower, and the candidate causes of each, ranked.

A slower answer is a compared variant whose overall answer, or one of whose benchmarks'
answers, is "slower" (analysis/answers.py). Its candidates are every explainer's Causes for
its evidence against its baseline's: causes with an ablation first (they can be tested),
strongest first; then the untestable ones; the descriptive ones (where the time went) apart."""

from .explainers import all_explainers

TOP = 3  # candidates ablated per slower answer: each costs a cell per benchmark per block

_IDENTITY = ("name",)


def identical(a, b):
    """Two variant dicts that launch the same thing (an A/A pair): equal but for their names."""
    strip = lambda v: {k: x for k, x in (v or {}).items() if k not in _IDENTITY and x not in (None, "", False, {}, [])}  # noqa: E731
    return strip(a) == strip(b)


def slower_answers(analysis, skip=()):
    """[(by_variant answer, [benchmarks it is slower on])] of the analysis, less variants in `skip`."""
    answers = analysis.get("answers") or {}
    out = []
    for entry in answers.get("by_variant") or []:
        vid = entry.get("variant")
        if vid in skip:
            continue
        benches = sorted({e["benchmark"] for e in answers.get("by_benchmark") or []
                          if e.get("variant") == vid and e.get("verdict") == "slower"})
        if entry.get("verdict") == "slower" or benches:
            out.append((entry, benches))
    return out


def rank(slow, base, explainers=None, processes=True):
    """(tested, untested, descriptive): the Causes of slow (Evidence) against base, ranked."""
    causes = []
    for ex in explainers or all_explainers():
        if ex.needs_process and not processes:
            continue
        causes += ex.examine(slow, base)
    tested = sorted((c for c in causes if c.ablation is not None and not c.descriptive), key=lambda c: -c.strength)
    untested = sorted((c for c in causes if c.ablation is None and not c.descriptive), key=lambda c: -c.strength)
    where = [c for c in causes if c.descriptive]
    seen, unique = [], []
    for c in tested:  # two explainers proposing the same change test it once
        if c.ablation not in seen:
            seen.append(c.ablation)
            unique.append(c)
    return unique, untested, where
