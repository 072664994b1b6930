"""The isolated network at run time: `python -m nearmetal.networks._netns --nodes N --agent A -- LAUNCHER...`.

Runs under nm-supervise, in place of the launcher (networks/isolated.py puts it there). It
builds an emulated cluster out of namespaces, runs the launcher in it, and takes it down:

- a hub: a process holding a new network, UTS and mount namespace with a bridge
  (10.231.0.1/24, host name `nmhub`), where the launcher runs;
- one node per rank: a process holding a new network, IPC, UTS and mount namespace, joined
  to the bridge by a veth pair (10.231.0.K+2, host name nK), with a private tmpfs on
  /dev/shm: MPICH shared memory across network namespaces otherwise (measured here);
- /etc/hosts in each names the hub and the nodes (bind-mounted in its mount namespace only).

Every address and link is made inside these namespaces (`ip` runs in them through
nsenter; veth peers are created in place): nothing is added to the root namespace. The
namespaces belong to their holder processes, not to names under /run/netns, so they go
when the holders do — at the end, and, since the holders are in nm-supervise's tree, also
when nearmetal is killed (SIGKILL included): nothing is left to sweep.

The launcher reaches the nodes through nm-netns-agent (its ssh), which looks up the holder
of a node in NM_NETNS_NODES and runs the launcher's daemon in that node's namespaces.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile

SUBNET = "10.231.0"  # only ever configured inside the job's own namespaces
HUB = "nmhub"
MAX_NODES = 250


def node_name(k):
    return f"n{k}"


def node_address(k):
    return f"{SUBNET}.{k + 2}"


def hosts_text(nodes):
    lines = ["127.0.0.1\tlocalhost", f"{SUBNET}.1\t{HUB}"]
    lines += [f"{node_address(k)}\t{node_name(k)}" for k in range(nodes)]
    return "\n".join(lines) + "\n"


class SetupError(Exception):
    pass


def _sh(argv, stdin=None):
    """Run one set-up command (an argv, never a shell); SetupError with its last line on failure."""
    p = subprocess.run(argv, input=stdin, capture_output=True, text=True)
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or [f"exit status {p.returncode}"])[-1]
        raise SetupError(f"{' '.join(argv[:6])}: {last}")


def _holder(namespaces):
    """A process that holds new namespaces (unshare's flags) until it is killed."""
    return subprocess.Popen(["unshare", *namespaces, "--propagation", "private", "--", "sleep", "infinity"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _in(pid, *flags):
    return ["nsenter", "-t", str(pid), *flags, "--"]


def build(nodes, hosts_file):
    """(hub holder, [node holders]): the emulated cluster, configured."""
    holders = []
    try:
        hub = _holder(["--net", "--uts", "--mount"])
        holders.append(hub)
        for _ in range(nodes):
            holders.append(_holder(["--net", "--ipc", "--uts", "--mount"]))
        _wait_unshared(holders)
        batch = ["link set lo up", "link add nmbr type bridge", "link set nmbr up", f"addr add {SUBNET}.1/24 dev nmbr"]
        for k, h in enumerate(holders[1:]):
            batch += [f"link add nmv{k} type veth peer name eth0 netns {h.pid}", f"link set nmv{k} master nmbr up"]
        _sh(_in(hub.pid, "-n") + ["ip", "-batch", "-"], "\n".join(batch) + "\n")
        _sh(_in(hub.pid, "-u") + ["hostname", HUB])
        _sh(_in(hub.pid, "-m") + ["mount", "--bind", hosts_file, "/etc/hosts"])
        for k, h in enumerate(holders[1:]):
            _sh(_in(h.pid, "-n") + ["ip", "-batch", "-"],
                f"link set lo up\naddr add {node_address(k)}/24 dev eth0\nlink set eth0 up\n")
            _sh(_in(h.pid, "-u") + ["hostname", node_name(k)])
            _sh(_in(h.pid, "-m") + ["mount", "--bind", hosts_file, "/etc/hosts"])
            _sh(_in(h.pid, "-m") + ["mount", "-t", "tmpfs", "-o", "mode=1777", "nm-shm", "/dev/shm"])
    except BaseException:
        _end(holders)
        raise
    return holders[0], holders[1:]


def _wait_unshared(holders):
    """Until each holder runs `sleep` in its new namespaces (unshare has exec'd)."""
    import time

    own = os.readlink("/proc/self/ns/net")
    deadline = time.monotonic() + 10
    for h in holders:
        while True:
            if h.poll() is not None:
                raise SetupError(f"unshare: {h.stderr.read().strip() or 'exit status %d' % h.returncode}")
            try:
                if os.readlink(f"/proc/{h.pid}/ns/net") != own:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise SetupError("unshare did not start within 10 s")
            time.sleep(0.002)


def _end(holders):
    for h in holders:
        if h.poll() is None:
            h.kill()
    for h in holders:
        h.wait()
        if h.stderr:
            h.stderr.close()


def main(argv):
    cut = argv.index("--")
    ours, launcher = argv[:cut], argv[cut + 1:]
    nodes, agent = int(ours[ours.index("--nodes") + 1]), ours[ours.index("--agent") + 1]
    tmp = tempfile.mkdtemp(prefix="nearmetal-netns-")
    hub, holders, child = None, [], None
    # The launcher is asked to end on SIGTERM/SIGINT (nm-supervise's request), then the nodes go.
    stop = {}
    signal.signal(signal.SIGTERM, lambda s, f: stop.setdefault("signal", s))
    signal.signal(signal.SIGINT, lambda s, f: stop.setdefault("signal", s))
    try:
        hosts = os.path.join(tmp, "hosts")
        with open(hosts, "w") as f:
            f.write(hosts_text(nodes))
        os.chmod(hosts, 0o644)
        os.chmod(tmp, 0o755)
        hub, holders = build(nodes, hosts)
        env = dict(os.environ, NM_NETNS_NODES=",".join(f"{node_name(k)}={h.pid}" for k, h in enumerate(holders)),
                   NM_NETNS_AGENT=agent)
        if "signal" in stop:
            return 128 + stop["signal"]
        child = subprocess.Popen(_in(hub.pid, "-n", "-u", "-m", "-w") + launcher, env=env)
        while True:
            try:
                rc = child.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                if "signal" in stop and not stop.get("sent"):
                    stop["sent"] = True
                    child.send_signal(stop["signal"])
        return rc if rc >= 0 else 128 - rc
    except SetupError as e:
        print(f"nearmetal: network = isolated: setting up the namespaces failed: {e}", file=sys.stderr)
        return 125
    finally:
        if child is not None and child.poll() is None:
            child.kill()
            child.wait()
        _end(([hub] if hub else []) + holders)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
