"""A start-up benchmark's cost per launch, in seconds, said beside its answer
(analysis/answers.py): the baseline's typical launch time at the answer's start-up point
times the point's paired ratio minus one, so the seconds and the percentage beside them are
one estimate and never point different ways (a difference of medians can: launches that
fall into modes put each median in whichever mode has the most launches)."""

import math

import numpy as np

from .. import kernels
from .trimmed import TRIM

# the start-up metrics whose answers state a cost per launch, the first one leading
STARTUP_METRICS = ("to_after_init", "wall_to_main")
TIME_SCALE = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "usec": 1e-6, "ms": 1e-3, "msec": 1e-3,
              "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0}


def per_launch(members, metric=STARTUP_METRICS[0]):
    """The start-up cost per launch of the answer on `metric`, at its start-up point (the
    slowest rank where ranks are resolved); for the answer on to_after_init, to main as well
    where both were measured (`to_main_s`): they can differ in sign (MPICH's MPI_Init was
    faster in a container here while reaching main was slower). members: the launch's terms."""
    pts = [t for t in members if kernels.traits(t["kernel"]).per_launch and t["metric"] == metric
           and str(t["unit"] or "").strip().casefold() in TIME_SCALE]
    if not pts:
        return None
    t = min(pts, key=lambda t: 0 if t["point"].get("rank") in ("max", None) else 1)
    out = {"metric": t["metric"], "point": t["point"], "delta_s": _delta(t), "to_main_s": None}
    main = [m for m in members if m["metric"] == "wall_to_main" and m["point"] == t["point"]
            and str(m["unit"] or "").strip().casefold() in TIME_SCALE]
    if metric == "to_after_init" and main:
        out["to_main_s"] = _delta(main[0])
    return out


def _delta(t):
    """Seconds per launch: the baseline's typical launch x (the point's paired ratio - 1),
    typical being its TRIM-trimmed mean, the estimator of the ratio (a median sits in one
    mode where launches fall into two); the ratio of medians where the point has no paired
    ratio. The launches' own values ("raw"), not those an answer rescaled to the fast mode
    where they fall into modes (mode_compare.for_answer): a typical launch spans the modes."""
    base_values, var_values = t.get("raw") or (t["base"], t["var"])
    base = float(_trimmed(base_values))
    ratio = (t.get("comparison") or {}).get("ratio")
    if not (isinstance(ratio, (int, float)) and not isinstance(ratio, bool) and math.isfinite(ratio) and ratio > 0):
        ratio = float(np.median(var_values)) / float(np.median(base_values))
    return base * (ratio - 1) * TIME_SCALE[str(t["unit"]).strip().casefold()]


def _trimmed(x):
    s = np.sort(np.asarray(x, dtype=float))
    g = int(TRIM * s.size)
    return s[g:s.size - g].mean()

