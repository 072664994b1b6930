"""What an explainer is and what it returns.

An explainer compares two Evidence records (explain/evidence.py): the slow variant's and its
baseline's, and returns the Causes it finds present (none: its cause is absent or it lacks the
evidence to tell; `missing` says which). A Cause carries:
- fact: the differing fact, in evidence words ("the ranks talked over tcp; natively over vader");
- strength: 0..1, how strongly the evidence points at it (1: the mechanism is known to cost this
  much; lower for facts that only sometimes matter); candidates are tried in this order;
- ablation: a variant dict that changes exactly that factor of the slow variant (None: nothing
  nearmetal can change; the fix is then advice, in `fix`);
- factor: a short name of the factor for the ablation's variant name ("ld-audit");
- fix: what to do, in words.
An explainer that only says where the time went (start-up, MPI profile, I/O layer) returns
Causes with `descriptive = True`: never ablated, shown beside the tested causes.
"""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Cause:
    explainer: str
    fact: str
    strength: float
    factor: str = ""
    ablation: dict | None = None
    fix: str = ""
    descriptive: bool = False
    details: dict = field(default_factory=dict)

    def as_dict(self):
        return {"explainer": self.explainer, "fact": self.fact, "strength": round(float(self.strength), 3),
                "factor": self.factor, "ablation": self.ablation, "fix": self.fix, "descriptive": self.descriptive,
                "details": self.details}


class Explainer:
    name = ""            # the registry sets it: the module's name
    title = ""           # what the cause is, in a few words (docs and the report)
    needs_process = False  # examining starts a process (objdump): only `nearmetal explain` runs it

    def examine(self, slow, base):
        """[Cause] present in `slow` (Evidence) against `base` (Evidence); [] when absent."""
        raise NotImplementedError

    def cause(self, fact, strength, **kw):
        return Cause(self.name, fact, strength, **kw)


def without_env(variant, *keys):
    """The variant with these environment keys removed (a copy; `env` dropped when empty)."""
    out = {k: v for k, v in variant.items() if k != "env"}
    env = {k: v for k, v in (variant.get("env") or {}).items() if k not in keys}
    if env:
        out["env"] = env
    return out


def with_env(variant, **values):
    out = dict(variant)
    out["env"] = {**(variant.get("env") or {}), **values}
    return out


def without_args(variant, drop):
    """The variant without the runtime arguments `drop(arg, next_arg)` says to drop; the
    predicate returns 0 (keep), 1 (drop it) or 2 (drop it and its value)."""
    args = list(variant.get("runtime_args") or [])
    kept, i = [], 0
    while i < len(args):
        n = drop(args[i], args[i + 1] if i + 1 < len(args) else None)
        if n:
            i += n
            continue
        kept.append(args[i])
        i += 1
    out = {k: v for k, v in variant.items() if k != "runtime_args"}
    if kept:
        out["runtime_args"] = kept
    return out


def replaced(variant, **values):
    """The variant with these dimensions set (a value None or False or "" removes the key:
    the dimension's default)."""
    out = dict(variant)
    for k, v in values.items():
        if v in (None, False, ""):
            out.pop(k, None)
        else:
            out[k] = v
    return out
