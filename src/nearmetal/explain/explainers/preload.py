"""An rtld-audit library (LD_AUDIT) or preloaded library (LD_PRELOAD) in the slow variant's
ranks only (seed 002: an auditor sees every symbol binding). Evidence: the variant's `audit`
dimension, the ranks' environment, and the per-rank evidence's ld_audit/ld_preload. Ablation:
`audit` off, or the variable unset for the ranks."""

from . import EXPLAINERS
from .base import Explainer, replaced, without_env


def _ranks_say(ev, key):
    return {r.get(key) for r in ev.every_rank() if r.get(key)}


@EXPLAINERS.register
class Preload(Explainer):
    title = "LD_AUDIT or LD_PRELOAD in the variant's ranks"

    def examine(self, slow, base):
        found = []
        if slow.variant.get("audit") and not base.variant.get("audit"):
            found.append(self.cause("the ranks ran under nearmetal's rtld-audit library (audit = true, LD_AUDIT); "
                                    "the baseline's did not", 0.8, factor="no-audit",
                                    ablation=replaced(slow.variant, audit=None),
                                    fix="load libraries without an rtld-audit library (unset LD_AUDIT)"))
        own = slow.variant.get("env") or {}
        for key, strength, field in (("LD_AUDIT", 0.8, "ld_audit"), ("LD_PRELOAD", 0.5, "ld_preload")):
            value = slow.env.get(key)
            said = _ranks_say(slow, field) - _ranks_say(base, field)
            if (value and base.env.get(key) != value) or (said and not value):
                shown = value or sorted(said)[0]
                found.append(self.cause(f"{key}={shown} in the ranks; not in the baseline's", strength,
                                        factor=f"no-{key.lower().replace('_', '-')}",
                                        ablation=without_env(slow.variant, key) if key in own else None,
                                        fix=f"unset {key} for the ranks"))
        return found
