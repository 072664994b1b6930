"""A seccomp filter on the ranks (a runtime's default profile): each system call is checked
against it. Evidence: the per-rank seccomp mode (2: a filter) against the baseline's, and the
runtime options naming a profile. Ablation: the option removed (a runtime's default filter:
advice only, e.g. Podman's --security-opt=seccomp=unconfined). Usually cheap: weak unless the program makes many calls."""

from . import EXPLAINERS
from .base import Explainer, without_args


def _names_seccomp(arg, _next):
    if arg == "--security-opt" and _next and str(_next).startswith("seccomp"):
        return 2
    return 1 if arg.startswith("--security-opt=seccomp") else 0


def filtered(ev):
    modes = [r.get("seccomp") for r in ev.every_rank() if r.get("seccomp") is not None]
    return any(m == 2 for m in modes) if modes else None


@EXPLAINERS.register
class Seccomp(Explainer):
    title = "a seccomp filter"

    def examine(self, slow, base):
        s, b = filtered(slow), filtered(base)
        ablation = without_args(slow.variant, _names_seccomp)
        options = [a for a in slow.variant.get("runtime_args") or [] if a not in (ablation.get("runtime_args") or [])]
        if not (s and not b) and not options:
            return []
        if not options:  # the runtime's own default filter: advice, in its words
            ablation = None
        fact = ("the ranks ran under a seccomp filter; the baseline's did not" if s and not b
                else f"the runtime set a seccomp profile ({' '.join(options)})")
        return [self.cause(fact, 0.3, factor="no-seccomp", ablation=ablation,
                           fix="run without the seccomp filter (podman --security-opt=seccomp=unconfined)")]
