"""Where the gap lies: in start-up (launch to the end of MPI_Init) or in what follows it (the
program's work, MPI_Finalize, the exit). Evidence: the per-rank time to the end of MPI_Init (the slowest rank's, median over runs)
against the runs' wall times, or the start-up kernel's points. Says where, tests nothing."""

import statistics

from . import EXPLAINERS
from .base import Explainer


def init_end(ev):
    per_run = [max(r["t_init_end_s"] for r in run if isinstance(r.get("t_init_end_s"), (int, float)))
               for run in ev.ranks if any(isinstance(r.get("t_init_end_s"), (int, float)) for r in run)]
    if per_run:
        return statistics.median(per_run)
    return ev.startup.get("to_after_init")


@EXPLAINERS.register
class Startup(Explainer):
    title = "start-up (to the end of MPI_Init) or what follows it"

    def examine(self, slow, base):
        s, b = init_end(slow), init_end(base)
        if s is None or b is None:
            return []
        startup_gap = s - b
        if slow.wall_s and base.wall_s:
            gap = statistics.median(slow.wall_s) - statistics.median(base.wall_s)
        else:
            gap = None
        ms = abs(startup_gap) * 1e3
        lead = f"MPI_Init ends {ms:.2f} ms {'later' if startup_gap >= 0 else 'earlier'} per launch than the baseline's"
        if gap is not None and gap > 0:
            share = max(0.0, min(1.0, startup_gap / gap))
            # of the wall time, not of the answer's own figure: a time the program takes after
            # MPI_Init (a latency, a step time) leaves start-up out
            where = ("start-up, which figures the program measures after MPI_Init do not include" if share >= 0.5
                     else "what follows MPI_Init (the program's own work, MPI_Finalize, the exit)")
            if startup_gap <= 0:  # start-up is not slower: "0% of" an earlier end read as a contradiction
                fact = (f"start-up is not slower ({lead}): its {gap * 1e3:.1f} ms longer wall time per run is spent "
                        f"in {where}")
            else:  # a share that rounds to 0% is said as under 1%
                part = f"{share:.0%}" if share >= 0.005 else "under 1%"
                fact = (f"{lead}, {part} of its {gap * 1e3:.1f} ms longer wall time per run: the extra wall time "
                        f"is spent in {where}")
            return [self.cause(fact, share, descriptive=True, details={"startup_share": share})]
        if abs(startup_gap) > 1e-4:
            return [self.cause(lead, 0.3, descriptive=True)]
        return []
