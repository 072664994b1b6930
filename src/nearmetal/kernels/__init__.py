"""nearmetal's benchmark kernels: C programs in kernels/csrc/ (package data), built
from one source on the host (kernels.build) and inside every image, and read back by one
parser module per output format (kernels/parsers/).

A new kernel is one C file (plus its Makefile line) and its KernelSpec, registered by the
parser module that reads its output (a new output format: one module in kernels/parsers/).
"""

from ..errors import NearmetalError
from .build import build, host_bin, programs  # noqa: F401  (public API)


class KernelSpec:
    """name: what users type (`nearmetal bench NAME`); program: the binary; parser: module in
    kernels/parsers; min_ranks/max_ranks: what the kernel accepts; default_args: arguments
    used when the user gives none; summary: one line for --help and listings.
    What the analysis and the report need to know of it: primary, the metric its answer
    leads with where it measures several (None: the first); words, its name in sentences
    (None: its name); communicates, whether it measures communication or start-up (its
    scaling reads as the ratio to the baseline, more ranks meaning more work); efficiency,
    whether its scaling is a computation's (drawn as parallel efficiency); shape, how its
    results are laid out where that is not one table per metric ("pairs": a rank-by-rank
    matrix, "phases": a step broken into phases, "io": an I/O sweep's own section); per_launch,
    whether its answer also states the cost per launch in seconds (a start-up kernel); foms,
    whether its metrics are a program's figures of merit (a unitless one is still a cost to
    answer, and its answer names the metric)."""

    __slots__ = ("name", "program", "parser", "min_ranks", "max_ranks", "default_args", "summary", "primary",
                 "words", "communicates", "efficiency", "shape", "per_launch", "foms")

    def __init__(self, name, program, parser, summary, min_ranks=1, max_ranks=None, default_args=(), *,
                 primary=None, words=None, communicates=False, efficiency=False, shape=None, per_launch=False,
                 foms=False):
        self.name, self.program, self.parser, self.summary = name, program, parser, summary
        self.min_ranks, self.max_ranks, self.default_args = min_ranks, max_ranks, tuple(default_args)
        self.primary, self.words, self.communicates, self.efficiency = primary, words, communicates, efficiency
        self.shape, self.per_launch, self.foms = shape, per_launch, foms


# A program's benchmark (a study's `command`, `nearmetal bench -- PROGRAM`): stored under this
# kernel name, built by nobody, measured by the figures of merit the user declared.
PROGRAM = KernelSpec("command", None, None, "a program's benchmark: the figures of merit it declares", foms=True)


_REGISTRY = {}


def register(spec):
    """Called by the parser module that reads the kernel's output (kernels/parsers/)."""
    _REGISTRY[spec.name] = spec
    return spec


def _load_all():
    """Import every parser module: each registers the kernels whose output it reads."""
    import os
    from importlib import import_module

    here = os.path.join(os.path.dirname(__file__), "parsers")
    for f in sorted(os.listdir(here)):
        if f.endswith(".py") and not f.startswith("_"):
            import_module(f"{__name__}.parsers.{f[:-3]}")


def __getattr__(name):
    # REGISTRY on first use: kernels register where they are parsed, loaded only when asked for.
    if name == "REGISTRY":
        _load_all()
        return _REGISTRY
    raise AttributeError(name)


def get(name):
    registry = __getattr__("REGISTRY")
    if name not in registry:
        raise NearmetalError(unknown(name))
    return registry[name]


def unknown(name):
    """'unknown kernel 'x' (kernels: every one; the closest is 'y')': every kernel is listed,
    the common ones sort late."""
    from ..closest import closest

    registry = __getattr__("REGISTRY")
    near = closest(name, registry)
    return (f"unknown kernel {str(name)!r:.60} (kernels: {', '.join(sorted(registry))}"
            + (f"; the closest is '{near}')" if near else ")"))


def traits(name):
    """The KernelSpec of a kernel name as the analysis and the report read it: a registered
    kernel's, a GPU kernel's (parsers/gpu.SPECS: not built into images, so not registered),
    a program's benchmark's (PROGRAM), or, for any other name (imported results), one that
    says nothing."""
    registry = __getattr__("REGISTRY")
    if name in registry:
        return registry[name]
    from .parsers.gpu import SPECS

    if name == PROGRAM.name:
        return PROGRAM
    return SPECS.get(name) or KernelSpec(name or "", None, None, "")


def parse(spec, text, params=None):
    """Records from a kernel's output: dicts with kernel, params, metric, value, unit."""
    from importlib import import_module

    module = import_module(f"{__name__}.parsers.{spec.parser}")
    return module.parse(text, kernel=spec.name, params=dict(params or {}))
