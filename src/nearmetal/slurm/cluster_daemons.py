"""The daemons of a local cluster (cluster.py): starting munged, slurmctld and one slurmd per
node, waiting until Slurm calls every node idle, finding every process the cluster is
responsible for, and stopping them by PID.

Every process we start carries MARKER=<dir> in its environment; slurmstepd inherits it from
slurmd. The cluster's processes are those carrying the marker, the members of their
sessions (job tasks run in slurmstepd's session), their descendants, and orphaned job tasks
of this cluster (SLURM_CONF=<our conf> and SLURMD_NODENAME set), never the calling process
or its ancestors.
"""

import fcntl
import json
import os
import shutil
import signal
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

from .. import proc
from ..errors import NearmetalError
from . import cluster_conf

MARKER = "NEARMETAL_CLUSTER_DIR"
TOOLS = {"munged": "munge", "slurmctld": "slurmctld", "slurmd": "slurmd", "sinfo": "slurm-client",
         "srun": "slurm-client", "scontrol": "slurm-client"}
SUN_PATH_MAX = 107
# Error lines every fresh start logs (no saved state yet): never the reason a start failed.
BENIGN = ("state file", "Trying backup state save file")


def check_tools():
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


def start(d, names, timeout):
    """Start the daemons of a fresh cluster in `d` with nodes `names` and wait until every
    node is idle; returns the ports {"slurmctld": port, node: port}."""
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

    hostname = cluster_conf.short_hostname()
    ports = cluster_conf.choose_ports(d, len(names) + 1)
    conf = d / "slurm.conf"
    conf.write_text(cluster_conf.render_conf(d, names, ports, hostname))
    meta = {"nodes": names, "hostname": hostname,
            "ports": {"slurmctld": ports[0]} | dict(zip(names, ports[1:]))}
    (d / "cluster.json").write_text(json.dumps(meta, indent=1) + "\n")

    env = _daemon_env(d)
    logs = log_files(d, names)
    _spawn(["munged", "--force", f"--socket={sock}", f"--key-file={key}", f"--pid-file={munge / 'munged.pid'}",
            f"--log-file={logs['munged']}", f"--seed-file={munge / 'munged.seed'}"], env, logs["munged"], "munged")
    _wait_pidfile(munge / "munged.pid", "munged", logs["munged"], d)
    _spawn(["slurmctld", "-c", "-f", str(conf)], env, logs["slurmctld"], "slurmctld")  # -c: no old state
    pids = {"slurmctld": _wait_pidfile(d / "ctld" / "slurmctld.pid", "slurmctld", logs["slurmctld"], d)}
    # slurmd registers at start and retries only a second later: start it once slurmctld answers
    end = time.monotonic() + timeout
    while not ctld_up(conf):
        running = proc.read(pids["slurmctld"]) is not None
        if not running or time.monotonic() > end:
            what = f"not answering after {timeout:.0f} s" if running else "exited during start-up"
            raise NearmetalError(f"slurmctld {what}: {log_reason(logs['slurmctld'])}; see {logs['slurmctld']}")
        time.sleep(0.01)
    for n in names:
        _spawn(["slurmd", "-f", str(conf), "-N", n], env, logs[n], f"slurmd -N {n}")
    for n in names:
        pids[n] = _wait_pidfile(d / "nodes" / n / "slurmd.pid", f"slurmd -N {n}", logs[n], d)
    _wait_ready(d, names, pids, logs, timeout)
    return meta["ports"]


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
        raise NearmetalError(f"{what} failed to start (exit {r.returncode}): {log_reason(log)}; see {log}")


def _wait_pidfile(path, what, log, d, timeout=10.0):
    end = time.monotonic() + timeout
    while True:
        pid = _read_pid(path)
        if pid:
            p = proc.read(pid)
            if p and p.has_env(f"{MARKER}={d}"):
                return pid
        if time.monotonic() > end:
            raise NearmetalError(f"{what} did not start (no live process behind {path} after {timeout:.0f} s): "
                                 f"{log_reason(log)}; see {log}")
        time.sleep(0.01)


