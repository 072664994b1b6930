"""Slurm's srun: ranks started by slurmd with the PMI plugin the MPI family speaks.

Open MPI wires up through PMIx (`--mpi=pmix`), MPICH through PMI-2 (`--mpi=pmi2`). The
plugins the site's Slurm offers are read from `srun --mpi=list`; a missing one is an error
before anything starts. Containers are started per rank by srun exactly as by mpirun.
"""

import os
import shutil

from ..errors import NearmetalError
from . import LAUNCHERS
from .base import Launcher


def _plugins():
    """MPI plugins of the reachable Slurm (`srun --mpi=list`); a clear error when none answers."""
    from ..slurm.info import detect

    info = detect()
    if info is None:
        from ..slurm.cluster import unreachable_hint

        raise NearmetalError("--scheduler slurm: no Slurm reachable (no SLURM_CONF, or its controller does not "
                             f"answer `scontrol ping`); set SLURM_CONF, or {unreachable_hint()}")
    return info["mpi_plugins"]


@LAUNCHERS.register
class Srun(Launcher):
    binds_ranks = False  # Slurm's task plugin and the site's defaults place and bind the ranks

    def __init__(self, installation, req=None):
        super().__init__(installation, req)
        self.opts = dict(getattr(req, "options", None) or getattr(req, "slurm", None) or {})
        # Explicit: in a batch script the step would start wherever the job does.
        self.workdir = getattr(req, "workdir", None)
        self.srun = shutil.which("srun")
        if not self.srun:
            raise NearmetalError("--scheduler slurm: srun is not installed (Debian: slurm-client)")

    def plugin(self):
        from ..families import get as get_family

        have = _plugins()
        wanted = get_family(self.installation["family"]).slurm_pmi
        for want in wanted:
            if want in have:
                return want
        raise NearmetalError(f"this Slurm offers MPI plugins {', '.join(have) or 'none'}, but {self.installation['family']} "
                             f"needs {' or '.join(wanted)}; ask the site for it or use --scheduler local")

    def _common(self):
        argv = [self.srun, f"--mpi={self.plugin()}", "--kill-on-bad-exit=1"]
        if os.environ.get("SLURM_JOB_ID") and self.opts.get("nodes"):
            argv.append(f"--nodes={self.opts['nodes']}")
        if self.workdir:
            argv.append(f"--chdir={self.workdir}")
        return argv

    @staticmethod
    def _component(req):
        argv = ["-n", str(req.ranks)]
        if req.ranks_per_node:
            argv.append(f"--ntasks-per-node={req.ranks_per_node}")
        if req.threads > 1:
            argv.append(f"--cpus-per-task={req.threads}")
        return argv

    def command(self, req):
        # srun hands the caller's environment to the ranks (--export=ALL inside a job).
        env, rank_argv = _preload_on_ranks(req)
        return self._common() + self._component(req) + rank_argv, env

    def command_mpmd(self, reqs):
        """A heterogeneous job step: `srun ... A : ... B` shares MPI_COMM_WORLD."""
        argv, env = self._common(), {}
        for i, r in enumerate(reqs):
            r_env, rank_argv = _preload_on_ranks(r)
            argv += ([":"] if i else []) + self._component(r) + rank_argv
            for k, v in r_env.items():
                env.setdefault(k, v)
        return argv, env


def _preload_on_ranks(req):
    """(environment for srun, the rank's argv): LD_PRELOAD (the tracer, the witness) goes on
    the rank's own command line through env(1), so that srun, a batch script's shell and
    sbatch — which all inherit srun's environment — never load it: it reaches the ranks only."""
    env = dict(req.env)
    preload = env.pop("LD_PRELOAD", None)
    if not preload:
        return env, list(req.rank_argv)
    return env, ["/usr/bin/env", f"LD_PRELOAD={preload}", *req.rank_argv]
