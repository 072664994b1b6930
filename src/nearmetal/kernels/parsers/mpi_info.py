"""nm-mpi-info: `rank=R size=S host=H library=PATH inode=I version=V` lines (or JSON lines)."""

import json

from . import record

from .. import KernelSpec, register

register(KernelSpec("mpi-info", "nm-mpi-info", "mpi_info", "which MPI library every rank really maps",
                    communicates=True))



def parse(text, kernel, params):
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
        elif line.startswith("rank="):
            head, _, version = line.partition(" version=")
            row = dict(kv.split("=", 1) for kv in head.split())
            row["version"] = version
        else:
            continue
        out.append(record(kernel, params, "size", row["size"], "ranks", rank=int(row["rank"]),
                          library=row["library"], inode=int(row["inode"]), version=row["version"],
                          host=row["host"]))
    return out
