"""The records that cross the study pipeline's stages (docs/architecture.md, "The study
pipeline"): frozen, so a stage hands on what it decided and the next cannot change it.

  config --Config--> plan --Cell, RunSpec, AnalysisSpec--> store --RunSpec--> execute
  execute --RunResult--> store --rows--> analysis

How they are written to and read from the store is study/store/codec.py's business alone.
"""

from dataclasses import dataclass, field

from .config.ids import key_part, variant_id

# A stored run's status (runs.status): planned until it has run, then one of the others.
# hung: ended by the hang limit its cell's earlier runs set (study/execute/hang.py), then run once
# more; skipped: never run, because its benchmark's first run showed that no run of it
# could give results (its figures of merit or success line did not match). Only ok runs
# are analysed; the reports count the others and say why.
PLANNED, OK, FAILED, TIMEOUT, HUNG, SKIPPED = "planned", "ok", "failed", "timeout", "hung", "skipped"
NOT_RESULTS = (FAILED, TIMEOUT, HUNG, SKIPPED)

# What a stored measurement may be: 0, or a magnitude from 1e-100 to 1e100. The analysis
# divides values, squares spreads and takes ratios of ratios; within this range all of
# that stays inside a double's (1e308), and no real figure of merit is outside it.
VALUE_MIN, VALUE_MAX = 1e-100, 1e100
STDERR_TAIL = 2000  # the characters of a failed run's standard error the store keeps (runs.stderr_tail)


def comparable(v):
    """Whether a ratio can be taken of `v`: above 0, within the stored range."""
    return VALUE_MIN <= v <= VALUE_MAX


def out_of_range(v):
    """Why `v` cannot be stored and compared, or None."""
    if v != 0 and not comparable(abs(v)):
        return f"{v:g} is outside the range nearmetal compares (0, or {VALUE_MIN:g} to {VALUE_MAX:g} in magnitude)"
    return None


@dataclass(frozen=True, eq=False)
class Cell:
    """One benchmark under one variant at one placement: what a block runs once. `variant`
    is the stored variant dict (its placement dimensions included); never changed once
    made. key: benchmark|n=RANKS|t=THREADS|VARIANT-ID, each part percent-encoded (ids.key_part)."""

    benchmark: object  # the study's config.Benchmark
    variant: dict
    ranks: int
    threads: int
    key: str = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "key", f"{key_part(self.benchmark.label)}|n={self.ranks}|t={self.threads}|"
                                        f"{key_part(variant_id(self.variant))}")

    @property
    def variant_id(self):
        return variant_id(self.variant)


@dataclass(frozen=True, eq=False)
class RunSpec:
    """One planned run of a cell: its place in the run order, its block (-1: a warm-up) and
    repetition. key: the cell's key and `#warmupN` or `#repN`, unique in the study.
    run_id: the store's row id, once read back from the store (None while planning)."""

    cell: Cell
    block: int
    position: int
    repetition: int
    warmup: bool
    key: str = ""
    run_id: int | None = None

    def __post_init__(self):
        if not self.key:
            tag = f"warmup{self.repetition}" if self.warmup else f"rep{self.block}"
            object.__setattr__(self, "key", f"{self.cell.key}#{tag}")


@dataclass(frozen=True)
class Launched:
    """What the scheduler said of one launch: its status (schedulers.STATUSES less
    'not started', which is raised), exit status, output, the seconds it took, and how busy
    the machine was around it (contention.figures; None when not measured)."""

    status: str
    exit_status: int | None
    stdout: str
    stderr: str
    wall_s: float
    load: dict | None = None
    hung: str | None = None   # ended by the hang limit: why, and the state of its processes then


def stored_status(launched, measured):
    """The store's status of a launched run, decided here once: a run ended by its hang
    limit hung; a time-out is a time-out; a run is ok when its job ended by itself with exit
    status 0 and gave results (`measured`); anything else (a non-zero exit, a cancelled
    batch job, no results) failed."""
    if launched.hung is not None:
        return HUNG
    if launched.status == "timeout":
        return TIMEOUT
    return OK if launched.status == "ok" and launched.exit_status == 0 and measured else FAILED


@dataclass(frozen=True)
class RunResult:
    """A finished run as the store keeps it: status (OK, FAILED, TIMEOUT, HUNG, SKIPPED), exit status, the
    launch's argv and environment delta, its context's row id, when it started, its wall
    seconds, the tail of its stderr (failed runs), its records ({metric, unit, value,
    point}) and the machine's load (run_load's columns) or None."""

    status: str
    exit_status: int | None
    argv: list
    env: dict
    context_id: int | None
    started: str
    wall_s: float
    stderr_tail: str | None
    records: list
    load: dict | None = None

    @classmethod
    def not_started(cls, started, why):
        return cls(FAILED, None, [], {}, None, started, 0.0, f"not started: {why}", [])

    @classmethod
    def skipped(cls, started, why):
        return cls(SKIPPED, None, [], {}, None, started, 0.0, why, [])


@dataclass(frozen=True)
class AnalysisSpec:
    """What the analysis needs of the study file, decided when the study is planned and
    stored with it (codec.analysis_spec_json), so the analysis never parses the file again:
    each variant's baseline (variant id -> baseline id), the sequential looks and their
    level, whether disturbed runs are left out, the description, the [[finding]] entries
    (as dicts), the container runtime of each matrix variant (a finding's side whose
    runtime is missing here says so) and which metrics are answered (`metrics`)."""

    baselines: dict
    looks: list | None
    alpha_per_look: float
    adaptive: bool = False
    exclude_disturbed: bool = False
    description: str = ""
    findings: list = field(default_factory=list)
    runtimes: dict = field(default_factory=dict)
    # per benchmark label: its primary metric, the metrics asked for, the declared reciprocals
    # (inverse_of) and the figures of merit in order (analysis/quantities.plan_of)
    metrics: dict = field(default_factory=dict)
