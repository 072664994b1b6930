"""A real local Slurm cluster from Debian's packages: private munged, slurmctld and N slurmd,
and `nearmetal cluster up|down|status`.

Everything lives in one directory ($NEARMETAL_HOME/cluster by default):

    slurm.conf  cluster.json (nodes, ports)  .lock
    munge/      munge.key munge.socket munged.pid munged.log munged.seed
    ctld/       slurmctld.pid slurmctld.log jobcomp.txt state/
    nodes/nX/   slurmd.pid slurmd.log spool/ tmp/   (one per node, `slurmd -N nX`)

All daemons run on 127.0.0.1 (NodeAddr, SlurmctldHost address, NoInAddrAny binds), with
ports chosen per directory among free ones, so several clusters can coexist. Clients talk
to it with `Cluster.env()` = {"SLURM_CONF": <dir>/slurm.conf}.

This module is the public side (up, down, status, the command); cluster_conf.py writes
slurm.conf, cluster_daemons.py starts, finds and stops the processes (by PID, through
nearmetal.proc). See docs/slurm-cluster.md for the settings and why each is there.
"""

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import NearmetalError
from . import cluster_daemons as daemons
from .cluster_conf import conf_safe

DEFAULT_NODES = 3
MAX_NODES = 256  # each node is a slurmd (about 10 MB) with a port and a directory on this machine
READY_TIMEOUT = 30.0
NAME_MAX, PATH_MAX = 255, 4096


@dataclass
class Cluster:
    """A running local cluster. `already_up` is True when `up` found it running (a no-op)."""

    dir: Path
    nodes: list
    ports: dict = field(default_factory=dict)
    already_up: bool = False
    seconds: float = 0.0

    @property
    def conf(self):
        return self.dir / "slurm.conf"

    def env(self):
        """The environment a Slurm client needs to talk to this cluster."""
        return {"SLURM_CONF": str(self.conf)}

    def status(self):
        return status(self.dir)

    def logs(self):
        return daemons.log_files(self.dir, self.nodes)


def default_dir():
    from ..home import home_str

    return Path(home_str()) / "cluster"


def cluster_dir(dir=None):
    """The cluster's directory, with symbolic links resolved (it is part of the marker)."""
    d = Path(os.path.realpath(os.path.expanduser(str(dir)) if dir else default_dir()))
    too_long = [part for part in d.parts if len(os.fsencode(part)) > NAME_MAX]
    if too_long or len(os.fsencode(str(d))) >= PATH_MAX:
        what = f"a name longer than {NAME_MAX} bytes" if too_long else f"{PATH_MAX} bytes or more"
        raise NearmetalError(f"the cluster directory path has {what}: {str(d)[:80]!r}...")
    if d.exists() and not d.is_dir():
        raise NearmetalError(f"the cluster directory {d} exists and is not a directory (it holds the daemons' state)")
    return d


def _make_dir(d):
    """Create the cluster directory (and its parents); a one-line error when it cannot be one."""
    try:
        d.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise NearmetalError(f"the cluster directory {d} exists and is not a directory") from None
    except OSError as e:
        raise NearmetalError(f"cannot create the cluster directory {d}: {e.strerror}") from None


def up(nodes=DEFAULT_NODES, dir=None, timeout=READY_TIMEOUT):
    """Start the cluster in `dir` (idempotent) and wait until every node is idle.

    nodes=None accepts whatever is running (3 when starting). A running cluster with another
    node count is an error: changing it needs `down` first."""
    if nodes is not None and (not isinstance(nodes, int) or isinstance(nodes, bool) or nodes < 1):
        raise NearmetalError(f"--nodes must be a whole number >= 1, got {nodes!r}")
    if nodes is not None and nodes > MAX_NODES:  # checked before anything is written
        raise NearmetalError(f"--nodes {nodes}: at most {MAX_NODES} (each node of the local cluster is a slurmd "
                             f"on this machine, with a port and a directory)")
    d = cluster_dir(dir)
    conf_safe(d, "the cluster directory")
    daemons.check_tools()
    _make_dir(d)
    t0 = time.monotonic()
    with daemons.lock(d):
        st = status(d, node_states=False)
        if st["up"]:
            have = [n["name"] for n in st["nodes"]]
            if nodes is not None and nodes != len(have):
                raise NearmetalError(f"the cluster in {d} is up with {len(have)} nodes, not {nodes}: "
                                     f"run `nearmetal cluster down --dir {d}` first to change the node count")
            meta = daemons.read_meta(d)
            return Cluster(d, have, meta.get("ports", {}), already_up=True, seconds=time.monotonic() - t0)
        if st["processes"]:
            daemons.stop(d)  # a partial cluster (a daemon died): start again from scratch
        names = [f"n{i}" for i in range(1, (nodes or DEFAULT_NODES) + 1)]
        try:
            cl = Cluster(d, names, daemons.start(d, names, timeout))
        except BaseException:
            try:
                daemons.stop(d)
            except NearmetalError:
                pass  # the start-up error is the one to report
            raise
        cl.seconds = time.monotonic() - t0
        return cl


