"""Where a cell's ranks run: the study dimensions `nodes` and `ranks_per_node`, and the
[slurm] section whose options every run's job gets.

- `nodes` (default 1): the nodes each run's job asks for. The cell's ranks (the `ranks`
  dimension) are spread over them by the scheduler.
- `ranks_per_node` (default: unset): the ranks on each node. The cell's ranks are then
  nodes x ranks_per_node, and `ranks` is not used where it is set.

A placement is part of the variant as stored (runs.variant_json) and the baseline of a
cell runs at the same placement, so variants are compared like for like. Variant ids show
it only when it is not the default: `+R-per-node` (the nodes follow from the ranks, so a
scaling study over nodes at R ranks per node is one variant drawn over its ranks), else
`+N-nodes`. Studies without these dimensions keep their ids and stored variants.

Only a scheduler that places ranks on nodes (Scheduler.multi_node) runs more than one
node; local runs use this machine, one node.
"""

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator

from ...errors import NearmetalError

DIMS = ("nodes", "ranks_per_node")
MAX_NODES = 100_000
Nodes = Annotated[StrictInt, Field(ge=1, le=MAX_NODES)]


def stored(row):
    """The placement a variant stores for an expanded matrix row: {} for the default."""
    if row.get("ranks_per_node"):
        return {"ranks_per_node": row["ranks_per_node"]}
    if row.get("nodes", 1) != 1:
        return {"nodes": row["nodes"]}
    return {}


def of(variant):
    """{"nodes"/"ranks_per_node": value} a stored variant carries (what its baseline keeps)."""
    return {d: variant[d] for d in DIMS if variant.get(d)}


def ranks(row):
    """A cell's ranks: nodes x ranks_per_node where that is set, else the `ranks` dimension's."""
    if row.get("ranks_per_node"):
        return row.get("nodes", 1) * row["ranks_per_node"]
    return row["ranks"]


def nodes(variant, ranks_):
    """The nodes a stored variant's run at `ranks_` asks for."""
    per_node = variant.get("ranks_per_node")
    return ranks_ // per_node if per_node else variant.get("nodes", 1)


def id_part(variant):
    if variant.get("ranks_per_node"):
        return f"+{variant['ranks_per_node']}-per-node"
    if variant.get("nodes", 1) != 1:
        return f"+{variant['nodes']}-nodes"
    return ""


def words(variant):
    if variant.get("ranks_per_node"):
        return [f"{variant['ranks_per_node']} ranks per node"]
    if variant.get("nodes", 1) != 1:
        return [f"{variant['nodes']} nodes"]
    return []


def dimensions(dims):
    """The matrix's or a benchmark's dimensions with ranks_per_node's "unset" made a value."""
    dims["ranks_per_node"] = dims.get("ranks_per_node") or [None]
    dims["nodes"] = dims.get("nodes") or [1]
    return dims


def uses_nodes(config):
    """Whether the study names a placement anywhere: every run's job then asks for its nodes
    (a 1-node cell too: inside a larger allocation, srun would otherwise spread its ranks)."""
    return bool(set(DIMS) & config.matrix.model_fields_set) or any(
        getattr(b, d) is not None for b in config.benchmark for d in DIMS)


def check(config, all_cells):
    """What placement refuses, with its key path: [slurm] nodes together with the nodes
    dimension, and more than one node where the scheduler runs everything on this machine."""
    from ... import schedulers

    named = [f"benchmark[{i}].nodes" for i, b in enumerate(config.benchmark) if b.nodes]
    if "nodes" in config.matrix.model_fields_set:
        named.insert(0, "matrix.nodes")
    if config.slurm.nodes is not None and named:
        raise NearmetalError(f"slurm.nodes: give the nodes once: as [slurm] nodes (every run's job) or as the nodes "
                             f"dimension ({named[0]}), not both")
    most = max((nodes(c.variant, c.ranks) for c in all_cells), default=1)
    if most > 1 and not schedulers.get(config.study.scheduler).multi_node:
        raise NearmetalError(f"study.scheduler: cells ask for {most} nodes, but scheduler "
                             f"\"{config.study.scheduler}\" runs every job on this machine (one node): use a scheduler "
                             f"that places ranks on nodes (\"slurm\"), or nodes = [1]")


def ranks_check(cell):
    """The words saying where a cell's ranks come from, for a kernel that cannot use them."""
    per_node = cell.variant.get("ranks_per_node")
    if per_node:
        return f" ({_count(cell.ranks // per_node, 'node')} x ranks_per_node {per_node})"
    return ""


class SlurmSection(BaseModel):
    """Used with scheduler = "slurm": srun inside an allocation, else one sbatch job per run."""

    model_config = ConfigDict(extra="forbid")
    partition: str | None = None
    nodes: StrictInt | None = Field(None, ge=1, le=MAX_NODES)
    time: str | None = None
    account: str | None = None
    export: str | None = None

    @field_validator("partition", "time", "account", "export")
    @classmethod
    def _batch_script_safe(cls, v, info):
        """Checked as on the command line: the values go into #SBATCH lines (slurm/options.py)."""
        from ...slurm.options import CHECKS

        if v is None:
            return v
        try:
            return CHECKS[info.field_name](v, what=None)
        except NearmetalError as e:
            raise ValueError(str(e)) from None


def _count(n, word):
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
