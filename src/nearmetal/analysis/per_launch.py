"""A start-up benchmark's cost per launch, in seconds: the difference of medians at its
start-up point, said beside its answer (analysis/answers.py)."""

import numpy as np

from .. import kernels

# the start-up point whose difference of medians is stated per launch, in this order
STARTUP_METRICS = ("to_after_init", "wall_to_main")
TIME_SCALE = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "usec": 1e-6, "ms": 1e-3, "msec": 1e-3,
              "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0}


def per_launch(members):
    """The start-up cost per launch: the difference of medians at the start-up point
    (launch to after MPI_Init, else to main; the slowest rank where ranks are resolved), and
    to main as well where both were measured (`to_main_s`): they can differ in sign (MPICH's
    MPI_Init was faster in a container here while reaching main was slower)."""
    pts = [t for t in members if kernels.traits(t["kernel"]).per_launch
           and str(t["unit"] or "").strip().casefold() in TIME_SCALE]
    if not pts:
        return None

    def rank(t):
        metric = STARTUP_METRICS.index(t["metric"]) if t["metric"] in STARTUP_METRICS else len(STARTUP_METRICS)
        return (metric, 0 if t["point"].get("rank") in ("max", None) else 1)

    def delta(t):
        scale = TIME_SCALE[str(t["unit"]).strip().casefold()]
        return (float(np.median(t["var"])) - float(np.median(t["base"]))) * scale

    t = min(pts, key=rank)
    out = {"metric": t["metric"], "point": t["point"], "delta_s": delta(t), "to_main_s": None}
    main = [m for m in pts if m["metric"] == "wall_to_main" and m["point"] == t["point"]]
    if t["metric"] == "to_after_init" and main:
        out["to_main_s"] = delta(main[0])
    return out
