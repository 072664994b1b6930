"""How every report names its numbers, said once for all formats: the estimator of a point's
ratio, the level of its interval (the one the points were decided at, analysis/answers.py
level_words) and the one noise figure (the baseline's coefficient of variation)."""

from ..analysis.answer_text import level_words
from ..analysis.trimmed import TRIM

# per row: over the blocks that row was decided on (a variant decided at an earlier look used fewer),
# so one baseline's noise may differ from row to row
NOISE = "noise = the baseline's run-to-run coefficient of variation (std / mean) in the blocks the row was decided on"


def level_short(analysis):
    """'98.6%': the level of the intervals shown, for a column header."""
    return level_words(analysis).split(" ")[0]


def ratio_column(analysis):
    # not "ratio": the answers' cost ratio inverts rates, this column never does
    return f"var/base [{level_short(analysis)}]"


def ratio_note(analysis):
    """The ratio of a point as the tables give it, with its interval's level."""
    return (f"var/base = variant / baseline of the metric as measured (for a rate, the inverse of the answers' "
            f"cost ratio): exp of the {TRIM * 100:.0f}% trimmed mean of the per-block log ratios "
            f"(paired by randomized block; the ratio of medians where a point is unpaired), with its "
            f"{level_words(analysis)}; overhead > 0 means the variant is slower")


def answer_note(analysis, margin_words):
    """What an answer's numbers are (the answer table's note)."""
    return (f"Cost ratio = variant / baseline for times, baseline / variant for rates (> 1: the variant is slower); "
            f"one answer per quantity: at one point its paired ratio (as in the table), over several points their "
            f"geometric mean, its interval from a paired bootstrap over the randomized blocks; "
            f"{level_words(analysis)} throughout; equivalent (≈): the interval lies within {margin_words}; "
            f"?: undecided, the interval is shown; {NOISE}.")