def down(dir=None):
    """Stop everything the cluster in `dir` started, by PID. Returns {"dir", "was_running",
    "stopped": {pid: name}}; stopping a stopped cluster is a no-op."""
    d = cluster_dir(dir)
    if not d.is_dir():
        return {"dir": str(d), "was_running": False, "stopped": {}}
    with daemons.lock(d):
        stopped = daemons.stop(d)
    return {"dir": str(d), "was_running": bool(stopped), "stopped": stopped}


def status(dir=None, node_states=True):
    """What runs in `dir`: daemons and their PIDs, nodes (with Slurm's state when up),
    job-step processes, the client environment and the log files."""
    d = cluster_dir(dir)
    meta = daemons.read_meta(d)
    names = meta.get("nodes", [])
    procs = daemons.cluster_processes(d) if d.is_dir() else {}
    munged = daemons.daemon_pid(d / "munge" / "munged.pid", "munged", procs)
    ctld = daemons.daemon_pid(d / "ctld" / "slurmctld.pid", "slurmctld", procs)
    nodes = []
    for n in names:
        nodes.append({"name": n, "pid": daemons.daemon_pid(d / "nodes" / n / "slurmd.pid", "slurmd", procs),
                      "port": meta.get("ports", {}).get(n), "state": None})
    is_up = bool(names) and bool(munged) and bool(ctld) and all(n["pid"] for n in nodes)
    if is_up and node_states:
        states = daemons.node_states(d / "slurm.conf", timeout=5)
        for n in nodes:
            n["state"] = states.get(n["name"])
    state = "up" if is_up else ("partial" if procs else "down")
    return {"dir": str(d), "conf": str(d / "slurm.conf"), "up": is_up, "state": state,
            "munged": munged, "slurmctld": ctld, "nodes": nodes,
            "steps": sorted(p.pid for p in procs.values() if p.comm == "slurmstepd"),
            "processes": {p.pid: p.comm for p in procs.values()},
            "env": {"SLURM_CONF": str(d / "slurm.conf")},
            "logs": {k: str(v) for k, v in daemons.log_files(d, names).items()},
            "ports": meta.get("ports", {})}


def unreachable_hint():
    """What to do where no Slurm answers: export the local cluster's SLURM_CONF when it is up
    (its daemons run, but this shell does not name it), else start one."""
    import shlex

    try:
        st = status(node_states=False)
    except (OSError, NearmetalError):
        st = {"up": False}
    if st["up"]:
        return f"nearmetal's local cluster is up: export SLURM_CONF={shlex.quote(st['conf'])}"
    return "start a local one with `nearmetal cluster up`"


def command(action, dir=None, nodes=None, as_json=False, out=print):
    """`nearmetal cluster up|down|status`; returns the exit status (status: 3 when not up)."""
    import shlex

    if action == "up":
        cl = up(nodes=nodes, dir=dir)
        names = ", ".join(cl.nodes)
        if cl.already_up:
            out(f"cluster already up in {cl.dir} ({len(cl.nodes)} nodes: {names}): nothing to do")
        else:
            out(f"cluster up in {cl.seconds:.2f} s: {len(cl.nodes)} nodes ({names}) idle on 127.0.0.1, "
                f"slurmctld port {cl.ports.get('slurmctld')}; state and logs in {cl.dir}")
        out(f"export SLURM_CONF={shlex.quote(str(cl.conf))}")
        return 0
    if action == "down":
        r = down(dir=dir)
        if not r["was_running"]:
            out(f"cluster in {r['dir']} is not running: nothing to stop")
            return 0
        counts = {}
        for name in r["stopped"].values():
            counts[name] = counts.get(name, 0) + 1
        what = ", ".join(f"{n} {name}" if n > 1 else name for name, n in counts.items())
        out(f"cluster in {r['dir']} stopped: {what}")
        return 0
    st = status(dir=dir)
    if as_json:
        out(json.dumps(st, indent=1))
        return 0 if st["up"] else 3
    if st["state"] == "down":
        out(f"cluster in {st['dir']}: down (start it with `nearmetal cluster up`)")
        return 3
    out(f"cluster in {st['dir']}: {st['state']}  munged {st['munged'] or '-'}  slurmctld {st['slurmctld'] or '-'}")
    for n in st["nodes"]:
        out(f"  {n['name']:<4} {n['state'] or ('not running' if not n['pid'] else '?'):<12} "
            f"slurmd {n['pid'] or '-'}  127.0.0.1:{n['port']}")
    if st["steps"]:
        out(f"  job steps running: slurmstepd {' '.join(map(str, st['steps']))}")
    if st["state"] != "up":
        out("  some daemons are not running: `nearmetal cluster up` starts it again from scratch")
        return 3
    out(f"export SLURM_CONF={shlex.quote(st['conf'])}")
    return 0
