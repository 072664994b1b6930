"""Why a variant is slower than its baseline, tested by experiment (docs/explain.md).

- explainers/: one module per candidate cause (a registry like the runtimes'): each compares
  the evidence of a slow variant with its baseline's (evidence.py) and returns Causes: the
  differing fact, a strength, and an ablation, a variant that changes exactly that factor;
- ablation.py: the ablations made valid, named study variants;
- share.py: the share of the gap an ablation recovers, with a block-bootstrap interval;
- stage.py: `nearmetal explain` (and `explain = true`): plans the ablations in randomized blocks
  beside the slow variant and its baseline, runs them, stores what was found;
- why.py: the "Why" section every report renders (analysis["why"]).
"""
