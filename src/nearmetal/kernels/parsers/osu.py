"""OSU Micro-Benchmarks output (OMB 5-7 format), from nearmetal's OSU-compatible kernels
(nm-latency, nm-bw, nm-bibw, nm-allgather, nm-alltoall, nm-allreduce, nm-bcast, nm-barrier)
and from the real osu_* programs alike.

The column header line (`# Size          Latency (us)`, `# Size      Bandwidth (MB/s)`,
`# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations`, or
`# Avg Latency(us)` for the barrier, which has no size column) says what each number of the
following rows is. Records: metric "latency" (unit "us") or "bandwidth" ("MB/s") with the
point parameter size=bytes (none without a size column); with OSU's -f also latency_min,
latency_max (us) and iterations ("count"). Other OSU columns are read when present:
"Messages/s" (message_rate), "P50 Tail Lat(us)" (latency_p50, ...); "Validation" and
"Transmit Size" columns are skipped. Other lines ("# Datatype: ...", banners, MPI noise)
are ignored.
"""

import re

from . import record

from .. import KernelSpec, register

# OSU-compatible micro-benchmarks (OSU methodology and output format).
register(KernelSpec("latency", "nm-latency", "osu", "OSU latency: blocking ping-pong, half round trip (us)", 2, 2,
                    communicates=True))
register(KernelSpec("bw", "nm-bw", "osu", "OSU bandwidth: window of non-blocking sends (MB/s)", 2, 2,
                    words="bandwidth", communicates=True))
register(KernelSpec("bibw", "nm-bibw", "osu", "OSU bidirectional bandwidth (MB/s)", 2, 2,
                    words="bidirectional bandwidth", communicates=True))
for _coll in ("allgather", "alltoall", "allreduce", "bcast", "barrier"):
    register(KernelSpec(_coll, f"nm-{_coll}", "osu", f"OSU {_coll}: average latency over ranks (us)", 2,
                        communicates=True))


# OSU's column names, as printed (osu_util.c / osu_util_mpi.c), longest first.
_COLUMNS = [
    (re.compile(r"Bandwidth \(MB/s\)"), ("bandwidth", "MB/s")),
    (re.compile(r"Avg Latency\s*\(us\)"), ("latency", "us")),
    (re.compile(r"Min Latency\s*\(us\)"), ("latency_min", "us")),
    (re.compile(r"Max Latency\s*\(us\)"), ("latency_max", "us")),
    (re.compile(r"P(\d+) Tail Lat\s*\(us\)"), ("latency_p{0}", "us")),
    (re.compile(r"P(\d+) Tail BW\s*\(MB/s\)"), ("bandwidth_p{0}", "MB/s")),
    (re.compile(r"Latency\s*\(us\)"), ("latency", "us")),
    (re.compile(r"Messages/s"), ("message_rate", "messages/s")),
    (re.compile(r"MB/s"), ("bandwidth", "MB/s")),
    (re.compile(r"Iterations"), ("iterations", "count")),
    (re.compile(r"Validation"), None),
    (re.compile(r"Transmit Size"), None),
    (re.compile(r"Size"), "size"),
]
_HEADER_HINT = re.compile(r"Latency|Bandwidth|MB/s")


def _columns(header):
    """Column list from a header line (without '#'): "size", (metric, unit) or None (skip)."""
    cols, rest = [], header.strip()
    while rest:
        for pattern, meaning in _COLUMNS:
            m = pattern.match(rest)
            if m:
                if isinstance(meaning, tuple):
                    meaning = (meaning[0].format(*m.groups()), meaning[1])
                cols.append(meaning)
                rest = rest[m.end():].lstrip()
                break
        else:
            return None  # not an OSU column header
    return cols


def _number(tok):
    try:
        return float(tok)
    except ValueError:
        return None


def parse(text, kernel, params):
    out = []
    cols = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            body = stripped.lstrip("#").strip()
            if _HEADER_HINT.search(body):
                found = _columns(body)
                if found and any(isinstance(c, tuple) for c in found):
                    cols = found
            continue
        if cols is None:
            continue
        toks = stripped.split()
        if len(toks) != len(cols):
            continue
        point, values = {}, []
        for tok, col in zip(toks, cols):
            if col is None:
                continue
            if col == "size":
                if not tok.isdigit():
                    break
                point["size"] = int(tok)
                continue
            v = _number(tok)
            if v is None:
                break
            values.append((col, v))
        else:
            for (metric, unit), v in values:
                out.append(record(kernel, params, metric, v, unit, **point))
    return out
