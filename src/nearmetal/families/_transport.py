"""Which transport the ranks really used between them, from the MPI's own reporting (a study
records it with every cell and warns when ranks of one node talked over TCP: the mechanism
behind seed 001's 4x GROMACS slowdown in containers without the host's fabric support).

- Open MPI's ob1 PML with btl_base_verbose=1 says, per peer:
  `[HOST:PID] mca: bml: Using tcp btl for send to [[JOB,1],RANK] on node PEERHOST`
- UCX (MPICH's ch4:ucx, Open MPI's pml ucx) with UCX_LOG_LEVEL=info says, per endpoint
  configuration: `[T] [HOST:PID:THREAD] ucp_worker.c:N UCX INFO ep_cfg[I]: tag(tcp/eth0 ...) ...`
  (the peer is not named; a configuration with a `self` lane is the rank's own endpoint).
"""

import re

SHARED_MEMORY = ("vader", "sm", "smcuda", "sysv", "posix", "cma", "xpmem", "knem")
TCP = ("tcp",)

_BML = re.compile(r"^\[([^:\]]+):\d+\] mca: bml: Using (\S+) btl for send to \S+ on node (\S+)", re.M)
_UCX = re.compile(r"\[([^:\]]+):\s*\d+\s*:\d+\]\s+ucp_worker\.c:\d+\s+UCX\s+INFO\s+ep_cfg\[\d+\]:(.*)$", re.M)
_LANE = re.compile(r"([a-z_0-9]+)/[^ )]*")


def report(text):
    """[(host, peer host or None, transport)] from a run's stderr; self-sends left out."""
    out = []
    for host, btl, peer in _BML.findall(text or ""):
        if btl != "self":
            out.append((host, peer, btl))
    for host, lanes in _UCX.findall(text or ""):
        found = set(_LANE.findall(lanes))
        if "self" in found:  # the rank's endpoint to itself (its other lanes reach itself too)
            continue
        out += [(host, None, tl) for tl in found]
    return sorted(set(out))


def summary(entries, one_machine):
    """The context's `transport`: what was used between ranks, and whether ranks of one node
    talked over TCP (one_machine: every rank ran on this machine, whatever its host name)."""
    if not entries:
        return None
    used = sorted({t for _, _, t in entries})
    tcp_in_node = any(t in TCP and (one_machine or peer == host) for host, peer, t in entries)
    return {"between_ranks": used, "shared_memory": any(t in SHARED_MEMORY for t in used),
            "tcp_within_node": tcp_in_node}


def warning(transport):
    """A line for a TCP fallback between ranks of one node, or None."""
    if not transport or not transport.get("tcp_within_node"):
        return None
    return (f"warning: ranks on one node talked over TCP ({', '.join(transport['between_ranks'])}); shared memory "
            f"was not used: a container MPI without the host's transports, or ranks in separate namespaces, fall "
            f"back to TCP (seed 001: GROMACS 4x slower)")


# What transport_env makes the MPI print besides the lines above: UCX's other INFO and DIAG
# lines. Dropped from a run's stored stderr, so a failure's tail keeps the program's own words.
_ASKED_FOR = re.compile(r"^(?:\[[^\]]*\] mca: bml: Using \S+ btl .*|\[[\d.]+\] \[[^\]]*\]\s+\S+:\d+\s+UCX\s+(?:INFO|DIAG) .*)\n?",
                        re.M)


def without_reports(text):
    """stderr without the lines transport_env asked the MPI for."""
    return _ASKED_FOR.sub("", text or "")
