"""A heterogeneous (MPMD) benchmark: several components, each with its own arguments and
ranks, sharing one MPI_COMM_WORLD under one launcher (`mpirun A : B`, hydra's blocks, a Slurm
heterogeneous step `srun A : B`), as a coupled climate model runs its atmosphere and ocean
(seed 000's ESM4).

    [[benchmark]]
    name = "coupled-mpmd"
    kernel = "coupled"
    components = [{ranks = 1, args = ["--role", "atm"]}, {ranks = 1, args = ["--role", "ocn"]}]

Each component runs the benchmark's program (its kernel, or `command`'s program) with its own
`args` (default: the benchmark's `args`, or `command`'s arguments). The cell's ranks are the
components' together (so `ranks`, `ranks_per_node` and `nodes` are not given with components,
and the matrix's do not apply: Slurm gives each component of a heterogeneous job nodes of its
own); the variant — mode, runtime, image, MPI, environment, network, account — is every
component's.
"""

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .fields import MAX_RANKS, ExecString, Ranks

MAX_COMPONENTS = 64


class Component(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    ranks: Ranks
    args: list[ExecString] | None = None


class MpmdFields(BaseModel):
    """The key of a heterogeneous benchmark (mixed into config.Benchmark)."""

    components: list[Component] | None = Field(default=None, max_length=MAX_COMPONENTS)

    @model_validator(mode="after")
    def _components(self):
        if self.components is None:
            return self
        if len(self.components) < 2:
            raise ValueError("components: an MPMD job has at least 2 components (one component: give ranks and args)")
        given = [k for k in ("ranks", "ranks_per_node") if getattr(self, k, None) is not None]
        if given:
            raise ValueError(f"components: the cell's ranks are the components' together: remove {', '.join(given)}")
        if getattr(self, "nodes", None) not in (None, [1]):
            raise ValueError("components: Slurm gives each component of a heterogeneous job nodes of its own, so "
                             "the job's nodes are not a dimension here: remove nodes (or give nodes = [1])")
        if self.total_ranks() > MAX_RANKS:
            raise ValueError(f"components: {self.total_ranks()} ranks together; at most {MAX_RANKS}")
        return self

    def total_ranks(self):
        """The ranks of the whole job: the components' together (None: not MPMD)."""
        return sum(c.ranks for c in self.components) if self.components else None


def parts(bench, args):
    """[(args, ranks)] of a heterogeneous benchmark's components, each component's arguments
    defaulting to `args` (the benchmark's own); [] for a plain benchmark."""
    return [(list(args) if c.args is None else list(c.args), c.ranks) for c in bench.components or ()]


def more_requests(req, rest):
    """The RunRequests of components 2.. beside `req` (component 1, already filled in): the
    same program, variant and launch settings, their own arguments and ranks (run.plan gives
    them the first one's working directory, network and account)."""
    from ...run import RunRequest

    return [RunRequest(req.program, args, mode=req.mode, runtime=req.runtime, image=req.image, mpi=req.mpi,
                       ranks=ranks, threads=req.threads, env=req.env, scheduler=req.scheduler, options=req.options,
                       runtime_args=req.runtime_args)
            for args, ranks in rest]
