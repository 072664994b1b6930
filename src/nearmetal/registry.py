"""Backends of one kind (runtimes, launchers, schedulers, MPI families, ...): one module each.

A backend is a module in its kind's package that defines one class decorated with that
kind's `register`. Its name is its module's name, so the list of choices — argparse, the
fast `run` parser, study and I/O study validation, doctor — comes from the package's
files without importing any backend (`nearmetal run` must stay fast); a backend's module
is imported when it is first asked for. Helper modules in the package start with `_` or
are named `base`.

Adding a backend is therefore one file: `runtimes/apptainer.py` with
`@RUNTIMES.register class Apptainer(Runtime): ...`.
"""

import os

from .errors import NearmetalError


class Registry:
    def __init__(self, package, kind, first=()):
        """package: the dotted name of the backends' package; kind: what a backend is called
        in messages ("runtime"); first: names listed first, in this order (defaults)."""
        self.package, self.kind, self.first = package, kind, tuple(first)
        self._classes = {}
        self._names = None
        self._extra = []

    def _dir(self):
        import sys

        return os.path.dirname(sys.modules[self.package].__file__)

    def names(self):
        """Every backend's name, defaults first, without importing any backend."""
        if self._names is None:
            found = sorted(f[:-3] for f in os.listdir(self._dir())
                           if f.endswith(".py") and not f.startswith("_") and f != "base.py")
            found += [n for n in self._extra if n not in found]
            self._names = tuple([n for n in self.first if n in found] + [n for n in found if n not in self.first])
        return self._names

    def register(self, cls=None, *, name=None):
        """Class decorator: `@REG.register` (the module's name) or `@REG.register(name=...)`."""

        def add(c):
            key = name or c.__module__.rsplit(".", 1)[-1]
            c.name = key
            self._classes[key] = c
            if key not in self.names():  # registered from elsewhere (a test, a plugin)
                self._extra.append(key)
                self._names = None
            return c

        return add(cls) if cls is not None else add

    def unregister(self, name):
        """Undo a register() of a backend defined outside the package (tests)."""
        self._classes.pop(name, None)
        if name in self._extra:
            self._extra.remove(name)
            self._names = None

    def get(self, name):
        """The backend class called `name`; a one-line error naming the choices otherwise."""
        if name not in self._classes:
            if name not in self.names():
                raise NearmetalError(f"unknown {self.kind} '{name}' (choose from: {', '.join(self.names())})")
            # __import__, not importlib.import_module: importing importlib (and warnings with
            # it) costs `nearmetal run` 0.3 ms, and this is its hot path.
            __import__(f"{self.package}.{name}")
            if name not in self._classes:
                raise NearmetalError(f"internal error: {self.package}.{name} registers no {self.kind}")
        return self._classes[name]

    def all(self):
        """Every backend class, importing each (for doctor and tests, not for hot paths)."""
        return [self.get(n) for n in self.names()]
