"""The rank tests' floor: the smallest p compare()'s test can give with so many blocks,
whatever the data. A look that tests at a level below it can never call a point slower or
faster (docs/statistics.md, "The floor"); the dry run and the answers' words say so."""

import math

from .stats import _WILCOXON_MIN_PAIRS


def smallest_p(n, paired=True, other=None):
    """The smallest two-sided p compare()'s exact rank test can give with n blocks (n values a
    side; unpaired, `other` values on the other side), whatever the data: every difference of
    one sign (Wilcoxon), or the groups wholly apart (Mann-Whitney). A level below it cannot be
    reached: 6 pairs give at best 0.031."""
    if paired and n >= _WILCOXON_MIN_PAIRS:
        return min(1.0, 2.0 / 2 ** n)
    return min(1.0, 2.0 / math.comb(n + (other or n), n))


def out_of_reach(c, most=200):
    """Whether an undecided comparison's rank test could not reach its level at its block count,
    whatever the data: {'blocks', 'smallest_p', 'level', 'blocks_needed'}, else None. Said only
    where the exact test ran (its p at or above the floor: ties switch to the normal
    approximation, which has none). The floor is not monotone (5 blocks, Mann-Whitney: 0.0079;
    6, Wilcoxon: 0.031): the blocks needed are the fewest beyond these that reach it."""
    level, paired, p = c.get("alpha"), bool(c.get("paired")), c.get("p_value")
    n = c.get("n_pairs") if paired else c.get("n_baseline")
    other = None if paired else c.get("n_variant")
    if c.get("verdict") != "inconclusive" or not isinstance(level, float) or not isinstance(p, float) \
            or not n or n < 2 or (not paired and not other):
        return None
    floor = smallest_p(n, paired, other)
    if floor < level or p < floor * (1 - 1e-9):
        return None
    needed = next((k for k in range(n + 1, most) if smallest_p(k, paired, other and k) < level), None)
    return {"blocks": n, "smallest_p": floor, "level": level, "blocks_needed": needed}
