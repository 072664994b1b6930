"""How the ranks of a job reach each other: one module per network mode (study `network`,
`run --network`).

- host: the host's network, IPC and /dev/shm, as an HPC job runs (the default);
- isolated: every rank in its own network, IPC, UTS and mount namespace, the nodes joined
  by veth pairs to a bridge, as containers on an overlay network are (seed 001): the ranks
  of one machine then talk over TCP, the mechanism behind seed 001's slowdowns.

A network backend checks that a run can use it, tells the launcher which hosts and which
remote-start agent to use, and wraps the launcher's argv. A new one is one module here.
"""

from ..registry import Registry

NETWORKS = Registry(__name__, "network", first=("host", "isolated"))
DEFAULT = "host"


def names():
    return NETWORKS.names()


def get(name):
    return NETWORKS.get(name)()


def is_default(name):
    """Whether a study's network value asks for nothing beyond the host's own network."""
    return not name or name == DEFAULT


class Network:
    name = ""  # the registry sets it: the module's name
    # The ranks' network is one nearmetal builds (emulated nodes), not the machine's own: it
    # is recorded with each run, an unprivileged account cannot use it (it is built as root
    # around the launcher), and ranks talking over TCP there is by design, never a fallback
    # worth a warning.
    emulated = True

    def check(self, components):
        """A one-line NearmetalError when these resolved components cannot run on this network."""

    def hosts(self, total_ranks):
        """The host names the launcher places one rank each on; None: the launcher's own placement."""
        return None

    def agent(self):
        """The ssh-like program the launcher starts its daemons on those hosts with (None: none)."""
        return None

    def wrap(self, argv, total_ranks):
        """The launcher's argv, run in this network (unchanged for the host's)."""
        return list(argv)

    def notes(self, total_ranks):
        return []

    def account_problem(self):
        """Why an unprivileged account (run --user) cannot use this network, or None."""
        return "its emulated nodes are built as root around the launcher" if self.emulated else None
