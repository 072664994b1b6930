"""MPICH's hydra process manager (mpiexec.hydra), simple PMI wire-up."""

from . import LAUNCHERS
from ._binding import CHOICES
from .base import Launcher


@LAUNCHERS.register
class Hydra(Launcher):

    @staticmethod
    def _remote(req):
        """Ranks one per named host, hydra's proxies started there by the agent (as by ssh)."""
        if not req.hosts:
            return []
        return ["-launcher", "ssh", "-launcher-exec", req.agent, "-hosts", ",".join(f"{h}:1" for h in req.hosts)]

    @staticmethod
    def _binding(req):
        """hydra's -bind-to: rank i on core i, or explicitly unbound (launchers/_binding.py)."""
        return ["-bind-to", req.binding] if req.binding in CHOICES else []

    def command(self, req):
        argv = [self.installation["launcher"], *self._remote(req), *self._binding(req), "-n", str(req.ranks)]
        if req.ranks_per_node:
            argv += ["-ppn", str(req.ranks_per_node)]
        if req.pmi_port:
            # PMI over a TCP port instead of an inherited fd (runtimes that drop fds).
            argv.append("-pmi-port")
        for key, value in req.env.items():
            argv += ["-genv", key, value]
        return argv + req.rank_argv, {}

    def command_mpmd(self, reqs):
        argv = [self.installation["launcher"], *self._remote(reqs[0]), *self._binding(reqs[0])]
        if any(r.pmi_port for r in reqs):
            argv.append("-pmi-port")
        for i, r in enumerate(reqs):
            argv += ([":"] if i else []) + ["-n", str(r.ranks)]
            if r.ranks_per_node:
                argv += ["-ppn", str(r.ranks_per_node)]
            for key, value in r.env.items():
                argv += ["-env", key, value]   # per executable block
            argv += r.rank_argv
        return argv, {}
