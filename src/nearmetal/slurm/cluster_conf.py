"""slurm.conf for a local cluster (cluster.py): every daemon on 127.0.0.1, ports chosen
per directory among free ones, and values checked so that none can start a directive of
its own. docs/slurm-cluster.md explains each setting."""

import hashlib
import socket

from ..errors import NearmetalError

CPUS_PER_NODE = 4
PORT_LOW, PORT_HIGH = 17000, 31999  # below the kernel's ephemeral range (32768-60999)
CONF_SPECIAL = "#=%\"'\\"  # slurm.conf syntax: comment, key=value, %-patterns, quoting


def conf_safe(value, what):
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


def short_hostname():
    return socket.gethostname().split(".")[0]


def port_free(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Slurm binds: TIME_WAIT is no obstacle
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def choose_ports(d, count):
    """`count` free ports on 127.0.0.1, starting at a place derived from the directory, so a
    cluster usually gets the same ports again and two clusters do not collide."""
    span = PORT_HIGH - PORT_LOW + 1
    start = int(hashlib.sha1(str(d).encode()).hexdigest(), 16) % span
    ports = []
    for i in range(span):
        p = PORT_LOW + (start + i) % span
        if port_free(p):
            ports.append(p)
            if len(ports) == count:
                return ports
    raise NearmetalError(f"no {count} free TCP ports on 127.0.0.1 between {PORT_LOW} and {PORT_HIGH}")


def render_conf(d, names, ports, hostname):
    """slurm.conf for the cluster in `d` (ports: slurmctld first, then one per node)."""
    d, hostname = conf_safe(d, "the cluster directory"), conf_safe(hostname, "the host name")
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
