"""nearmetal's benchmark kernels: C programs in kernels/csrc/ (package data), built
from one source on the host (kernels.build) and inside every image, and read back by one
parser module per output format (kernels/parsers/).

A new kernel is one C file (plus its Makefile line) and one KernelSpec line here.
"""

from ..errors import NearmetalError
from .build import build, host_bin, programs  # noqa: F401  (public API)


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
# OSU-compatible micro-benchmarks (OSU methodology and output format).
register(KernelSpec("latency", "nm-latency", "osu", "OSU latency: blocking ping-pong, half round trip (us)", 2, 2))
register(KernelSpec("bw", "nm-bw", "osu", "OSU bandwidth: window of non-blocking sends (MB/s)", 2, 2))
register(KernelSpec("bibw", "nm-bibw", "osu", "OSU bidirectional bandwidth (MB/s)", 2, 2))
for _coll in ("allgather", "alltoall", "allreduce", "bcast", "barrier"):
    register(KernelSpec(_coll, f"nm-{_coll}", "osu", f"OSU {_coll}: average latency over ranks (us)", 2))
register(KernelSpec("pairs", "nm-pairs", "pairs", "all-pairs ping-pong latency and bandwidth matrix", 2))
# Compute proxies, each in a host-optimized and a portable (SSE2) build.
for _name, _parser, _what in (("stream", "stream", "STREAM copy/scale/add/triad with OpenMP (GB/s)"),
                              ("cg", "cg", "HPCG-like preconditioned CG on a 27-point stencil (GFLOP/s)"),
                              ("phases", "phases", "BT-MZ-like stencil mini-app: compute vs MPI time per step")):
    register(KernelSpec(_name, f"nm-{_name}", _parser, _what + ", host-optimized build"))
    register(KernelSpec(f"{_name}-portable", f"nm-{_name}-portable", _parser, _what + ", portable build"))
# Start-up and metadata probes.
register(KernelSpec("startup", "nm-startup", "startup", "process start to main: wall vs CPU time"))
register(KernelSpec("metadata", "nm-metadata", "metadata", "start-up file and library metadata storm"))
register(KernelSpec("coupled", "nm-coupled", "coupled", "coupled-model proxy: two components on split MPI_COMM_WORLD exchanging fluxes", 2))
register(KernelSpec("iobench", "nm-iobench", "iobench", "FMS/MOM5-style parallel I/O: write patterns x libraries x MPI-IO hints", 1))


def get(name):
    if name not in REGISTRY:
        raise NearmetalError(f"unknown kernel '{name}' (choose from: {', '.join(sorted(REGISTRY))})")
    return REGISTRY[name]


def parse(spec, text, params=None):
    """Records from a kernel's output: dicts with kernel, params, metric, value, unit."""
    from importlib import import_module

    module = import_module(f"{__name__}.parsers.{spec.parser}")
    return module.parse(text, kernel=spec.name, params=dict(params or {}))
