"""A process's cgroup CPU quota and memory limit, from cgroup v1 or v2 files.

The rank itself reads the files (csrc/nm-evidence.c: it alone sees its own cgroup and its
container's /sys/fs/cgroup); it hands over /proc/self/cgroup and the first line of each
limit file from its cgroup up to the hierarchy's root. limits() reads the effective limits
from those: the smallest quota and limit on the way up. read_tree() does the same walk
here (the launcher's own cgroup, and fake trees in tests).

  v2 ("0::PATH"): cpu.max ("max 100000" or "QUOTA PERIOD"), memory.max ("max" or bytes),
                  under /sys/fs/cgroup or, on a hybrid machine, /sys/fs/cgroup/unified;
  v1 ("N:cpu,cpuacct:PATH"): cpu.cfs_quota_us (-1: none) / cpu.cfs_period_us;
     ("N:memory:PATH"): memory.limit_in_bytes (a page-rounded 2^63: none).
"""

import os

V2_BASES = ("/sys/fs/cgroup", "/sys/fs/cgroup/unified")
V2_FILES = ("cpu.max", "memory.max")
V1_CPU = ("cpu.cfs_quota_us", "cpu.cfs_period_us")
V1_MEMORY = ("memory.limit_in_bytes",)
# v1 writes "no limit" as the largest page-aligned signed 64-bit value; anything this large is none
UNLIMITED_BYTES = 1 << 62


def _lines(proc_cgroup):
    """(controllers, path) per line of /proc/PID/cgroup; name= hierarchies left out."""
    for line in (proc_cgroup or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and not parts[1].startswith("name="):
            yield parts[1].split(",") if parts[1] else [], parts[2] or "/"


def walks(proc_cgroup):
    """[(base, relative path, file names)]: where the limit files of this process's cgroups are."""
    out = []
    for controllers, rel in _lines(proc_cgroup):
        if not controllers:
            out += [(base, rel, V2_FILES) for base in V2_BASES]
            continue
        base = "/sys/fs/cgroup/" + ",".join(controllers)
        if "cpu" in controllers:
            out.append((base, rel, V1_CPU))
        if "memory" in controllers:
            out.append((base, rel, V1_MEMORY))
    return out


def read_tree(proc_cgroup, root="/"):
    """{path: first line} of every limit file from each cgroup up to its hierarchy's root,
    read under `root` (paths given as the process sees them): the C library's walk."""
    found = {}
    for base, rel, names in walks(proc_cgroup):
        directory = base + ("" if rel == "/" else rel)
        while True:
            for name in names:
                path = f"{directory}/{name}"
                try:
                    with open(os.path.join(root, path.lstrip("/"))) as f:
                        found[path] = f.readline().rstrip("\n")
                except (OSError, UnicodeDecodeError):
                    pass
            if len(directory) <= len(base):
                break
            directory = directory.rsplit("/", 1)[0]
            if len(directory) < len(base):
                break
    return found


def _int(text):
    try:
        return int(text.strip())
    except (AttributeError, ValueError):
        return None


def limits(proc_cgroup, files):
    """{"cpu_quota_cores": float|None, "memory_limit_bytes": int|None, "version": 1|2|None}:
    the smallest limits among `files` (read_tree's shape); None: no limit found."""
    quotas, memory = [], []
    by_dir = {}
    for path, value in (files or {}).items():
        directory, _, name = path.rpartition("/")
        by_dir.setdefault(directory, {})[name] = value
    for names in by_dir.values():
        if "cpu.max" in names:
            quota, _, period = names["cpu.max"].partition(" ")
            q, p = _int(quota), _int(period or "100000")
            if q is not None and q > 0 and p:
                quotas.append(q / p)
        q, p = _int(names.get("cpu.cfs_quota_us")), _int(names.get("cpu.cfs_period_us"))
        if q is not None and q > 0 and p:
            quotas.append(q / p)
        for name in ("memory.max", "memory.limit_in_bytes"):
            m = _int(names.get(name))
            if m is not None and 0 < m < UNLIMITED_BYTES:
                memory.append(m)
    return {"cpu_quota_cores": min(quotas) if quotas else None,
            "memory_limit_bytes": min(memory) if memory else None, "version": version(proc_cgroup)}


def version(proc_cgroup):
    """1 when the cpu or memory controller is on a v1 hierarchy (a hybrid machine counts as
    v1: its limits live there), 2 on a unified hierarchy alone, None when unknown."""
    lines = list(_lines(proc_cgroup))
    if any({"cpu", "memory"} & set(controllers) for controllers, _ in lines):
        return 1
    if any(not controllers for controllers, _ in lines):
        return 2
    return None
