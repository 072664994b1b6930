"""Binding ranks to cores: which binding a launch gets, and why when it is not the one asked for.

A study binds each rank to a core of its own by default (`[study] binding = "core"`): a rank
that the kernel moves between cores, or that shares a core with its peer for a while, makes
a launch run in a slow state, and launches then fall into modes (analysis/modes.py).
`binding = "none"` leaves the ranks where the kernel puts them. `nearmetal run` asks for
nothing (None): the launcher's own default, as before.

Binding to cores needs a core per rank. Where there are more ranks (x threads) than cores,
ranks with several threads each, or ranks on emulated nodes that share this machine's cores,
the ranks are left unbound and the reason recorded: Open MPI refuses to bind oversubscribed
ranks (unless told `--bind-to core:overload-allowed`, which would stack two ranks on a core:
worse than no binding), and MPICH's hydra would wrap round and stack them silently. Under
Slurm the binding is the site's (its task plugin and defaults): nearmetal adds nothing.

The decision is a plain dict, recorded with the runs (the context's `binding`):
{"asked": "core"|"none", "used": "core"|"none"|"scheduler", "reason": str|None}.
"""

CHOICES = ("core", "none")


def decide(asked, launcher, total_ranks, threads, cores, hosts=False):
    """The binding a launch gets: asked ("core", "none" or None: nothing asked, the launcher's
    default), the launcher's name, the job's ranks, the most threads of a rank, this machine's
    cores, whether ranks run on named (emulated) hosts. None when nothing was asked."""
    if asked is None:
        return None
    from . import LAUNCHERS

    if not LAUNCHERS.get(launcher).binds_ranks:
        return {"asked": asked, "used": "scheduler",
                "reason": f"the {launcher} launcher places and binds ranks as the site configured it"}
    if asked == "none":
        return {"asked": asked, "used": "none", "reason": None}
    why = None
    if hosts:
        why = "ranks on emulated nodes share this machine's cores; each node would bind its rank to the same core"
    elif threads > 1:
        why = (f"each rank has {threads} threads: bound to one core they would share it; ranks left unbound "
               f"(binding = \"none\" says so without this note)")
    elif total_ranks > cores:
        why = (f"{total_ranks} ranks on {cores} cores: a core each is not possible, and two bound to one core "
               f"would be slower than none; ranks left unbound")
    return {"asked": asked, "used": "none" if why else "core", "reason": why}


def describe(binding):
    """One line for a recorded binding (the report's environment table, notes); '' for None."""
    if not isinstance(binding, dict):
        return ""
    used = binding.get("used")
    text = {"core": "each rank on its own core", "none": "unbound (the kernel places the ranks)",
            "scheduler": "left to the scheduler"}.get(used, str(used))
    if binding.get("asked") and binding.get("asked") != used and binding.get("reason"):
        text += f" (asked: {binding['asked']}; {binding['reason']})"
    elif binding.get("reason"):
        text += f" ({binding['reason']})"
    return text
