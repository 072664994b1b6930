"""The evidence of one variant of a finished study, gathered from the store for the explainers:
its variant dict, the context of its runs (the witness's transport and MPI library, the
runtime and its options, the image), the ranks' launch environment (the run's stored
environment and the launcher's -x/-genv/-env pairs), the per-rank evidence of its runs where
recorded (nearmetal.evidence, read lazily: a store without it has none), its runs' wall
times, and its start-up points (the start-up kernel's time to main and to after MPI_Init)."""

import json
import statistics
from dataclasses import dataclass, field

STARTUP_METRICS = ("to_after_init", "wall_to_main", "cpu_to_main")


@dataclass
class Evidence:
    variant_id: str
    variant: dict
    context: dict = field(default_factory=dict)
    env: dict = field(default_factory=dict)        # what the ranks were given (launch environment)
    ranks: list = field(default_factory=list)      # per run: [per-rank dict] (nearmetal.evidence)
    wall_s: list = field(default_factory=list)     # measured runs' wall times
    startup: dict = field(default_factory=dict)    # metric -> median seconds (start-up kernel)
    busy_share: float | None = None                # share of its runs on a busy machine
    simd: dict | None = None                       # {level, counts, cpu, wider_image} (explain/simd.py)
    io_layers: dict | None = None                  # {I/O layer: seconds per traced process} (explain/traces.py)

    @property
    def has_ranks(self):
        return any(self.ranks)

    def every_rank(self):
        return [r for run in self.ranks for r in run if isinstance(r, dict)]


def launch_env(env_json, argv):
    """The ranks' environment as launched: the stored environment delta and the launcher's
    per-rank pairs (mpirun -x K=V, hydra -genv K V / -env K V)."""
    env = dict(env_json or {})
    args = list(argv or [])
    for i, a in enumerate(args):
        if a == "-x" and i + 1 < len(args) and "=" in args[i + 1]:
            k, v = args[i + 1].split("=", 1)
            env[k] = v
        elif a in ("-genv", "-env") and i + 2 < len(args):
            env[args[i + 1]] = args[i + 2]
    return env


def per_rank(store, study_id):
    """{run_id: [per-rank dict]} from nearmetal.evidence where it exists, else {}."""
    import sqlite3

    from ..errors import NearmetalError

    try:
        from ..evidence.read import evidence_of
    except ImportError:  # a nearmetal without per-rank evidence
        return {}
    try:
        return evidence_of(store, study_id) or {}
    except (NearmetalError, sqlite3.Error):  # a store written before the evidence table: none
        return {}


def gather(store, study_id, analysis=None):
    """{variant id: Evidence} of every variant of the study."""
    runs = store.runs(study_id)
    contexts = {}
    for row in store._all("SELECT id, context_json FROM contexts"):
        try:
            contexts[row[0]] = json.loads(row[1])
        except ValueError:
            pass
    ranks_of = per_rank(store, study_id)
    busy = {r["run_id"]: bool(r["busy"]) for r in store.run_load(study_id)}
    out = {}
    for r in runs:
        vid = r["variant"]
        ev = out.get(vid)
        if ev is None:
            ev = out[vid] = Evidence(vid, json.loads(r["variant_json"]))
        if r["status"] != "ok":
            continue
        if not ev.context and r["context_id"] in contexts:
            ev.context = contexts[r["context_id"]]
            ev.env = launch_env(json.loads(r["env_json"] or "{}"), json.loads(r["argv_json"] or "[]"))
            ev.env.update(ev.variant.get("env") or {})  # a container launch passes it its own way (cell_env.py)
        if r["warmup"]:
            continue
        if r["wall_s"] is not None:
            ev.wall_s.append(r["wall_s"])
        if r["id"] in ranks_of:
            ev.ranks.append(ranks_of[r["id"]])
    for vid, ev in out.items():
        flags = [busy[r["id"]] for r in runs if r["variant"] == vid and r["id"] in busy]
        ev.busy_share = sum(flags) / len(flags) if flags else None
    if (analysis or {}).get("traces"):
        from .traces import by_variant

        for vid, layers in by_variant(analysis["traces"]).items():
            if vid in out:
                out[vid].io_layers = layers
    for p in (analysis or {}).get("points") or []:
        if p.get("metric") in STARTUP_METRICS and p.get("variant") in out and p.get("values"):
            ev = out[p["variant"]]
            scale = {"ms": 1e-3, "us": 1e-6, "s": 1.0}.get(p.get("unit"), None)
            if scale is not None:
                ev.startup.setdefault(p["metric"], statistics.median(p["values"]) * scale)
    return out
