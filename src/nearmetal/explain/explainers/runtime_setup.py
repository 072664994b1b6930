"""The container runtime's own set-up, in the rank's process: a runtime that builds the
container in the process that then execs the program (Charliecloud's ch-run, bubblewrap's
child: `Runtime.setup_in_rank_process`) leaves its CPU time in the rank's, because CPU time
survives execve (docs/kernels-probes.md). Evidence: the start-up kernel's cpu_to_main, the
variant's against its baseline's. Cannot be changed alone (it is the runtime), so it is advice:
a once-per-launch cost, not a slower program."""

from . import EXPLAINERS
from .base import Explainer

MIN_GAP_S = 0.5e-3  # below a clock tick's share of noise: nothing to say


@EXPLAINERS.register
class RuntimeSetup(Explainer):
    title = "the container runtime's set-up in the rank's own process"

    def examine(self, slow, base):
        from ...runtimes import RUNTIMES

        name = slow.variant.get("runtime")
        runtime = RUNTIMES.get(name) if name in RUNTIMES.names() else None
        if runtime is None or not getattr(runtime, "setup_in_rank_process", False):
            return []
        mine, theirs = slow.startup.get("cpu_to_main"), base.startup.get("cpu_to_main")
        if mine is None or theirs is None or mine - theirs < MIN_GAP_S:
            return []
        fact = (f"{runtime.binary} sets up the container (namespaces, mounts) in each rank's own process before it "
                f"starts the program, and CPU time survives execve: {(mine - theirs) * 1e3:+.1f} ms of CPU per rank "
                f"before main ({mine * 1e3:.1f} against the baseline's {theirs * 1e3:.1f} ms)")
        return [self.cause(fact, 0.4, factor="runtime-setup",
                           fix="none needed: a once-per-launch cost of the runtime, not a slower program "
                               "(it matters only for very short runs)")]
