"""nm-phases: per-step rows `  step N COMPUTE HALO ALLREDUCE COMM RMS` (the largest time over
ranks of each phase), per-rank rows `  rank R|max ZONES POINTS INIT MAIN_LOOP COMPUTE COMM
HALO ALLREDUCE FINI` and a `checksum VALUE` line.

Records (unit "s" unless noted; params simd and build from the `# build=...` line):
  per step, params rank="max", step=N:      compute_s, halo_s, allreduce_s, comm_s
  per rank (rank=R) and over ranks (rank="max", each column's largest value):
      init_s, main_loop_s, compute_s, comm_s, halo_s, allreduce_s, fini_s
  checksum (unit ""): sum of u^2 in zone order, identical for every ranks x threads split
"""

from . import record
from .stream import build_info

from .. import KernelSpec, register

# A host-optimized and a portable (SSE2) build.
register(KernelSpec("phases", "nm-phases", "phases",
                    "BT-MZ-like stencil mini-app: compute vs MPI time per step, host-optimized build",
                    primary="main_loop_s", efficiency=True, shape="phases"))
register(KernelSpec("phases-portable", "nm-phases-portable", "phases",
                    "BT-MZ-like stencil mini-app: compute vs MPI time per step, portable build",
                    primary="main_loop_s", efficiency=True, shape="phases"))


STEP_COLS = ("compute_s", "halo_s", "allreduce_s", "comm_s")
RANK_COLS = ("init_s", "main_loop_s", "compute_s", "comm_s", "halo_s", "allreduce_s", "fini_s")


def parse(text, kernel, params):
    params = dict(params, **build_info(text))
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 7 and parts[0] == "step" and parts[1].isdigit():
            for name, value in zip(STEP_COLS, parts[2:6]):
                out.append(record(kernel, params, name, value, "s", rank="max", step=int(parts[1])))
        elif len(parts) == 11 and parts[0] == "rank":
            rank = "max" if parts[1] == "max" else int(parts[1])
            for name, value in zip(RANK_COLS, parts[4:]):
                out.append(record(kernel, params, name, value, "s", rank=rank))
        elif len(parts) == 2 and parts[0] == "checksum":
            out.append(record(kernel, params, "checksum", parts[1], ""))
    return out
