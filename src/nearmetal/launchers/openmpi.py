"""Open MPI's mpirun (ORTE, PMIx wire-up)."""

import os

from .base import Launcher


class OpenMpiLauncher(Launcher):
    family = "openmpi"

    def command(self, req):
        argv = [self.mpi["launcher"], "-np", str(req.ranks)]
        env = {}
        if os.geteuid() == 0:
            argv.append("--allow-run-as-root")
        # Without --oversubscribe mpirun refuses more ranks than it counts slots.
        if req.ranks * max(req.threads, 1) > req.cores:
            argv.append("--oversubscribe")
        if req.ranks_per_node:
            argv += ["--map-by", f"ppr:{req.ranks_per_node}:node"]
        if req.threads > 1:
            argv += ["--bind-to", "none"]
        for key, value in req.env.items():
            argv += ["-x", f"{key}={value}"]
        return argv + req.rank_argv, env
