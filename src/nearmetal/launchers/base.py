"""What a launcher must provide: start N copies of one rank command.

The launcher decides how ranks are started and placed (mpirun, mpiexec.hydra, and
later srun); what each rank runs (native program, or a runtime's container wrapper)
is handed to it as an argv, so launchers and runtimes combine freely.
"""

from abc import ABC, abstractmethod


class LaunchRequest:
    """ranks, ranks_per_node (None: launcher default), threads per rank, env for the ranks
    (forwarded by the launcher: native runs), and rank_argv (what every rank runs). hosts and
    agent: one rank on each named host, its daemon started through `agent` (an ssh-like
    program: an isolated network's nodes); None: the launcher places ranks on this machine.
    binding: "core" (a core per rank), "none" (unbound), or None (the launcher's default);
    decided for the whole job by launchers/_binding.py."""

    __slots__ = ("ranks", "ranks_per_node", "threads", "env", "rank_argv", "pmi_port", "cores", "total_ranks",
                 "hosts", "agent", "binding")

    def __init__(self, ranks, rank_argv, ranks_per_node=None, threads=1, env=None, pmi_port=False, cores=1):
        self.ranks, self.rank_argv = ranks, list(rank_argv)
        self.ranks_per_node, self.threads = ranks_per_node, threads
        self.env, self.pmi_port, self.cores = dict(env or {}), pmi_port, cores
        self.total_ranks = ranks
        self.hosts, self.agent = None, None
        self.binding = None


class Launcher(ABC):
    name = ""  # the registry sets it: the module's name
    binds_ranks = True  # it binds ranks to cores when asked (LaunchRequest.binding); False: the site's

    def __init__(self, installation, req=None):
        self.installation = installation  # the host MPI installation (discovery.mpi record)
        self.req = req  # the run request (options such as Slurm's), when the launcher needs it

    @abstractmethod
    def command(self, req):
        """(argv, env additions for the launcher process)."""

    def command_mpmd(self, reqs):
        """MPMD: several components sharing one MPI_COMM_WORLD; (argv, env additions)."""
        from ..errors import NearmetalError

        raise NearmetalError(f"the {self.name} launcher cannot start MPMD jobs")
