"""What every MPI model shares: the plan it makes for a rank, and the class it registers."""

from abc import ABC, abstractmethod


class ModelPlan:
    """argv: what each rank runs (inside the container unless native); env: variables for
    the ranks (inside the container); mounts: extra bind mounts; notes: what was decided and why."""

    __slots__ = ("argv", "env", "mounts", "notes", "program", "host_file", "staged", "devices")

    def __init__(self, argv, env=None, mounts=(), notes=(), program=None):
        self.argv, self.env, self.mounts, self.notes = list(argv), dict(env or {}), list(mounts), list(notes)
        self.program = program
        self.host_file = self.staged = None
        self.devices = []  # host device files the ranks need (bind mode's fabric: models/_fabric.py)


class Model(ABC):
    """One MPI model, registered with `@MODELS.register` in a module of models/ (its name is
    the module's: the `mode` users name). in_container: its ranks run inside an image, so a
    launch needs a runtime and an image; title: its name in sentences ("Bind mode on
    Charliecloud"); prepare(resolved): the ModelPlan for one component."""

    name = ""
    in_container = True
    title = ""

    @staticmethod
    @abstractmethod
    def prepare(req):
        """The ModelPlan for one resolved component (every model defines it)."""
