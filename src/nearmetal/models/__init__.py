"""MPI models: how the MPI library reaches a rank, one module each (native.py, hybrid.py, bind.py).

native: host program, host MPI. hybrid: container program with the container's own MPI,
wired to the host launcher through PMI. bind: container program with the host MPI
mounted in and preferred. Each model turns a resolved request into a ModelPlan.

A new model is one module here: a `Model` subclass registered with `@MODELS.register`; its
name is the module's, and every list of modes (command line, study and I/O study files)
comes from this registry. Modules whose name starts with `_` are a model's private helpers.
"""

from ..registry import Registry
from .base import ModelPlan  # noqa: F401  (the models' modules and tests import it from here)

MODELS = Registry(__name__, "mode", first=("native", "hybrid", "bind"))


def names():
    return MODELS.names()


def in_container(mode):
    """Whether mode's ranks run inside an image (every model but native); an unknown mode: the
    registry's one-line error."""
    return MODELS.get(mode).in_container


def prepare(mode, request):
    return MODELS.get(mode).prepare(request)
