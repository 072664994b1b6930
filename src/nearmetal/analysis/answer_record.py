"""One answer as a record: what a first screen, a matrix or a test reads of an answer,
from analysis['answers']['by_benchmark'] (analysis/answers.py), with the same numbers every
format prints: one estimator, one interval at the level the points were decided at, one
noise figure."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Answer:
    variant: str           # variant id
    name: str              # the variant in words (answer_text.variant_names)
    baseline: str
    benchmark: str
    metric: str            # the quantity answered
    also: tuple            # its reciprocals, answered with it (quantities.py)
    primary: bool          # the benchmark's primary metric: the first screen answers it
    ranks: int | None      # the placement, where the benchmark was measured at several
    threads: int | None
    label: str             # the benchmark (and metric, placement) in words
    ratio: float           # cost ratio: > 1 the variant is slower
    lo: float | None       # its interval
    hi: float | None
    level: float           # the interval's level, e.g. 0.989
    level_words: str       # '98.6% interval (sequential, 9 looks planned)'
    estimator: str
    verdict: str           # equivalent, slower, faster or inconclusive
    noise_pct: float | None  # the baseline's coefficient of variation, % (median over the points)
    n_points: int
    n_blocks: int
    disturbed: int         # values from runs taken on a busy machine (study/execute/contention.py)
    text: str              # the answer in words

    @classmethod
    def of(cls, e):
        return cls(variant=e["variant"], name=e.get("name") or e["variant"], baseline=e["baseline"],
                   benchmark=e["benchmark"], metric=e["metric"], also=tuple(e.get("also") or ()),
                   primary=bool(e.get("primary")), ranks=e.get("ranks"), threads=e.get("threads"), label=e["label"],
                   ratio=e["cost_ratio"], lo=e["ci_low"], hi=e["ci_high"], level=e["ci_level"],
                   level_words=e["level_words"], estimator=e["estimator"], verdict=e["verdict"],
                   noise_pct=e["noise_pct"], n_points=e["n_points"], n_blocks=e["n_blocks"],
                   disturbed=int(e.get("disturbed") or 0), text=e["text"])


def answer_records(analysis):
    """Every answer of an analysis dict as an Answer, primary ones of each variant first."""
    a = analysis.get("answers") or {}
    return [Answer.of(e) for e in a.get("by_benchmark") or [] if isinstance(e, dict)]
