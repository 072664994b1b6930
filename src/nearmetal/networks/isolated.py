"""An isolated network: each rank alone in its own network, IPC, UTS and mount namespace
(its own host name, addresses and /dev/shm), the nodes joined by veth pairs to a bridge in
a hub namespace where the launcher runs, and the launcher's daemons started in the nodes
through nm-netns-agent (networks/_netns.py builds it at run time and takes it down).

What it emulates: containers on an overlay network, one per rank (seed 001's Docker runs),
where ranks of one machine cannot share memory and talk over TCP. Local runs only, as
root (it creates namespaces and links), one rank per node.
"""

import os
import sys

from . import NETWORKS, Network
from ..errors import NearmetalError

AGENT_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nm-netns-agent.c")


@NETWORKS.register
class Isolated(Network):

    def check(self, components):
        from ._netns import MAX_NODES

        first = components[0]
        if not first.scheduler.job_is_child:
            raise NearmetalError(f"network = isolated runs on this machine only (the {first.scheduler.name} "
                                 f"scheduler places ranks on its own nodes)")
        if os.geteuid() != 0:
            raise NearmetalError("network = isolated needs root: it creates network namespaces and veth pairs")
        if any(c.ranks_per_node not in (None, 1) for c in components):
            raise NearmetalError("network = isolated puts every rank on its own emulated node: "
                                 "--ranks-per-node must be 1 or unset")
        total = sum(c.ranks for c in components)
        if total > MAX_NODES:
            raise NearmetalError(f"network = isolated emulates at most {MAX_NODES} nodes, asked for {total} ranks")

    def hosts(self, total_ranks):
        from ._netns import node_name

        return [node_name(k) for k in range(total_ranks)]

    def agent(self):
        """nm-netns-agent, built into the nearmetal home when older than its source (once per instance)."""
        if getattr(self, "_agent", None) is None:
            from ..home import home_str
            from ..supervise import build_tool

            self._agent = build_tool(os.path.join(home_str(), "tools", "nm-netns-agent"), AGENT_SOURCE)
        return self._agent

    def wrap(self, argv, total_ranks):
        return [sys.executable, "-m", "nearmetal.networks._netns", "--nodes", str(total_ranks),
                "--agent", self.agent(), "--"] + list(argv)

    def notes(self, total_ranks):
        return [f"network isolated: {total_ranks} emulated nodes (own network, IPC, host name and /dev/shm each), "
                f"veth pairs to a bridge; the launcher and its daemons run inside"]
