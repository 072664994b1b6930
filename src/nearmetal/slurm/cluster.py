"""A real local Slurm cluster from Debian's packages: private munged, slurmctld and N slurmd.

Everything lives in one directory ($NEARMETAL_HOME/cluster by default):

    slurm.conf  cluster.json (nodes, ports)  .lock
    munge/      munge.key munge.socket munged.pid munged.log munged.seed
    ctld/       slurmctld.pid slurmctld.log jobcomp.txt state/
    nodes/nX/   slurmd.pid slurmd.log spool/ tmp/   (one per node, `slurmd -N nX`)

All daemons run on 127.0.0.1 (NodeAddr, SlurmctldHost address, NoInAddrAny binds), with
ports chosen per directory among free ones, so several clusters can coexist. Clients talk
to it with `Cluster.env()` = {"SLURM_CONF": <dir>/slurm.conf}.

Every process we start carries NEARMETAL_CLUSTER_DIR=<dir> in its environment; slurmstepd
inherits it from slurmd. `down` stops, by PID, the processes carrying that marker, the
members of their sessions (job tasks run in slurmstepd's session), their descendants, and
orphaned job tasks of this cluster (SLURM_CONF=<our conf> and SLURMD_NODENAME set), and
never the calling process or its ancestors. Zombies count as gone: on some hosts PID 1 reaps
orphans only every few seconds, and killed daemons linger as <defunct> entries holding nothing.

See docs/slurm-cluster.md for the settings and why each is there.
"""

import fcntl
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import NearmetalError

MARKER = "NEARMETAL_CLUSTER_DIR"
DEFAULT_NODES = 3
READY_TIMEOUT = 30.0
CPUS_PER_NODE = 4
PORT_LOW, PORT_HIGH = 17000, 31999  # below the kernel's ephemeral range (32768-60999)
TOOLS = {"munged": "munge", "slurmctld": "slurmctld", "slurmd": "slurmd", "sinfo": "slurm-client",
         "srun": "slurm-client", "scontrol": "slurm-client"}
SUN_PATH_MAX = 107
NAME_MAX, PATH_MAX = 255, 4096
CONF_SPECIAL = "#=%\"'\\"  # slurm.conf syntax: comment, key=value, %-patterns, quoting
# Error lines every fresh start logs (no saved state yet): never the reason a start failed.
BENIGN = ("state file", "Trying backup state save file")


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
        return _logs(self.dir, self.nodes)


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
    return d


def _conf_safe(value, what):
    """`value` as it may appear in slurm.conf: Slurm splits at blanks, starts comments at
    '#', reads quotes and '=' itself and expands %-patterns in these paths; a newline
    would start a directive of its own."""
    text = str(value)
    bad = sorted({c for c in text if not c.isprintable() or c.isspace() or c in CONF_SPECIAL})
    if bad:
        shown = " ".join(repr(c) for c in bad)
        raise NearmetalError(f"{what} {text!r} cannot go into slurm.conf: it holds {shown} "
                             f"(no blanks, control characters or {' '.join(CONF_SPECIAL)})")
    return text


def _make_dir(d):
    """Create the cluster directory (and its parents); a one-line error when it cannot be one."""
    try:
        d.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise NearmetalError(f"the cluster directory {d} exists and is not a directory") from None
    except OSError as e:
        raise NearmetalError(f"cannot create the cluster directory {d}: {e.strerror}") from None


# ---------------------------------------------------------------------------------------------
# public API


