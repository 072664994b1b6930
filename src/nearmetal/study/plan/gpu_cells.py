"""A study's `gpus` cells on a machine without a GPU: left out of the plan, said in one line.

A benchmark that asks for GPUs in any of its cells is a GPU benchmark: its cells without
`gpus` are there to be compared with those that have them (the set-up cost of a container
with and without its GPU switch), so on a machine without an NVIDIA GPU all of its cells are
left out, and nothing of it is planned. A study of GPU benchmarks only then plans nothing:
runner.open_study refuses it in that one line. GPUs named that a machine with GPUs lacks (a
count above what it has, an index it lacks) are refused before any run, in the study's
preflight (execute/preflight.py), with gpu/select.py's one-line reason.

Only where the runs start on this machine (scheduler = "local"): a batch system's nodes may
have the GPUs its login node lacks.
"""

from ..config.ids import is_set


def machine_gpus():
    """This machine's GPUs (discovery.gpu records); a seam the unit tests replace with a
    discovery of a fake driver tree."""
    from ...discovery.gpu import discover

    return discover()["gpus"]


def asks(cell):
    return is_set(cell.variant.get("gpus"))


def gpu_benchmarks(cells):
    """The benchmarks (by identity) that ask for GPUs in any of their cells."""
    return {id(c.benchmark) for c in cells if asks(c)}


def left_out(config, cells):
    """The cells a GPU-less machine cannot run: every cell of a GPU benchmark when this
    machine has no GPU and the study's runs start here; [] otherwise. Discovery is asked only
    for a study that names GPUs."""
    wanted = gpu_benchmarks(cells)
    if not wanted or not _runs_here(config) or machine_gpus():
        return []
    return [c for c in cells if id(c.benchmark) in wanted]


def _runs_here(config):
    from ... import schedulers

    return schedulers.get(config.study.scheduler).job_is_child


def note(config, n):
    """The one line that says why n cells are left out."""
    return (f"this machine has no NVIDIA GPU (no driver in /proc/driver/nvidia, no NVML, no nvidia-smi): the "
            f"{n} cells of GPU benchmarks are left out of study '{config.study.name}'")
