"""nm-envfwd (C, beside this file): built on first use into the nearmetal home, like nm-supervise."""

import os

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nm-envfwd.c")


def binary():
    from ..home import home_str
    from ..supervise import build_tool

    return build_tool(os.path.join(home_str(), "tools", "nm-envfwd"), SOURCE)