def up(nodes=DEFAULT_NODES, dir=None, timeout=READY_TIMEOUT):
    """Start the cluster in `dir` (idempotent) and wait until every node is idle.

    nodes=None accepts whatever is running (3 when starting). A running cluster with another
    node count is an error: changing it needs `down` first."""
    if nodes is not None and (not isinstance(nodes, int) or isinstance(nodes, bool) or nodes < 1):
        raise NearmetalError(f"--nodes must be a whole number >= 1, got {nodes!r}")
    d = cluster_dir(dir)
    _conf_safe(d, "the cluster directory")
    _check_tools()
    _make_dir(d)
    t0 = time.monotonic()
    with _lock(d):
        st = status(d, node_states=False)
        if st["up"]:
            have = [n["name"] for n in st["nodes"]]
            if nodes is not None and nodes != len(have):
                raise NearmetalError(f"the cluster in {d} is up with {len(have)} nodes, not {nodes}: "
                                     f"run `nearmetal cluster down --dir {d}` first to change the node count")
            meta = _read_meta(d)
            return Cluster(d, have, meta.get("ports", {}), already_up=True, seconds=time.monotonic() - t0)
        if st["processes"]:
            _stop(d)  # a partial cluster (a daemon died): start again from scratch
        names = [f"n{i}" for i in range(1, (nodes or DEFAULT_NODES) + 1)]
        try:
            cl = _start(d, names, timeout)
        except BaseException:
            try:
                _stop(d)
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
    with _lock(d):
        stopped = _stop(d)
    return {"dir": str(d), "was_running": bool(stopped), "stopped": stopped}


def status(dir=None, node_states=True):
    """What runs in `dir`: daemons and their PIDs, nodes (with Slurm's state when up),
    job-step processes, the client environment and the log files."""
    d = cluster_dir(dir)
    meta = _read_meta(d)
    names = meta.get("nodes", [])
    procs = _ours(d) if d.is_dir() else {}
    munged = _daemon_pid(d / "munge" / "munged.pid", "munged", procs)
    ctld = _daemon_pid(d / "ctld" / "slurmctld.pid", "slurmctld", procs)
    nodes = []
    for n in names:
        nodes.append({"name": n, "pid": _daemon_pid(d / "nodes" / n / "slurmd.pid", "slurmd", procs),
                      "port": meta.get("ports", {}).get(n), "state": None})
    is_up = bool(names) and bool(munged) and bool(ctld) and all(n["pid"] for n in nodes)
    if is_up and node_states:
        states = _node_states(d / "slurm.conf", timeout=5)
        for n in nodes:
            n["state"] = states.get(n["name"])
    state = "up" if is_up else ("partial" if procs else "down")
    return {"dir": str(d), "conf": str(d / "slurm.conf"), "up": is_up, "state": state,
            "munged": munged, "slurmctld": ctld, "nodes": nodes,
            "steps": sorted(p.pid for p in procs.values() if p.comm == "slurmstepd"),
            "processes": {p.pid: p.comm for p in procs.values()},
            "env": {"SLURM_CONF": str(d / "slurm.conf")}, "logs": {k: str(v) for k, v in _logs(d, names).items()},
            "ports": meta.get("ports", {})}


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


# ---------------------------------------------------------------------------------------------
# start


def _check_tools():
    missing = sorted({pkg for tool, pkg in TOOLS.items() if not shutil.which(tool, path=_daemon_path())})
    if missing:
        raise NearmetalError(f"Slurm is not installed: install the Debian packages {' '.join(missing)} "
                             f"(apt-get install slurm-wlm slurmctld slurmd slurm-client munge)")


def _daemon_path():
    extra = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    return os.environ.get("PATH", "") + os.pathsep + extra


def _daemon_env(d):
    """A clean environment for the daemons (slurmstepd inherits it; job tasks do not)."""
    env = {"PATH": _daemon_path(), "LANG": "C.UTF-8", "HOME": os.environ.get("HOME", "/root"),
           "SLURM_CONF": str(d / "slurm.conf"), MARKER: str(d)}
    return env


def _client_env(conf):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "SALLOC_", "SRUN_"))}
    env["SLURM_CONF"] = str(conf)
    return env


def _short_hostname():
    return socket.gethostname().split(".")[0]


