"""nm-stream: STREAM rows `  Copy:  RANK|total  BEST_GBPS  AVG_S  MIN_S  MAX_S`.

Records: metric copy/scale/add/triad, unit "GB/s" (1 GB = 1e9 bytes, STREAM's best rate),
params rank (an int, or "total": the sum of the ranks' best rates), simd and build (from
the kernel's `# build=... simd=...` line, shared by every compute kernel's output).
"""

from . import record

from .. import KernelSpec, register

# A host-optimized and a portable (SSE2) build.
register(KernelSpec("stream", "nm-stream", "stream", "STREAM copy/scale/add/triad with OpenMP (GB/s), host-optimized build",
                    primary="triad", words="STREAM", efficiency=True))
register(KernelSpec("stream-portable", "nm-stream-portable", "stream",
                    "STREAM copy/scale/add/triad with OpenMP (GB/s), portable build", primary="triad",
                    words="STREAM", efficiency=True))


FUNCTIONS = {"Copy:": "copy", "Scale:": "scale", "Add:": "add", "Triad:": "triad"}


def build_info(text):
    """{"simd": ..., "build": ...} from a compute kernel's `# build=B simd=S ...` line."""
    for line in text.splitlines():
        if line.startswith("# build="):
            fields = dict(tok.split("=", 1) for tok in line[2:].split() if "=" in tok)
            return {"simd": fields.get("simd", "unknown"), "build": fields.get("build", "unknown")}
    return {"simd": "unknown", "build": "unknown"}


def parse(text, kernel, params):
    params = dict(params, **build_info(text))
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 6 and parts[0] in FUNCTIONS:
            rank = "total" if parts[1] == "total" else int(parts[1])
            out.append(record(kernel, params, FUNCTIONS[parts[0]], parts[2], "GB/s", rank=rank))
    return out
