"""nm-pairs: the all-pairs ping-pong matrix.

Reads the machine-readable part of the output: the parameter line
`# pairs: ranks=N order=unordered latency_size=4 ... bandwidth_size=1048576 ...` and one row
per measured (unordered) pair `PAIR src dst latency_us bandwidth_MBps`. Records: metric
"latency" (unit "us") and "bandwidth" ("MB/s") with point parameters src, dst (src < dst,
src started the ping-pong) and size (the message size of that measurement, bytes).
The heat maps are for people and are not read.
"""

from . import record

from .. import KernelSpec, register

register(KernelSpec("pairs", "nm-pairs", "pairs", "all-pairs ping-pong latency and bandwidth matrix", 2,
                    primary="latency", words="all-pairs", communicates=True, shape="pairs"))



def parse(text, kernel, params):
    sizes = {}
    out = []
    for line in text.splitlines():
        parts = line.split()
        if line.startswith("# pairs:"):
            for kv in parts[2:]:
                key, _, value = kv.partition("=")
                if key in ("latency_size", "bandwidth_size") and value.isdigit():
                    sizes[key] = int(value)
            continue
        if len(parts) != 5 or parts[0] != "PAIR" or not (parts[1].isdigit() and parts[2].isdigit()):
            continue
        try:
            lat, bw = float(parts[3]), float(parts[4])
        except ValueError:
            continue
        src, dst = int(parts[1]), int(parts[2])
        lat_point = {"src": src, "dst": dst}
        bw_point = {"src": src, "dst": dst}
        if "latency_size" in sizes:
            lat_point["size"] = sizes["latency_size"]
        if "bandwidth_size" in sizes:
            bw_point["size"] = sizes["bandwidth_size"]
        out.append(record(kernel, params, "latency", lat, "us", **lat_point))
        out.append(record(kernel, params, "bandwidth", bw, "MB/s", **bw_point))
    return out
