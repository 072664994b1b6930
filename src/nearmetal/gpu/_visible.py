"""nm-gpuvis (C, beside this file): built on first use into the nearmetal home, like nm-envfwd."""

import os

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nm-gpuvis.c")


def binary():
    from ..home import home_str
    from ..supervise import build_tool

    return build_tool(os.path.join(home_str(), "tools", "nm-gpuvis"), SOURCE)


def wrap(argv, visible, env_prefix=None):
    """argv started through nm-gpuvis with the device list `visible`."""
    extra = ["--also-prefix", env_prefix] if env_prefix else []
    return [binary(), "--devices", ",".join(visible), *extra, "--"] + list(argv)
