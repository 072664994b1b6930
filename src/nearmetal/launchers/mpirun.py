"""Open MPI's mpirun (ORTE, PMIx wire-up)."""

import os

from . import LAUNCHERS
from .base import Launcher


@LAUNCHERS.register
class Mpirun(Launcher):

    def _global(self, reqs):
        argv = [self.mpi["launcher"]]
        if os.geteuid() == 0:
            argv.append("--allow-run-as-root")
        # Without --oversubscribe mpirun refuses more ranks than it counts slots.
        if sum(r.ranks * max(r.threads, 1) for r in reqs) > reqs[0].cores:
            argv.append("--oversubscribe")
        if any(r.threads > 1 for r in reqs):
            argv += ["--bind-to", "none"]
        # -x is global in mpirun (applies to every app context): the union, first wins.
        env = {}
        for r in reqs:
            for key, value in r.env.items():
                env.setdefault(key, value)
        for key, value in env.items():
            argv += ["-x", f"{key}={value}"]
        return argv

    @staticmethod
    def _context(req):
        argv = ["-np", str(req.ranks)]
        if req.ranks_per_node:
            argv += ["--map-by", f"ppr:{req.ranks_per_node}:node"]
        return argv + req.rank_argv

    def command(self, req):
        argv = self._global([req])
        return argv[:1] + ["-np", str(req.ranks)] + argv[1:] + self._context(req)[2:], {}

    def command_mpmd(self, reqs):
        argv = self._global(reqs)
        for i, r in enumerate(reqs):
            argv += ([":"] if i else []) + self._context(r)
        return argv, {}