def _port_free(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Slurm binds: TIME_WAIT is no obstacle
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def _choose_ports(d, count):
    """`count` free ports on 127.0.0.1, starting at a place derived from the directory, so a
    cluster usually gets the same ports again and two clusters do not collide."""
    span = PORT_HIGH - PORT_LOW + 1
    start = int(hashlib.sha1(str(d).encode()).hexdigest(), 16) % span
    ports = []
    for i in range(span):
        p = PORT_LOW + (start + i) % span
        if _port_free(p):
            ports.append(p)
            if len(ports) == count:
                return ports
    raise NearmetalError(f"no {count} free TCP ports on 127.0.0.1 between {PORT_LOW} and {PORT_HIGH}")


def render_conf(d, names, ports, hostname):
    """slurm.conf for the cluster in `d` (ports: slurmctld first, then one per node)."""
    d, hostname = _conf_safe(d, "the cluster directory"), _conf_safe(hostname, "the host name")
    if not all(n.startswith("n") and n[1:].isdigit() for n in names) or not all(type(p) is int for p in ports):
        raise NearmetalError(f"internal error: node names {names} or ports {ports} are not plain")
    ctld_port, node_ports = ports[0], ports[1:]
    lines = [
        "# Written by `nearmetal cluster up`: rewritten on every start. See docs/slurm-cluster.md.",
        "ClusterName=nearmetal",
        f"SlurmctldHost={hostname}(127.0.0.1)",
        f"SlurmctldPort={ctld_port}",
        f"SlurmdPort={node_ports[0]}",
        "# Bind every daemon and client to the address its name resolves to, not 0.0.0.0",
        "CommunicationParameters=NoCtldInAddrAny,NoInAddrAny",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={d}/munge/munge.socket",
        "SlurmUser=root",
        "SlurmdUser=root",
        f"StateSaveLocation={d}/ctld/state",
        f"SlurmctldPidFile={d}/ctld/slurmctld.pid",
        f"SlurmctldLogFile={d}/ctld/slurmctld.log",
        "# Several slurmd on one host (MULTIPLE_SLURMD build): %n is the node name",
        f"SlurmdSpoolDir={d}/nodes/%n/spool",
        f"SlurmdPidFile={d}/nodes/%n/slurmd.pid",
        f"SlurmdLogFile={d}/nodes/%n/slurmd.log",
        "# A private TmpFS per node, else PMIx steps of different nodes collide in /tmp",
        f"TmpFS={d}/nodes/%n/tmp",
        f"PlugStackConfig={d}/plugstack.conf",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "# Heterogeneous jobs are scheduled by the backfill scheduler only: every second",
        "SchedulerType=sched/backfill",
        "SchedulerParameters=bf_interval=1",
        "# Declare CPUs the host does not have (every node shares the host's cores)",
        "SlurmdParameters=config_overrides",
        "MailProg=/bin/true",
        "JobCompType=jobcomp/filetxt",
        f"JobCompLoc={d}/ctld/jobcomp.txt",
        "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none",
        "MpiDefault=none",
        "ReturnToService=2",
        "MinJobAge=10",
        "KillWait=2",
        "InactiveLimit=0",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
    ]
    for n, p in zip(names, node_ports):
        lines.append(f"NodeName={n} NodeAddr=127.0.0.1 NodeHostname={hostname} Port={p} "
                     f"CPUs={CPUS_PER_NODE} State=UNKNOWN")
    lines.append(f"PartitionName=debug Nodes={','.join(names)} Default=YES MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


def _start(d, names, timeout):
    for sub in ("ctld", "nodes"):
        shutil.rmtree(d / sub, ignore_errors=True)
    munge = d / "munge"
    munge.mkdir(exist_ok=True)
    os.chmod(munge, 0o755)  # munged wants its socket's directory readable by all
    for f in ("munged.pid", "munged.log", "munge.socket", "munge.socket.lock"):
        _unlink(munge / f)
    (d / "ctld" / "state").mkdir(parents=True)
    for n in names:
        (d / "nodes" / n / "spool").mkdir(parents=True)
        (d / "nodes" / n / "tmp").mkdir()
        os.chmod(d / "nodes" / n / "tmp", 0o1777)
    sock = munge / "munge.socket"
    if len(str(sock).encode()) > SUN_PATH_MAX:
        raise NearmetalError(f"cluster directory path too long for munge's socket ({sock}): use a shorter --dir")
    key = munge / "munge.key"
    if not key.exists():
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(1024))
    (d / "plugstack.conf").write_text("# empty: no SPANK plugins (not /etc/slurm/plugstack.conf)\n")

    hostname = _short_hostname()
    ports = _choose_ports(d, len(names) + 1)
    conf = d / "slurm.conf"
    conf.write_text(render_conf(d, names, ports, hostname))
    meta = {"nodes": names, "hostname": hostname,
            "ports": {"slurmctld": ports[0]} | dict(zip(names, ports[1:]))}
    (d / "cluster.json").write_text(json.dumps(meta, indent=1) + "\n")

    env = _daemon_env(d)
    logs = _logs(d, names)
    _spawn(["munged", "--force", f"--socket={sock}", f"--key-file={key}", f"--pid-file={munge / 'munged.pid'}",
            f"--log-file={logs['munged']}", f"--seed-file={munge / 'munged.seed'}"], env, logs["munged"], "munged")
    _wait_pidfile(munge / "munged.pid", "munged", logs["munged"], d)
    _spawn(["slurmctld", "-c", "-f", str(conf)], env, logs["slurmctld"], "slurmctld")  # -c: no old state
    pids = {"slurmctld": _wait_pidfile(d / "ctld" / "slurmctld.pid", "slurmctld", logs["slurmctld"], d)}
    # slurmd registers at start and retries only a second later: start it once slurmctld answers
    end = time.monotonic() + timeout
    while not _ctld_up(conf):
        if not _proc(pids["slurmctld"]) or time.monotonic() > end:
            what = "exited during start-up" if not _proc(pids["slurmctld"]) else f"not answering after {timeout:.0f} s"
            raise NearmetalError(f"slurmctld {what}: {_log_reason(logs['slurmctld'])}; see {logs['slurmctld']}")
        time.sleep(0.01)
    for n in names:
        _spawn(["slurmd", "-f", str(conf), "-N", n], env, logs[n], f"slurmd -N {n}")
    for n in names:
        pids[n] = _wait_pidfile(d / "nodes" / n / "slurmd.pid", f"slurmd -N {n}", logs[n], d)
    _wait_ready(d, names, pids, logs, timeout)
    return Cluster(d, names, meta["ports"])


def _spawn(argv, env, log, what):
    log = Path(log)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        try:
            r = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                               start_new_session=True, timeout=30)
        except subprocess.TimeoutExpired:
            raise NearmetalError(f"{what} did not detach within 30 s: see {log}")
        except OSError as e:
            raise NearmetalError(f"cannot start {what}: {e}")
    if r.returncode != 0:
        raise NearmetalError(f"{what} failed to start (exit {r.returncode}): {_log_reason(log)}; see {log}")


