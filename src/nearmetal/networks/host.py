"""The host's network: ranks share the machine's network, IPC and /dev/shm (shared memory
between the ranks of a node), as in any HPC job. Nothing to set up."""

from . import NETWORKS, Network


@NETWORKS.register
class Host(Network):
    emulated = False
