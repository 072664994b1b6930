"""Hybrid: the container brings its own MPI; the host launcher wires it up through PMI."""

from ..errors import NearmetalError
from ..program_paths import container_program
from . import MODELS, ModelPlan
from .base import Model


def prepare(req):
    image, family = req.image, req.installation["family"]
    if family not in image.mpis:
        have = ", ".join(image.mpis) or "no MPI"
        raise NearmetalError(f"hybrid mode needs {family} inside the image, but image '{image.name}' has {have}")
    path, _ = container_program(image, req.program, family)
    notes = []
    inner = (image.meta.get("mpi", {}).get(family) or {}).get("version", "")
    host = req.installation.get("version", "")
    from ..families import get as get_family

    warning = get_family(family).hybrid_warning(host, inner)
    if warning:
        notes.append(warning)
    notes.append(f"hybrid: container {family} {inner or '?'} under host launcher {req.installation['launcher']}")
    return ModelPlan([path] + list(req.args), notes=notes, program=path)


@MODELS.register
class Hybrid(Model):
    """The image's program with the image's MPI, wired through PMI."""

    title = "Hybrid mode"
    prepare = staticmethod(prepare)
