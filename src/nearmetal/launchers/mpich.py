"""MPICH's hydra process manager (mpiexec.hydra), simple PMI wire-up."""

from .base import Launcher


class HydraLauncher(Launcher):
    family = "mpich"

    def command(self, req):
        argv = [self.mpi["launcher"], "-n", str(req.ranks)]
        if req.ranks_per_node:
            argv += ["-ppn", str(req.ranks_per_node)]
        if req.pmi_port:
            # PMI over a TCP port instead of an inherited fd (runtimes that drop fds).
            argv.append("-pmi-port")
        for key, value in req.env.items():
            argv += ["-genv", key, value]
        return argv + req.rank_argv, {}
