"""A cgroup CPU quota on the ranks (podman --cpus, --cpu-quota): fewer cores' worth of time
than the ranks need. Evidence: the per-rank cgroup (cpu_quota_cores, v1 or v2) and the runtime
options that set one. Ablation: the option removed."""

from . import EXPLAINERS
from .base import Explainer, without_args

_QUOTA = ("--cpus", "--cpu-quota", "--cpu-period", "-c", "--cpu-shares")


def _sets_quota(arg, _next):
    if arg in _QUOTA:
        return 2
    return 1 if "=" in arg and arg.split("=", 1)[0] in _QUOTA else 0


def quota_of(ev):
    quotas = [(r.get("cgroup") or {}).get("cpu_quota_cores") for r in ev.every_rank()]
    quotas = [q for q in quotas if isinstance(q, (int, float))]
    return min(quotas) if quotas else None


@EXPLAINERS.register
class Quota(Explainer):
    title = "a cgroup CPU quota"

    def examine(self, slow, base):
        ablation = without_args(slow.variant, _sets_quota)
        options = [a for a in slow.variant.get("runtime_args") or [] if a not in (ablation.get("runtime_args") or [])]
        q, bq = quota_of(slow), quota_of(base)
        ranks = max([len(run) for run in slow.ranks] + [0])
        if q is not None and (bq is None or q < bq):
            need = f" for {ranks} ranks" if ranks else ""
            fact = f"the ranks' cgroup allowed {q:g} CPUs' time{need}; the baseline's {'none' if bq is None else f'{bq:g}'}"
            strength = 0.9 if ranks and q < ranks else 0.5
        elif options:
            fact, strength = f"the runtime set a CPU quota ({' '.join(options)})", 0.6
        else:
            return []
        return [self.cause(fact, strength, factor="no-quota", ablation=ablation if options else None,
                           fix=f"drop {' '.join(options)}" if options else "run without a CPU quota")]
