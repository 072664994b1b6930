"""Where nearmetal keeps its state: images, staged bind libraries, host kernels, caches."""

import os
from pathlib import Path

# The repository's kernels/ directory (the package is installed editable from the checkout).
KERNELS_SRC = Path(__file__).resolve().parents[2] / "kernels"


def home() -> Path:
    """$NEARMETAL_HOME, else $XDG_CACHE_HOME/nearmetal, else ~/.cache/nearmetal."""
    env = os.environ.get("NEARMETAL_HOME")
    if env:
        return Path(env).expanduser().resolve()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return (Path(cache) / "nearmetal").resolve()


def subdir(name: str) -> Path:
    path = home() / name
    path.mkdir(parents=True, exist_ok=True)
    return path
