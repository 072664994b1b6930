"""Native: the host program with the host MPI, started by the host launcher."""

from . import ModelPlan
from .program import host_program


def prepare(req):
    path = host_program(req.program, req.installation["family"])
    return ModelPlan([path] + list(req.args), program=path)
