"""A different MPI library than the baseline's: hybrid mode runs the image's MPI, not the
host's (another version, another build, other transports). Evidence: the variant's mode, the
MPI library the ranks loaded (per-rank mpi_library, or the witness's in the context) against
the baseline's. Ablation: bind mode (the host's MPI bound into the container) instead of hybrid."""

from . import EXPLAINERS
from .base import Explainer, replaced


def libraries(ev):
    libs = {(r.get("mpi_library") or {}).get("soname") or (r.get("mpi_library") or {}).get("path")
            for r in ev.every_rank()} - {None}
    witness = ev.context.get("witness")
    if not libs and isinstance(witness, list):  # [{rank, program, library, inode, version}] (witness/)
        libs = {str(w.get("library")) + (f" ({w['version']})" if w.get("version") else "")
                for w in witness if isinstance(w, dict) and w.get("library")}
    return libs


@EXPLAINERS.register
class MpiLibrary(Explainer):
    title = "a different MPI library (hybrid vs the host's)"

    def examine(self, slow, base):
        mine, theirs = libraries(slow), libraries(base)
        differs = bool(mine and theirs and mine != theirs)
        hybrid_only = slow.variant.get("mode") == "hybrid" and base.variant.get("mode") != "hybrid"
        if not hybrid_only and not differs:
            return []
        fact = (f"the ranks loaded {', '.join(sorted(mine))}; the baseline's {', '.join(sorted(theirs))}" if differs
                else "hybrid mode: the ranks ran the image's MPI library, not the host's")
        ablation = replaced(slow.variant, mode="bind") if slow.variant.get("mode") == "hybrid" else None
        return [self.cause(fact, 0.6 if differs else 0.4, factor="bind-mode", ablation=ablation,
                           fix="bind the host's MPI into the container (mode bind)")]