def _wait_ready(d, names, pids, logs, timeout):
    conf = d / "slurm.conf"
    end = time.monotonic() + timeout
    states, last_check = {}, 0.0
    while True:
        # sinfo retries an unreachable controller for ~9 s: ask only once slurmctld listens
        states = node_states(conf, timeout=5) if ctld_up(conf) else {}
        if all(states.get(n) == "idle" for n in names):
            return
        now = time.monotonic()
        if now - last_check > 0.5:
            last_check = now
            for what, pid in pids.items():
                if not proc.read(pid):
                    log = logs[what]
                    name = what if what == "slurmctld" else f"slurmd -N {what}"
                    raise NearmetalError(f"{name} exited during start-up: {log_reason(log)}; see {log}")
        if now > end:
            bad = [n for n in names if states.get(n) != "idle"]
            shown = ", ".join(f"{n}: {states.get(n) or 'not registered'}" for n in bad)
            files = " and ".join(str(logs[x]) for x in ["slurmctld"] + bad[:1])
            raise NearmetalError(f"Slurm nodes not idle after {timeout:.0f} s ({shown}): see {files}")
        time.sleep(0.02)


def ctld_up(conf):
    """`scontrol ping`: answers at once, also while slurmctld does not listen yet."""
    try:
        out = subprocess.run(["scontrol", "ping"], env=_client_env(conf), capture_output=True, text=True,
                             timeout=5, stdin=subprocess.DEVNULL)
    except (subprocess.TimeoutExpired, OSError):
        return False
    return " is UP" in out.stdout


def node_states(conf, timeout=5):
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


def log_files(d, names):
    logs = {"munged": d / "munge" / "munged.log", "slurmctld": d / "ctld" / "slurmctld.log"}
    for n in names:
        logs[n] = d / "nodes" / n / "slurmd.log"
    return logs


def log_reason(log):
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


def cluster_processes(d, procs=None):
    """{pid: proc.Proc} of every live process the cluster in `d` is responsible for."""
    procs = proc.all_processes() if procs is None else procs
    marker, conf = f"{MARKER}={d}", f"SLURM_CONF={d / 'slurm.conf'}"
    keep = proc.lineage(procs)
    own_sessions = {procs[p].sid for p in keep if p in procs} | {0, 1}
    found = {pid for pid, p in procs.items() if p.has_env(marker)}
    sessions = {procs[pid].sid for pid in found} - own_sessions
    for pid, p in procs.items():
        if p.sid in sessions:
            found.add(pid)  # job tasks: slurmstepd's session
        elif p.has_env(conf) and p.has_env_key("SLURMD_NODENAME"):
            found.add(pid)  # a task of this cluster whose slurmstepd is gone
    return {pid: procs[pid] for pid in proc.with_descendants(procs, found) - keep}


def stop(d):
    """Stop every process of the cluster in `d`: controller, slurmd, job steps and their
    tasks (TERM, then KILL after a grace period), then munged last (the others need it to
    shut down cleanly). Returns {pid: name} of what was running."""
    stopped = {}
    for want_munged in (False, True):
        for sig, grace in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 2.0)):
            # a fresh scan each time: job processes may have been forked meanwhile
            ps = [p for p in cluster_processes(d).values() if (p.comm == "munged") == want_munged]
            # controller first (it would otherwise mark nodes down and requeue), slurmd last
            ps.sort(key=lambda p: (p.comm != "slurmctld", p.comm == "slurmd"))
            for p in ps:
                stopped.setdefault(p.pid, p.comm)
                proc.send(p, sig)
            # slurmstepd ignores SIGTERM: once the rest is gone, go on to SIGKILL at once
            proc.wait_gone(ps, grace, ignoring=("slurmstepd",) if sig == signal.SIGTERM else ())
    left = cluster_processes(d)
    if left:
        names = ", ".join(f"{p.comm} ({pid})" for pid, p in sorted(left.items()))
        raise NearmetalError(f"could not stop every process of the cluster in {d}: {names} still running")
    for f in ([d / "munge" / "munged.pid", d / "ctld" / "slurmctld.pid"]
              + list((d / "nodes").glob("*/slurmd.pid"))):
        _unlink(f)
    return stopped


def daemon_pid(path, comm, procs):
    pid = _read_pid(path)
    p = procs.get(pid) if pid else None
    return pid if p is not None and p.comm == comm else None


def _read_pid(path):
    try:
        return int(Path(path).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def read_meta(d):
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
def lock(d):
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
