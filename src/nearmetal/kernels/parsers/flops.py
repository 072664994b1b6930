"""nm-flops: `gflops RATE` after '#' header lines (the build line among them).

Records:
  gflops   GFLOP/s  the sum over ranks of each rank's rate on an L1-resident multiply-add loop

No point parameter names the build: the same benchmark run from a portable image and from a
native build must pair up as one point (the build is what a study of it varies; `explain`
reads each build's SIMD level from its program file). The slowest rank's `time_s` is printed
for people, not recorded: it is the rate's reciprocal.
"""

from . import record

from .. import KernelSpec, register

# A host-optimized and a portable (SSE2) build, as for the other compute kernels.
register(KernelSpec("flops", "nm-flops", "flops",
                    "compute-bound multiply-add loop in L1 (GFLOP/s): its SIMD build decides it, host-optimized build"))
register(KernelSpec("flops-portable", "nm-flops-portable", "flops",
                    "compute-bound multiply-add loop in L1 (GFLOP/s): its SIMD build decides it, portable build"))


def parse(text, kernel, params):
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "gflops":
            return [record(kernel, params, "gflops", parts[1], "GFLOP/s")]
    return []
