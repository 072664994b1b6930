"""After a run: the ranks' evidence files (csrc/nm-evidence.c's JSON) read from the staging
directory, one per rank chosen, each turned into the per-rank dict the store keeps and the
explainers read (FIELDS); plus the launcher's own facts (launcher_facts), so a rank's
namespaces and cgroup can be compared with the side that launched it.

One file per process: a rank wrapped in a shell (or a runtime's helper that runs before it)
may leave more than one for its rank; the process that initialised MPI wins, else the one
that started last (the innermost program). A process whose rank is unknown (no MPI, no
launcher variable) is left out.
"""

import json
import os

from ..errors import NearmetalError
from ..safe_read import read_regular
from . import cgroup

NS_NAMES = ("user", "ipc", "net", "pid", "mnt")
FIELDS = ("rank", "pid", "host", "cpus_allowed", "cpu_start", "cpu_end", "migrations", "numa_node", "ns", "launcher_ns",
          "cgroup", "seccomp", "ld_audit", "ld_preload", "t_main_s", "t_init_end_s", "mpi_library", "mpi_profile")
MAX_FILE = 1 << 20  # a rank's file is a few kB; more is not ours


DRY_STAGE = "/tmp/nearmetal-evidence-DIR"  # what a dry run names: nothing is created


def staging(other_account=False, dry=False):
    """A fresh directory for the ranks' files beside the placed library (/tmp/nearmetal-UID,
    0711: not listable); writable by any account when the ranks run as another one. dry:
    DRY_STAGE, created nowhere."""
    if dry:
        return DRY_STAGE
    from ..supervise import stage_dir
    from .build import library

    stage = stage_dir("evidence", os.path.dirname(library()))
    if other_account:
        os.chmod(stage, 0o1733)  # sticky, not listable: ranks create their own files only
    return stage


def namespaces(pid="self", names=NS_NAMES):
    """{name: inode} of a process's namespaces (None where not readable)."""
    out = {}
    for name in names:
        try:
            out[name] = os.stat(f"/proc/{pid}/ns/{name}").st_ino
        except OSError:
            out[name] = None
    return out


def launcher_facts():
    """The launching side's facts (this process: it starts the launcher, in its namespaces)."""
    import socket

    try:
        with open("/proc/self/cgroup") as f:
            proc_cgroup = f.read()
    except OSError:
        proc_cgroup = ""
    return {"rank": -1, "pid": os.getpid(), "host": socket.gethostname(), "ns": namespaces(),
            "cgroup": cgroup.limits(proc_cgroup, cgroup.read_tree(proc_cgroup)),
            "cpus_allowed": sorted(os.sched_getaffinity(0))}


def clear(stage):
    """Remove what an earlier run left in the staging directory."""
    for name in os.listdir(stage):
        try:
            os.unlink(os.path.join(stage, name))
        except OSError:
            pass


def read_files(stage, remove=True, names=None):
    """The parsed JSON of every complete evidence file in `stage` (each removed when `remove`);
    of those `names` only, when given."""
    found = []
    for name in sorted(os.listdir(stage) if names is None else names):
        path = os.path.join(stage, name)
        if name.startswith("ev-") and name.endswith(".json"):
            try:
                # a regular file only: ranks run as another account write into a shared directory,
                # where a FIFO named as their file would hold nearmetal for ever
                data = read_regular(path, MAX_FILE, "evidence file")
                # a path or variable that is not UTF-8 (the rank copies bytes): replaced, the file still read
                raw = json.loads(data.decode("utf-8", "replace"))
                if isinstance(raw, dict):
                    found.append(raw)
            except (NearmetalError, ValueError):
                pass  # not a complete file of ours: nothing to read
        if remove:
            try:
                os.unlink(path)
            except OSError:
                pass
    return found


def rank_of(raw):
    """The rank a file speaks for: MPI's own answer, else the launcher's variable; None."""
    rank = raw.get("mpi_rank")
    if isinstance(rank, int) and rank >= 0:
        return rank
    try:
        return int(raw.get("env_rank"))
    except (TypeError, ValueError):
        return None


