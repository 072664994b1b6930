"""Container runtimes, one module each (charliecloud.py, bwrap.py, podman.py, ...).

A new runtime is one module here: a `Runtime` subclass registered with
`@RUNTIMES.register`; its name is the module's name, and every list of runtime choices
(command line, study and I/O study files, doctor) comes from this registry. Modules whose
name starts with `_` are a runtime's private helpers.
"""

from ..registry import Registry

RUNTIMES = Registry(__name__, "runtime", first=("charliecloud", "bwrap", "podman"))
DEFAULT = "charliecloud"


def names():
    return RUNTIMES.names()


def get(name):
    """An instance of runtime `name`; a one-line error naming the choices otherwise."""
    return RUNTIMES.get(name)()
