"""Ranks in separate user or IPC namespaces (seed 003's multi-task finding: Apptainer with
--userns gives every rank its own, so MPICH's shared memory between them fails and falls back
or costs). Evidence: the per-rank namespaces (ranks of one run in different namespaces; the
baseline's in one), the runtime's own context (`userns`) and the options that separate ranks
(the runtime's own separates_ranks: Apptainer's --userns/--containall/--ipc/--pid). Ablation:
those options removed (the runtime's default shares the launcher's IPC namespace)."""

from ...models import in_container
from . import EXPLAINERS
from .base import Explainer, without_args

def _separating(runtime_name):
    """drop(arg, next) for without_args: the options with which the runtime (its own
    separates_ranks) puts ranks in separate namespaces where it would not without them."""
    from ... import runtimes

    try:
        runtime = runtimes.get(runtime_name) if runtime_name else None
    except Exception:  # noqa: BLE001 - a runtime this nearmetal does not know: nothing to drop
        runtime = None
    if runtime is None or runtime.separates_ranks([]):
        return lambda arg, _next: 0
    return lambda arg, _next: 1 if runtime.separates_ranks([arg]) else 0


def separated_kinds(ev):
    """The namespace kinds ('user', 'ipc') in which the ranks of one run differ."""
    kinds = set()
    for run in ev.ranks:
        for kind in ("user", "ipc"):
            seen = {(r.get("ns") or {}).get(kind) for r in run if isinstance(r, dict)} - {None}
            if len(seen) > 1:
                kinds.add(kind)
    return kinds


@EXPLAINERS.register
class Namespaces(Explainer):
    title = "ranks in separate user or IPC namespaces"

    def examine(self, slow, base):
        kinds = separated_kinds(slow) - separated_kinds(base)
        args = list(slow.variant.get("runtime_args") or [])
        ablation = without_args(slow.variant, _separating(slow.variant.get("runtime")))
        options = [a for a in args if a not in (ablation.get("runtime_args") or [])]
        runtime = slow.context.get("runtime") or {}
        if not kinds and not options and not (runtime.get("userns") and not (base.context.get("runtime") or {})
                                              .get("userns") and in_container(base.variant.get("mode") or "native")):
            return []
        if kinds:
            fact = f"the ranks of one run were in separate {' and '.join(sorted(kinds))} namespaces; the baseline's shared them"
        else:
            fact = f"the runtime separated the ranks ({' '.join(options) or 'a user namespace per rank'})"
        return [self.cause(fact, 0.8 if kinds or options else 0.5, factor="shared-ns",
                           ablation=ablation if options else None,
                           fix="share the host's IPC namespace between ranks"
                               + (f" (drop {' '.join(options)})" if options else ""))]
