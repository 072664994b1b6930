"""nm-pingpong: `  SIZE  LATENCY_US  BANDWIDTH_MBPS` rows after '#' header lines."""

from . import record

from .. import KernelSpec, register

register(KernelSpec("pingpong", "nm-pingpong", "pingpong", "blocking ping-pong latency and bandwidth", min_ranks=2,
                    communicates=True))



def parse(text, kernel, params):
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0].isdigit():
            size = int(parts[0])
            out.append(record(kernel, params, "latency", parts[1], "us", size=size))
            out.append(record(kernel, params, "bandwidth", parts[2], "MB/s", size=size))
    return out
