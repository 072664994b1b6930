"""Which MPI calls grew, and whether compute (the time outside MPI) grew: the per-rank MPI
profile (mpiP-style classes: point-to-point, collectives, waits, MPI-IO, other). Says where
the time went, tests nothing: the Why section shows it when no tested cause explains a gap."""

import statistics

from . import EXPLAINERS
from .base import Explainer

CLASSES = ("p2p", "collective", "wait", "io", "other")


def where(ev):
    """{class or 'outside MPI': median over runs of the mean seconds per rank}, or None."""
    per_run = []
    for run in ev.ranks:
        profiles = [r["mpi_profile"] for r in run if isinstance(r.get("mpi_profile"), dict)]
        if not profiles:
            continue
        row = {"outside MPI": statistics.mean(p.get("outside_mpi_s") or 0.0 for p in profiles)}
        for c in CLASSES:
            row[c] = statistics.mean(((p.get("classes") or {}).get(c) or {}).get("time_s") or 0.0 for p in profiles)
        per_run.append(row)
    if not per_run:
        return None
    return {k: statistics.median(r[k] for r in per_run) for k in per_run[0]}


@EXPLAINERS.register
class MpiProfile(Explainer):
    title = "which MPI calls (or compute) grew"

    def examine(self, slow, base):
        s, b = where(slow), where(base)
        if not s or not b:
            return []
        grew = {k: s[k] - b.get(k, 0.0) for k in s}
        total = sum(v for v in grew.values() if v > 0)
        if total <= 0:
            return []
        names = {"p2p": "point-to-point", "collective": "collectives", "wait": "waits", "io": "MPI-IO",
                 "other": "other MPI calls", "outside MPI": "compute (outside MPI)"}
        parts = [f"{names[k]} {v * 1e3:+.1f} ms" for k, v in sorted(grew.items(), key=lambda kv: -kv[1]) if v > 0]
        top = max(grew, key=grew.get)
        return [self.cause("per rank and run: " + ", ".join(parts[:3]), grew[top] / total, descriptive=True,
                           details={"grew_s": grew, "top": top})]
