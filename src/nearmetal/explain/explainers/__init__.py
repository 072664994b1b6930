"""The explainers: one module per candidate cause of a slower variant (docs/explain.md,
"Explainers"). A new one is one module here with `@EXPLAINERS.register class X(Explainer)`."""

from ...registry import Registry

EXPLAINERS = Registry(__name__, "explainer")


def all_explainers():
    """An instance of every explainer, in the registry's order."""
    return [cls() for cls in EXPLAINERS.all()]
