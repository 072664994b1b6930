"""Ranks that share a core, are not bound to one, or migrate. Evidence: the per-rank CPUs
(cpus_allowed, the CPU at start and end, migrations) of each run, and the runtime options
that confine the ranks' CPUs (--cpuset-cpus), the variant's `binding`. Ablation: the confining
option removed, or a variant with `binding = "none"` run with `binding = "core"` (the
launchers bind each rank to its own core); where nothing in the variant decides it, none: the
fix is advice (mpirun --bind-to core, mpiexec.hydra -bind-to core)."""

import statistics

from . import EXPLAINERS
from .base import Explainer, without_args

_CPUSET = ("--cpuset-cpus", "--cpu-set")


def _confines(arg, _next):
    if arg in _CPUSET:
        return 2
    return 1 if arg.split("=", 1)[0] in _CPUSET and "=" in arg else 0


def shared_core_share(ev):
    """The share of runs in which two ranks started or ended on one CPU, or could only use one."""
    runs = [run for run in ev.ranks if len(run) > 1]
    if not runs:
        return None
    hit = 0
    for run in runs:
        for key in ("cpu_start", "cpu_end"):
            cpus = [r.get(key) for r in run if r.get(key) is not None]
            if len(cpus) != len(set(cpus)):
                hit += 1
                break
        else:
            allowed = [tuple(r.get("cpus_allowed") or ()) for r in run]
            if all(len(a) == 1 for a in allowed) and len(set(allowed)) < len(allowed):
                hit += 1
    return hit / len(runs)


def unbound_share(ev):
    ranks = [r for r in ev.every_rank() if r.get("cpus_allowed")]
    return sum(len(r["cpus_allowed"]) > 1 for r in ranks) / len(ranks) if ranks else None


def median_migrations(ev):
    per_run = [sum(r.get("migrations") or 0 for r in run) for run in ev.ranks if run]
    return statistics.median(per_run) if per_run else None


@EXPLAINERS.register
class Binding(Explainer):
    title = "ranks sharing a core, not bound, or migrating"

    def examine(self, slow, base):
        ablation = without_args(slow.variant, _confines)
        options = [a for a in slow.variant.get("runtime_args") or [] if a not in (ablation.get("runtime_args") or [])]
        facts, strength = [], 0.0
        s, b = shared_core_share(slow), shared_core_share(base)
        if s is not None and s > (b or 0) + 0.25:
            facts.append(f"in {s:.0%} of runs two ranks shared one CPU (the baseline's: {(b or 0):.0%})")
            strength = 0.9
        su, bu = unbound_share(slow), unbound_share(base)
        if su is not None and bu is not None and su > bu + 0.5:
            facts.append(f"{su:.0%} of ranks could run on several CPUs (not bound; the baseline's: {bu:.0%})")
            strength = max(strength, 0.4)
        sm, bm = median_migrations(slow), median_migrations(base)
        if sm is not None and bm is not None and sm > 2 * bm + 5:
            facts.append(f"the ranks migrated {sm:g} times per run (the baseline's: {bm:g})")
            strength = max(strength, 0.4)
        if options:
            facts.append(f"the runtime confined the ranks' CPUs ({' '.join(options)})")
            strength = max(strength, 0.6)
        unbound = slow.variant.get("binding") == "none" and base.variant.get("binding") != "none"
        if unbound:
            facts.append('the variant asks for unbound ranks (binding = "none"; the baseline\'s are bound)')
            strength = max(strength, 0.5)
        if not facts:
            return []
        if options:
            ablation, fix = ablation, f"drop {' '.join(options)}"
        elif slow.variant.get("binding") == "none":  # the study's own binding, which the launchers apply
            ablation, fix = {**slow.variant, "binding": "core"}, 'binding = "core" (each rank on a core of its own)'
        else:
            ablation, fix = None, "bind each rank to its own core (mpirun --bind-to core; mpiexec.hydra -bind-to core)"
        return [self.cause("; ".join(facts), strength, factor="own-cores", ablation=ablation, fix=fix)]
