"""nm-metadata: after '#' header lines, rows
`RANK files libraries bytes files_s dlopen_s total_s`, RANK a rank number or "max".
Records, params rank=N|"max": files_s, dlopen_s, total_s (unit "s"), files, libraries
(unit "count") and bytes (unit "bytes": read from the files)."""

from . import record

from .. import KernelSpec, register

register(KernelSpec("metadata", "nm-metadata", "metadata", "start-up file and library metadata storm",
                    primary="total_s", communicates=True))


COLUMNS = (("files", "count"), ("libraries", "count"), ("bytes", "bytes"),
           ("files_s", "s"), ("dlopen_s", "s"), ("total_s", "s"))


def parse(text, kernel, params):
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 7 or line.lstrip().startswith("#") or not (parts[0].isdigit() or parts[0] == "max"):
            continue
        try:
            values = [float(v) for v in parts[1:]]
        except ValueError:
            continue
        rank = int(parts[0]) if parts[0].isdigit() else "max"
        for (metric, unit), value in zip(COLUMNS, values):
            out.append(record(kernel, params, metric, value, unit, rank=rank))
    return out
