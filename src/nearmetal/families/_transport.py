"""Which transport the ranks really used between them, from the MPI's own reporting (a study
records it with every cell and warns when ranks of one node talked over TCP: the mechanism
behind seed 001's 4x GROMACS slowdown in containers without the host's fabric support).

- Open MPI's ob1 PML with btl_base_verbose=1 says, per peer:
  `[HOST:PID] mca: bml: Using tcp btl for send to [[JOB,1],RANK] on node PEERHOST`
- UCX (MPICH's ch4:ucx, Open MPI's pml ucx) with UCX_LOG_LEVEL=info says, per endpoint
  configuration: `[T] [HOST:PID:THREAD] ucp_worker.c:N UCX INFO ep_cfg[I]: tag(tcp/eth0 ...) ...`
  (1.13; the peer is not named; a configuration with a `self` lane is the rank's own endpoint),
  or `... UCX INFO ucp_context_0 intra-node cfg#I tag(...) ...` (1.18; `self`, `intra-node`, i.e.
  a peer on this host, or `inter-node` says which endpoint). 1.18 on trixie writes a line of
  over 128 bytes to stderr in 128-byte pieces, so two ranks' lines can interleave: a line is
  read up to where another begins inside it, and one begun mid-line only to its 128th byte
  (the rest is another's).
"""

import re

SHARED_MEMORY = ("vader", "sm", "smcuda", "sysv", "posix", "cma", "xpmem", "knem", "cuda_ipc")
TCP = ("tcp",)
# a CUDA-aware MPI's device-buffer transports (discovery/mpi_cuda.py): the context says which were used
CUDA = ("cuda_copy", "cuda_ipc", "gdr_copy", "smcuda")

_BML = re.compile(r"^\[([^:\]]+):\d+\] mca: bml: Using (\S+) btl for send to \S+ on node (\S+)", re.M)
_UCX = re.compile(r"(?:\[[\d.]+\]\s*)?\[([^:\]]+):\s*\d+\s*:\w+\]\s+ucp_worker\.c:\d+\s+UCX\s+INFO\s+"
                  r"(?:ep_cfg\[\d+\]:|\S+ (self|intra-node|inter-node) cfg#\d+)([^\n\[]*)")
_LANE = re.compile(r"([a-z_0-9]+)/[^ )]*")


def report(text):
    """[(host, peer host or None, transport)] from a run's stderr; self-sends left out."""
    out = []
    for host, btl, peer in _BML.findall(text or ""):
        if btl != "self":
            out.append((host, peer, btl))
    for m in _UCX.finditer(text or ""):
        host, kind, lanes = m.groups()
        if m.start() and text[m.start() - 1] != "\n":  # begun inside another rank's line
            lanes = lanes[:max(0, m.start() + 128 - m.start(3))]
        found = set(_LANE.findall(lanes))
        if kind == "self" or (not kind and "self" in found):  # the rank's endpoint to itself
            continue
        out += [(host, host if kind == "intra-node" else None, tl) for tl in found]
    return sorted(set(out))


def summary(entries, one_machine):
    """The context's `transport`: what was used between ranks, and whether ranks of one node
    talked over TCP (one_machine: every rank ran on this machine, whatever its host name)."""
    if not entries:
        return None
    used = sorted({t for _, _, t in entries})
    tcp_in_node = any(t in TCP and (one_machine or peer == host) for host, peer, t in entries)
    out = {"between_ranks": used, "shared_memory": any(t in SHARED_MEMORY for t in used),
           "tcp_within_node": tcp_in_node}
    cuda = [t for t in used if t in CUDA]
    if cuda:  # only then: a CPU run's record is as it was
        out["cuda"] = cuda
    return out


def warning(transport):
    """A line for a TCP fallback between ranks of one node, or None."""
    if not transport or not transport.get("tcp_within_node"):
        return None
    return (f"warning: ranks on one node talked over TCP ({', '.join(transport['between_ranks'])}); shared memory "
            f"was not used: a container MPI without the host's transports, or ranks in separate namespaces, fall "
            "back to TCP, and every message then crosses the kernel's network stack instead of a shared-memory copy: "
            "communication-bound applications can run several times slower")


# What transport_env makes the MPI print besides the lines above: UCX's other INFO and DIAG
# lines. Dropped from a run's stored stderr, so a failure's tail keeps the program's own words.
_ASKED_FOR = re.compile(r"^(?:\[[^\]]*\] mca: bml: Using \S+ btl .*|\[[\d.]+\] \[[^\]]*\]\s+\S+:\d+\s+UCX\s+(?:INFO|DIAG) .*)\n?",
                        re.M)


def without_reports(text):
    """stderr without the lines transport_env asked the MPI for."""
    return _ASKED_FOR.sub("", text or "")
