"""Where nearmetal keeps its state: images, staged bind libraries, host kernels, caches."""

import os

# The kernels' C sources (Makefile, nm-*.c, common/, iobench/, data/): package data, so an
# installed wheel builds them as well as the checkout does. Read only: builds go to a PREFIX.
KERNELS_SRC_STR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernels", "csrc")


def home_str() -> str:
    """$NEARMETAL_HOME, else $XDG_CACHE_HOME/nearmetal, else ~/.cache/nearmetal (no pathlib: hot path)."""
    env = os.environ.get("NEARMETAL_HOME")
    if env:
        return os.path.abspath(os.path.expanduser(env))
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.abspath(os.path.join(cache, "nearmetal"))


def home():
    from pathlib import Path

    return Path(home_str())


def subdir(name: str):
    path = home() / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def __getattr__(name):
    # KERNELS_SRC as a Path, built on first use so importing this module stays cheap.
    if name == "KERNELS_SRC":
        from pathlib import Path

        return Path(KERNELS_SRC_STR)
    raise AttributeError(name)
