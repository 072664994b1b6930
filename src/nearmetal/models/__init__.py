"""MPI models: how the MPI library reaches a rank.

native: host program, host MPI. hybrid: container program with the container's own MPI,
wired to the host launcher through PMI. bind: container program with the host MPI
mounted in and preferred. Each model turns a request into a ModelPlan.
"""

from ..errors import NearmetalError

MODES = ("native", "hybrid", "bind")


class ModelPlan:
    """argv: what each rank runs (inside the container unless native); env: variables for
    the ranks (inside the container); mounts: extra bind mounts; notes: what was decided and why."""

    __slots__ = ("argv", "env", "mounts", "notes", "program", "host_file", "staged", "devices")

    def __init__(self, argv, env=None, mounts=(), notes=(), program=None):
        self.argv, self.env, self.mounts, self.notes = list(argv), dict(env or {}), list(mounts), list(notes)
        self.program = program
        self.host_file = self.staged = None
        self.devices = []  # host device files the ranks need (bind mode's fabric: models/fabric.py)


def prepare(mode, request):
    if mode == "native":
        from .native import prepare as p
    elif mode == "hybrid":
        from .hybrid import prepare as p
    elif mode == "bind":
        from .bind import prepare as p
    else:
        raise NearmetalError(f"unknown mode '{mode}' (choose from: {', '.join(MODES)})")
    return p(request)
