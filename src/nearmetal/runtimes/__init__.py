"""Container runtimes, one module each. A new runtime is one module plus a line here."""

from ..errors import NearmetalError

_REGISTRY = {
    "charliecloud": ("charliecloud", "Charliecloud"),
    "bwrap": ("bwrap", "Bubblewrap"),
    "podman": ("podman", "Podman"),
}

NAMES = tuple(_REGISTRY)


def get(name):
    if name not in _REGISTRY:
        raise NearmetalError(f"unknown runtime '{name}' (choose from: {', '.join(NAMES)})")
    module, cls = _REGISTRY[name]
    from importlib import import_module

    return getattr(import_module(f"{__name__}.{module}"), cls)()