def _wait_pidfile(path, what, log, d, timeout=10.0):
    end = time.monotonic() + timeout
    while True:
        pid = _read_pid(path)
        if pid:
            p = _proc(pid)
            if p and _has_marker(p, d):
                return pid
        if time.monotonic() > end:
            raise NearmetalError(f"{what} did not start (no live process behind {path} after {timeout:.0f} s): "
                                 f"{_log_reason(log)}; see {log}")
        time.sleep(0.01)


def _wait_ready(d, names, pids, logs, timeout):
    conf = d / "slurm.conf"
    end = time.monotonic() + timeout
    states, last_check = {}, 0.0
    while True:
        # sinfo retries an unreachable controller for ~9 s: ask only once slurmctld listens
        states = _node_states(conf, timeout=5) if _ctld_up(conf) else {}
        if all(states.get(n) == "idle" for n in names):
            return
        now = time.monotonic()
        if now - last_check > 0.5:
            last_check = now
            for what, pid in pids.items():
                if not _proc(pid):
                    log = logs[what]
                    name = what if what == "slurmctld" else f"slurmd -N {what}"
                    raise NearmetalError(f"{name} exited during start-up: {_log_reason(log)}; see {log}")
        if now > end:
            bad = [n for n in names if states.get(n) != "idle"]
            shown = ", ".join(f"{n}: {states.get(n) or 'not registered'}" for n in bad)
            files = " and ".join(str(logs[x]) for x in ["slurmctld"] + bad[:1])
            raise NearmetalError(f"Slurm nodes not idle after {timeout:.0f} s ({shown}): see {files}")
        time.sleep(0.02)


