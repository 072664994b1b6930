"""`audit`: the ranks under an rtld-audit library (nm-audit.c), as seed 002's Titan jobs
ran under Singularity's LD_AUDIT interception (3x slower). `run --audit` and a study
variant's `audit = true` put it in the ranks' LD_AUDIT, so what interception costs start-up
and a program is measured, not guessed; doctor's LD_AUDIT hazard points here.

Built like the witness: with the host's cc, only old glibc symbols, placed read-only under
/tmp, which every runtime shows at the same path (natively and in a container the ranks
audit with the same file).
"""

import os

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nm-audit.c")
PREFIX = "nm-audit: "


def library():
    """The path, under /tmp, of a built nm-audit.so no older than its source."""
    from ..supervise import preloaded_library

    return preloaded_library("nm-audit", SOURCE)


def rank_env(env=None):
    """The ranks' environment with the auditor in LD_AUDIT (after any auditor of theirs)."""
    env = dict(env or {})
    env["LD_AUDIT"] = ":".join(p for p in (env.get("LD_AUDIT", ""), library()) if p)
    return env


def parse(stderr):
    """[{pid, objects, bindings}] from the ranks' NM_AUDIT_REPORT lines."""
    out = []
    for line in (stderr or "").splitlines():
        if line.startswith(PREFIX):
            fields = dict(part.partition("=")[::2] for part in line[len(PREFIX):].split())
            if {"pid", "objects", "bindings"} <= fields.keys() and all(v.isdigit() for v in fields.values()):
                out.append({k: int(v) for k, v in fields.items()})
    return out