def choose(raws):
    """{rank: raw}: per rank, the process that initialised MPI, else the one started last."""
    best = {}
    for raw in raws:
        rank = rank_of(raw)
        if rank is None:
            continue
        key = (raw.get("mpi_profile") is not None, raw.get("load_real_ns") or 0)
        if rank not in best or key > best[rank][0]:
            best[rank] = (key, raw)
    return {rank: raw for rank, (_, raw) in sorted(best.items())}


def _seconds(ns, launch_ns):
    if not isinstance(ns, int) or not isinstance(launch_ns, int) or ns < 0 or launch_ns <= 0:
        return None
    return (ns - launch_ns) / 1e9


def _delta(start, end, key):
    a, b = (start or {}).get(key), (end or {}).get(key)
    return b - a if isinstance(a, int) and isinstance(b, int) and a >= 0 and b >= a else None


def _own_preloads(ld_preload):
    """LD_PRELOAD without nearmetal's own libraries (placed under /tmp/nearmetal-UID/nm-*)."""
    if not ld_preload:
        return ld_preload
    rest = [p for p in ld_preload.split() if not (p.startswith("/tmp/nearmetal-") and "/nm-" in p)]
    return " ".join(rest) or None


def normalise(raw, launcher=None):
    """The per-rank dict (FIELDS first, then what else the file says) of one raw file."""
    start, end = raw.get("start") or {}, raw.get("end") or {}
    launch = raw.get("launch_ns")

    def int_or_none(v):
        return v if isinstance(v, int) and v >= 0 else None

    ns = raw.get("ns") or {}
    out = {
        "rank": rank_of(raw), "pid": raw.get("pid"), "host": raw.get("host"),
        "cpus_allowed": [c for c in raw.get("cpus_allowed") or [] if isinstance(c, int)],
        "cpu_start": int_or_none(start.get("cpu")), "cpu_end": int_or_none(end.get("cpu")),
        "migrations": _delta(start, end, "nr_migrations"), "numa_node": int_or_none(start.get("node")),
        "ns": {k: ns.get(k) or None for k in NS_NAMES},
        "launcher_ns": (launcher or {}).get("ns"),
        "cgroup": cgroup.limits(raw.get("proc_cgroup"), raw.get("cgroup_files")),
        "seccomp": int_or_none(raw.get("seccomp")),
        "ld_audit": raw.get("ld_audit"), "ld_preload": raw.get("ld_preload"),
        "t_main_s": _seconds(raw.get("load_real_ns"), launch),
        "t_init_end_s": _seconds(raw.get("init_end_real_ns"), launch),
        "mpi_library": raw.get("mpi_library"), "mpi_profile": raw.get("mpi_profile"),
        # besides the contract's keys
        "exe": raw.get("exe"), "written_at": raw.get("why"), "launch_ns": launch if isinstance(launch, int) else None,
        "ld_preload_others": _own_preloads(raw.get("ld_preload")),
        "ctxt_switches": {"voluntary": _delta(start, end, "voluntary"),
                          "nonvoluntary": _delta(start, end, "nonvoluntary")},
        "ns_more": {k: ns.get(k) for k in ns if k not in NS_NAMES},
        "proc_cgroup": raw.get("proc_cgroup"), "cgroup_files": raw.get("cgroup_files"),
    }
    return out


def collect(stage, launcher=None, remove=True, raws=None):
    """{rank: per-rank dict} from the files in `stage` (or `raws`, read from it already), plus
    rank -1: the launcher's facts (when given) with the launch time the ranks saw."""
    chosen = choose(read_files(stage, remove=remove) if raws is None else raws)
    out = {rank: normalise(raw, launcher) for rank, raw in chosen.items()}
    if launcher is not None:
        launches = {r["launch_ns"] for r in out.values() if r.get("launch_ns")}
        out[-1] = dict(launcher, launch_ns=min(launches) if launches else None)
    return out
