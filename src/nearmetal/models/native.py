"""Native: the host program with the host MPI, started by the host launcher."""

from ..program_paths import host_program
from . import MODELS, ModelPlan
from .base import Model


def prepare(req):
    path = host_program(req.program, req.installation["family"])
    return ModelPlan([path] + list(req.args), program=path)


@MODELS.register
class Native(Model):
    """The host program with the host MPI."""

    in_container = False
    title = "Native"
    prepare = staticmethod(prepare)
