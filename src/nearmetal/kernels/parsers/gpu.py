"""nearmetal's GPU kernels (kernels/gpu/: nm-gpu-stream, nm-gpu-copy, nm-gpu-osu).

Each output starts with `# gpu=PCI_BUS_ID name=MODEL cuda=X.Y visible=...`, which becomes the
params gpu, gpu_name, cuda, visible of every record. Then:
- nm-gpu-stream: STREAM's rows (`Triad:  0  BEST_GB/s  AVG_S  MIN_S  MAX_S`): metric
  copy/scale/add/triad, unit "GB/s" (1e9 bytes), as the CPU STREAM kernel's;
- nm-gpu-copy: `HtoD pinned BYTES BEST AVG`: metric htod/dtoh, unit "GB/s", params kind
  (pinned/pageable), size (bytes), and avg_gbps;
- nm-gpu-osu: `# path=cuda-aware|staged ...` (param path), `lat BYTES US` (metric latency,
  "us") and `bw BYTES MBS` (metric bandwidth, "MB/s"), param size, as the OSU parser's.
The kernels are not in the CPU kernel registry (they are not built into images; docs/gpu.md):
parse(text, kernel, params) reads any of them.
"""

from .. import KernelSpec
from . import record
from .stream import FUNCTIONS

# What the analysis and the report read of each (kernels.traits); not registered, since
# `nearmetal bench` and the images build only the CPU kernels.
SPECS = {s.name: s for s in (
    KernelSpec("gpu-stream", "nm-gpu-stream", "gpu", "device memory bandwidth, STREAM-like (GB/s)", primary="triad"),
    KernelSpec("gpu-copy", "nm-gpu-copy", "gpu", "host-device copy bandwidth (GB/s)"),
    KernelSpec("gpu-osu", "nm-gpu-osu", "gpu", "OSU-style device-buffer latency and bandwidth", 2, 2,
               communicates=True))}


def gpu_info(text):
    """The params of the `# gpu=` line ({} when the kernel found no GPU)."""
    for line in text.splitlines():
        if line.startswith("# gpu="):
            fields = dict(tok.split("=", 1) for tok in line[2:].split() if "=" in tok)
            return {"gpu": fields.get("gpu"), "gpu_name": (fields.get("name") or "").replace("_", " "),
                    "cuda": fields.get("cuda"), "visible": fields.get("visible")}
    return {}


def parse(text, kernel, params):
    text = text or ""
    params = dict(params, **gpu_info(text))
    out = []
    for line in text.splitlines():
        parts = line.split()
        if line.startswith("# path="):
            params["path"] = parts[1].split("=", 1)[1]
            continue
        try:
            if kernel == "gpu-stream" and len(parts) == 6 and parts[0] in FUNCTIONS:
                out.append(record(kernel, params, FUNCTIONS[parts[0]], parts[2], "GB/s", rank=int(parts[1])))
            elif kernel == "gpu-copy" and len(parts) == 5 and parts[0] in ("HtoD", "DtoH"):
                out.append(record(kernel, params, parts[0].lower(), parts[3], "GB/s", kind=parts[1],
                                  size=int(parts[2]), avg_gbps=float(parts[4])))
            elif kernel == "gpu-osu" and len(parts) == 3 and parts[0] in ("lat", "bw"):
                metric, unit = ("latency", "us") if parts[0] == "lat" else ("bandwidth", "MB/s")
                out.append(record(kernel, params, metric, parts[2], unit, size=int(parts[1])))
        except ValueError:
            continue  # a row cut short by a killed kernel: the rest still counts
    return out
