"""nearmetal's benchmark kernels: C programs in the repository's kernels/ directory, built
from one source on the host (kernels.build) and inside every image, and read back by one
parser module per output format (kernels/parsers/).

A new kernel is one C file (plus its Makefile line) and one KernelSpec line here.
"""

from ..errors import NearmetalError
from .build import PROGRAMS, build, host_bin  # noqa: F401  (public API)


class KernelSpec:
    """name: what users type (`nearmetal bench NAME`); program: the binary; parser: module in
    kernels/parsers; min_ranks/max_ranks: what the kernel accepts; default_args: arguments
    used when the user gives none; summary: one line for --help and listings."""

    __slots__ = ("name", "program", "parser", "min_ranks", "max_ranks", "default_args", "summary")

    def __init__(self, name, program, parser, summary, min_ranks=1, max_ranks=None, default_args=()):
        self.name, self.program, self.parser, self.summary = name, program, parser, summary
        self.min_ranks, self.max_ranks, self.default_args = min_ranks, max_ranks, tuple(default_args)


REGISTRY = {}


def register(spec):
    REGISTRY[spec.name] = spec
    return spec


register(KernelSpec("mpi-info", "nm-mpi-info", "mpi_info", "which MPI library every rank really maps"))
register(KernelSpec("pingpong", "nm-pingpong", "pingpong", "blocking ping-pong latency and bandwidth", min_ranks=2))


def get(name):
    if name not in REGISTRY:
        raise NearmetalError(f"unknown kernel '{name}' (choose from: {', '.join(sorted(REGISTRY))})")
    return REGISTRY[name]


def parse(spec, text, params=None):
    """Records from a kernel's output: dicts with kernel, params, metric, value, unit."""
    from importlib import import_module

    module = import_module(f"{__name__}.parsers.{spec.parser}")
    return module.parse(text, kernel=spec.name, params=dict(params or {}))
