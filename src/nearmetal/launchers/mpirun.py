"""Open MPI's mpirun (ORTE, PMIx wire-up)."""

import os

from . import LAUNCHERS
from .base import Launcher


@LAUNCHERS.register
class Mpirun(Launcher):

    def _global(self, reqs):
        argv = [self.installation["launcher"]]
        if os.geteuid() == 0:
            argv.append("--allow-run-as-root")
        # Without --oversubscribe mpirun refuses more ranks than it counts slots.
        if sum(r.ranks * max(r.threads, 1) for r in reqs) > reqs[0].cores:
            argv.append("--oversubscribe")
        binding = reqs[0].binding
        if binding == "core":  # a core per rank, ranks placed core by core (launchers/_binding.py)
            argv += ["--map-by", "core", "--bind-to", "core"]
        elif binding == "none":
            argv += ["--bind-to", "none"]
        elif any(r.threads > 1 for r in reqs) or reqs[0].hosts:
            # Nothing asked: threads need their cores; named hosts share this machine's cores,
            # and each orted would bind its one rank to its core 0, the same core for every host.
            argv += ["--bind-to", "none"]
        if reqs[0].hosts:
            # One rank per named host, each orted started there by the agent (as by ssh), without
            # the shell lines a prefix adds, connected straight to mpirun.
            argv += ["--noprefix", "--host", ",".join(f"{h}:1" for h in reqs[0].hosts), "--mca", "plm_rsh_agent", reqs[0].agent,
                     "--mca", "plm_rsh_no_tree_spawn", "1", "--mca", "routed", "direct"]
        return argv

    @staticmethod
    def _context(req):
        """One app context: its ranks, placement, environment and command. Open MPI 4.1
        applies -x to the app context it stands in (measured: `-x A=1 -np 1 a : -np 1 b`
        sets A for a only), so every context carries its own."""
        argv = ["-np", str(req.ranks)]
        for key, value in req.env.items():
            argv += ["-x", f"{key}={value}"]
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