def _ctld_up(conf):
    """`scontrol ping`: answers at once, also while slurmctld does not listen yet."""
    try:
        out = subprocess.run(["scontrol", "ping"], env=_client_env(conf), capture_output=True, text=True,
                             timeout=5, stdin=subprocess.DEVNULL)
    except (subprocess.TimeoutExpired, OSError):
        return False
    return " is UP" in out.stdout


def _node_states(conf, timeout=5):
    """{node: state} from sinfo (long state names; '*' marks a node not responding)."""
    try:
        out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N|%T"], env=_client_env(conf), capture_output=True,
                             text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except (subprocess.TimeoutExpired, OSError):
        return {}
    if out.returncode != 0:
        return {}
    states = {}
    for line in out.stdout.splitlines():
        name, _, state = line.strip().partition("|")
        if name:
            states[name] = state
    return states


def _logs(d, names):
    logs = {"munged": d / "munge" / "munged.log", "slurmctld": d / "ctld" / "slurmctld.log"}
    for n in names:
        logs[n] = d / "nodes" / n / "slurmd.log"
    return logs


def _log_reason(log):
    """The most telling line of a daemon log: the first fatal line, else the first error
    line (the cause; later ones are consequences), else the last line; no time stamp."""
    try:
        lines = [l.strip() for l in Path(log).read_text(errors="replace").splitlines() if l.strip()]
    except OSError:
        return "no log written"
    fatal = [l for l in lines if "fatal" in l.lower()]
    errors = [l for l in lines if "error" in l.lower() and not any(b in l for b in BENIGN)]
    line = (fatal or errors or lines[-1:] or ["empty log"])[0]
    if line.startswith("[") and "] " in line:
        line = line.split("] ", 1)[1]
    return line


# ---------------------------------------------------------------------------------------------
# processes


@dataclass
class _Proc:
    pid: int
    comm: str
    state: str
    ppid: int
    pgrp: int
    sid: int
    start: int
    environ: frozenset


