"""nm-startup: after '#' header lines, rows
`RANK SOURCE wall_to_main_s cpu_to_main_s idle_s mpi_init_s to_after_init_s proc_wall_s`,
RANK a rank number, "max" or "mean"; SOURCE launch_env, proc_stat (or mixed in the summary
rows). Records, unit "s", params rank=N|"max"|"mean" and source:
wall_to_main, cpu_to_main, idle, mpi_init, to_after_init (from the row's source), and
proc_wall_to_main (the /proc/self/stat wall, source=proc_stat, for comparison)."""

from . import record

from .. import KernelSpec, register

register(KernelSpec("startup", "nm-startup", "startup", "process start to main: wall vs CPU time",
                    primary="to_after_init", words="start-up", communicates=True, per_launch=True))


METRICS = ("wall_to_main", "cpu_to_main", "idle", "mpi_init", "to_after_init")


def parse(text, kernel, params):
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 8 or line.lstrip().startswith("#"):
            continue
        rank, source = parts[0], parts[1]
        if not (rank.isdigit() or rank in ("max", "mean")) or source not in ("launch_env", "proc_stat", "mixed"):
            continue
        try:
            values = [float(v) for v in parts[2:]]
        except ValueError:
            continue
        rank = int(rank) if rank.isdigit() else rank
        for metric, value in zip(METRICS, values):
            out.append(record(kernel, params, metric, value, "s", rank=rank, source=source))
        out.append(record(kernel, params, "proc_wall_to_main", values[5], "s", rank=rank, source="proc_stat"))
    return out
