"""Hybrid: the container brings its own MPI; the host launcher wires it up through PMI."""

from ..errors import NearmetalError
from . import ModelPlan
from .program import container_program


def prepare(req):
    image, family = req.image, req.mpi["family"]
    if family not in image.mpis:
        have = ", ".join(image.mpis) or "no MPI"
        raise NearmetalError(f"hybrid mode needs {family} inside the image, but image '{image.name}' has {have}")
    path, _ = container_program(image, req.program, family)
    notes = []
    inner = (image.meta.get("mpi", {}).get(family) or {}).get("version", "")
    host = req.mpi.get("version", "")
    if family == "openmpi" and inner and host and inner.split(".")[0] != host.split(".")[0]:
        # ORTE/PMIx wire-up is only tested within one Open MPI major version.
        notes.append(f"warning: host Open MPI {host} launching container Open MPI {inner}: "
                     f"different major versions rarely wire up; prefer bind mode")
    notes.append(f"hybrid: container {family} {inner or '?'} under host launcher {req.mpi['launcher']}")
    return ModelPlan([path] + list(req.args), notes=notes, program=path)
