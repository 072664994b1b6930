"""nm-cg: `NAME VALUE` result lines after '#' header lines.

Records (params simd and build from the `# build=...` line):
  gflops          GFLOP/s  flops / solve time (the slowest rank's), HPCG counting
  time_s          s        solve time
  iterations      ""       PCG iterations to reach the tolerance
  residual        ""       final relative residual |r| / |r0| of the recurrence
  true_residual   ""       |b - A x| / |b - A x0| recomputed after the solve
  solution_error  ""       max |x - 1| (the exact solution is all ones)
"""

from . import record
from .stream import build_info

from .. import KernelSpec, register

# A host-optimized and a portable (SSE2) build.
register(KernelSpec("cg", "nm-cg", "cg", "HPCG-like preconditioned CG on a 27-point stencil (GFLOP/s), host-optimized build",
                    primary="gflops", words="CG", efficiency=True))
register(KernelSpec("cg-portable", "nm-cg-portable", "cg",
                    "HPCG-like preconditioned CG on a 27-point stencil (GFLOP/s), portable build",
                    primary="gflops", efficiency=True))  # its own name in sentences: not CG's column


METRICS = {"gflops": "GFLOP/s", "time_s": "s", "iterations": "", "residual": "", "true_residual": "",
           "solution_error": ""}


def parse(text, kernel, params):
    params = dict(params, **build_info(text))
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in METRICS:
            out.append(record(kernel, params, parts[0], parts[1], METRICS[parts[0]]))
    return out