def _proc(pid, environ=True):
    """A live (not zombie) process, or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except (OSError, ValueError):
        return None
    try:
        lp, rp = data.index(b"("), data.rindex(b")")
        fields = data[rp + 2:].split()
        state = fields[0].decode()
        if state in ("Z", "X", "x"):
            return None
        env = frozenset()
        if environ:
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    env = frozenset(f.read().split(b"\0"))
            except OSError:
                pass
        return _Proc(pid, data[lp + 1:rp].decode(errors="replace"), state, int(fields[1]), int(fields[2]),
                     int(fields[3]), int(fields[19]), env)
    except (ValueError, IndexError):
        return None


def _all_procs():
    procs = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            p = _proc(int(name))
            if p:
                procs[p.pid] = p
    return procs


def _has_marker(p, d):
    return f"{MARKER}={d}".encode() in p.environ


def _protected(procs):
    """This process and its ancestors (and PID 1): never ours to stop."""
    keep, pid = {1}, os.getpid()
    while pid and pid not in keep:
        keep.add(pid)
        p = procs.get(pid) or _proc(pid, environ=False)
        pid = p.ppid if p else 0
    return keep


def _ours(d, procs=None):
    """{pid: _Proc} of every live process the cluster in `d` is responsible for."""
    procs = _all_procs() if procs is None else procs
    marker = f"{MARKER}={d}".encode()
    conf = f"SLURM_CONF={d / 'slurm.conf'}".encode()
    keep = _protected(procs)
    own_sessions = {procs[p].sid for p in keep if p in procs} | {0, 1}
    ours = {pid for pid, p in procs.items() if marker in p.environ}
    sessions = {procs[pid].sid for pid in ours} - own_sessions
    for pid, p in procs.items():
        if p.sid in sessions:
            ours.add(pid)  # job tasks: slurmstepd's session
        elif conf in p.environ and any(e.startswith(b"SLURMD_NODENAME=") for e in p.environ):
            ours.add(pid)  # a task of this cluster whose slurmstepd is gone
    grew = True
    while grew:
        grew = False
        for pid, p in procs.items():
            if pid not in ours and p.ppid in ours:
                ours.add(pid)
                grew = True
    return {pid: procs[pid] for pid in ours - keep}


def _alive(p):
    q = _proc(p.pid, environ=False)
    return q is not None and q.start == p.start


def _signal(p, sig):
    if _alive(p):  # same start time: not a recycled PID
        try:
            os.kill(p.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _wait_gone(ps, timeout, ignoring=()):
    """Wait until every process in `ps` is gone, or only ones named in `ignoring` remain."""
    end = time.monotonic() + timeout
    left = [p for p in ps if _alive(p)]
    while any(p.comm not in ignoring for p in left) and time.monotonic() < end:
        time.sleep(0.02)
        left = [p for p in left if _alive(p)]
    return left


def _stop(d):
    """Stop every process of the cluster in `d`: controller, slurmd, job steps and their
    tasks (TERM, then KILL after a grace period), then munged last (the others need it to
    shut down cleanly). Returns {pid: name} of what was running."""
    stopped = {}
    for want_munged in (False, True):
        for sig, grace in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 2.0)):
            # a fresh scan each time: job processes may have been forked meanwhile
            ps = [p for p in _ours(d).values() if (p.comm == "munged") == want_munged]
            # controller first (it would otherwise mark nodes down and requeue), slurmd last
            ps.sort(key=lambda p: (p.comm != "slurmctld", p.comm == "slurmd"))
            for p in ps:
                stopped.setdefault(p.pid, p.comm)
                _signal(p, sig)
            # slurmstepd ignores SIGTERM: once the rest is gone, go on to SIGKILL at once
            _wait_gone(ps, grace, ignoring=("slurmstepd",) if sig == signal.SIGTERM else ())
    left = _ours(d)
    if left:
        names = ", ".join(f"{p.comm} ({pid})" for pid, p in sorted(left.items()))
        raise NearmetalError(f"could not stop every process of the cluster in {d}: {names} still running")
    for f in ([d / "munge" / "munged.pid", d / "ctld" / "slurmctld.pid"]
              + list((d / "nodes").glob("*/slurmd.pid"))):
        _unlink(f)
    return stopped


# ---------------------------------------------------------------------------------------------
# small helpers


def _daemon_pid(path, comm, procs):
    pid = _read_pid(path)
    p = procs.get(pid) if pid else None
    return pid if p is not None and p.comm == comm else None


def _read_pid(path):
    try:
        return int(Path(path).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _read_meta(d):
    try:
        return json.loads((d / "cluster.json").read_text())
    except (OSError, ValueError):
        return {}


def _unlink(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


@contextmanager
def _lock(d):
    try:
        f = open(d / ".lock", "a")
    except OSError as e:
        raise NearmetalError(f"cannot write in the cluster directory {d}: {e.strerror}") from None
    with f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
