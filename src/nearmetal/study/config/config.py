"""Study files: TOML, validated before anything runs.

A study names its variants (mode x runtime x MPI x image), the benchmarks with their
arguments, the placement matrix (ranks x threads), repetitions, warm-up runs, timeout, the
run order, the baseline and the findings it checks (finding_spec.py). Matrices are full
cross products, with zipped dimensions (as Ramble's `zips`) and exclusions.

Errors name the file, the key path, what was expected and what was found, one line each.
Integers are strict (`repetitions = true` is not 1), numbers finite and bounded, strings free
of NUL bytes, arguments and environment values small enough for exec(2). Parsing creates
nothing: working directories are made absolute (check_paths() checks them before a run).
"""

import os
from typing import Annotated, Any, Literal

from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr,
                      ValidationError, field_validator, model_validator)

from ...choices import modes as _modes
from ...choices import mpis as _mpis
from ...choices import runtimes as _runtimes
from ...errors import NearmetalError
from ...models import in_container
from ...launchers._binding import CHOICES as BINDING_CHOICES
from ...networks import DEFAULT as DEFAULT_NETWORK
from .fields import (MAX_EXEC_TOTAL, MAX_RANKS, MAX_TIMEOUT, STUDY_NAME, EnvMap, ExecString, ImageName, Mode, Mpi,  # noqa: F401
                     Account, Gpus, Network, Ranks, Runtime, Scheduler, Threads, _choices, _nonblank)
from .finding_spec import Finding
from .placement import Nodes, SlurmSection
from .mpmd import MpmdFields
from .program import ProgramFields, all_foms, check_inputs
from .traced import TraceFields
from .inputs import (check_workdir, expand_dir, make_workdir, one_line, parse_toml, probe_path, read_text,  # noqa: F401
                     validation_error)

DIMENSIONS = ("mode", "runtime", "mpi", "image", "image_format", "image_place", "cold", "audit", "network", "user", "gpus",
              "ranks", "threads", "nodes", "ranks_per_node")


def _image_format(v):
    """One of the formats a study can place (image/formats), or "default": the format the
    image's name or path gives. Any other value, a string or not, gets the one message."""
    from ...image.formats import on_host

    have = ("default", *on_host())
    if not isinstance(v, str) or v not in have:
        raise ValueError("Input should be " + ", ".join(f"'{n}'" for n in have[:-1]) + f" or '{have[-1]}'")
    return v


ImageFormat = Annotated[Any, AfterValidator(_image_format)]
# the directory a copy of the image is placed in for the runs ("": used where it is)
ImagePlace = Annotated[StrictStr, Field(max_length=4096), AfterValidator(lambda v: expand_dir(v) if v else v)]


def _check_zip_names(zips):
    """Zip groups name known dimensions, each in one group only."""
    for zi, group in enumerate(zips):
        if not group:
            raise ValueError(f"zips[{zi}]: an empty group (list the dimensions that vary together)")
        for dim in group:
            if dim not in DIMENSIONS:
                raise ValueError(f"zips[{zi}]: unknown dimension {dim!r:.60} (dimensions: {', '.join(DIMENSIONS)})")
    seen = [d for g in zips for d in g]
    if len(seen) != len(set(seen)):
        raise ValueError("a dimension may appear in only one zip")


_BOTH_RANKS = "give ranks or ranks_per_node, not both: with ranks_per_node, a cell's ranks are nodes x ranks_per_node"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StudySection(_Strict):
    name: StrictStr = Field(pattern=STUDY_NAME)
    description: StrictStr = Field("", max_length=65536)
    # repetitions fixes the number of randomized blocks; without it the study is adaptive:
    # min_repetitions blocks, then more blocks only for cells whose verdict is still open,
    # up to max_repetitions blocks or max_time seconds of measured runs (study/plan/sequential.py).
    repetitions: StrictInt | None = Field(None, ge=1, le=10000)
    min_repetitions: StrictInt = Field(5, ge=2, le=10000)
    max_repetitions: StrictInt = Field(120, ge=2, le=10000)
    max_time: StrictFloat = Field(3600, gt=0, le=MAX_TIMEOUT, allow_inf_nan=False)
    warmup: StrictInt = Field(1, ge=0, le=100)
    timeout: StrictFloat = Field(600, gt=0, le=MAX_TIMEOUT, allow_inf_nan=False)
    seed: StrictInt | None = Field(None, ge=-(1 << 63), lt=1 << 63)   # stored as an SQLite integer
    order: Literal["blocks", "sequential"] = "blocks"
    margin: StrictFloat = Field(0.03, gt=0, lt=1, allow_inf_nan=False)
    pin: StrictBool = False
    # each rank on a core of its own ("core"), or where the kernel puts it ("none"): launchers/_binding.py
    binding: Literal[BINDING_CHOICES] = "core"
    scheduler: Scheduler = "local"
    workdir: StrictStr | None = None
    # contention (study/execute/contention.py): wait before each run, at most quiet_wait seconds, for
    # a quiet machine; leave runs on a busy machine (disturbed) out of the statistics
    quiet: StrictBool = False
    witness: StrictBool = False  # each run's ranks say which MPI library they ran (stored in the context)
    evidence: StrictBool = True  # each run's ranks record what they saw (nearmetal.evidence, run_evidence)
    quiet_wait: StrictFloat = Field(60, ge=0, le=3600, allow_inf_nan=False)
    exclude_disturbed: StrictBool = False
    # a cell whose container runtime is not installed here: a refused study ("fail"), or left
    # out of the plan with a note ("skip": studies meant to run on any machine, the quickstart)
    missing_runtimes: Literal["fail", "skip"] = "fail"
    # a run past 10x its cell's median run time (at least hang_floor_s) is ended as hung and
    # run once more (study/execute/hang.py); keep_going: a benchmark whose first run's figures of
    # merit do not match, or a cell one of whose runs was no MPI job, still runs the rest
    # (study/execute/stops.py)
    hang_floor_s: StrictFloat = Field(30, gt=0, le=MAX_TIMEOUT, allow_inf_nan=False)
    keep_going: StrictBool = False
    # after the runs, test the causes of every slower answer by ablation runs (explain/stage.py),
    # for at most explain_budget seconds
    explain: StrictBool = False
    explain_budget: StrictFloat = Field(600, gt=0, le=MAX_TIMEOUT, allow_inf_nan=False)

    @field_validator("workdir")
    @classmethod
    def _workdir(cls, v):
        return expand_dir(v)

    @model_validator(mode="after")
    def _repetitions(self):
        adaptive_keys = self.model_fields_set & {"min_repetitions", "max_repetitions", "max_time"}
        if self.repetitions is not None and adaptive_keys:
            raise ValueError(f"repetitions fixes the number of blocks; {', '.join(sorted(adaptive_keys))} "
                             f"apply only without it (adaptive repetitions)")
        if self.min_repetitions > self.max_repetitions:
            raise ValueError(f"min_repetitions ({self.min_repetitions}) is more than max_repetitions "
                             f"({self.max_repetitions})")
        return self

    @property
    def adaptive(self):
        return self.repetitions is None

    @property
    def first_blocks(self):
        """The blocks planned before anything runs: all of them, or the adaptive minimum."""
        return self.min_repetitions if self.adaptive else self.repetitions

    @property
    def most_blocks(self):
        return self.max_repetitions if self.adaptive else self.repetitions


class Matrix(_Strict):
    mode: list[Mode] = Field(default_factory=lambda: list(_modes()))
    runtime: list[Runtime] = Field(default_factory=lambda: _runtimes()[:1])
    mpi: list[Mpi] = Field(default_factory=lambda: list(_mpis()))
    image: list[ImageName] = ["default"]
    image_format: list[ImageFormat] = ["default"]
    image_place: list[ImagePlace] = [""]
    cold: list[StrictBool] = [False]    # the page cache dropped before each run (root)
    audit: list[StrictBool] = [False]   # ranks under the rtld-audit library (audit/), as seed 002's LD_AUDIT
    network: list[Network] = [DEFAULT_NETWORK]   # isolated: a rank per emulated node (networks/), as seed 001's overlay
    user: list[Account] = [""]          # an account the ranks run as ("": the caller; privilege.py)
    gpus: list[Gpus] = [""]             # --gpus for the ranks ("": none; gpu/select.py, docs/gpu.md)
    ranks: list[Ranks] = [2]
    threads: list[Threads] = [1]
    nodes: list[Nodes] = [1]            # each run's job on this many nodes (study/config/placement.py)
    ranks_per_node: list[Ranks] | None = None   # set: a cell's ranks are nodes x ranks_per_node
    zips: list[list[StrictStr]] = []
    exclude: list[dict[str, StrictBool | StrictStr | StrictInt]] = []

    @field_validator("ranks", "threads", "nodes", "ranks_per_node")
    @classmethod
    def _positive(cls, v):
        if v is not None and not v:
            raise ValueError("expected a non-empty list of positive integers")
        return v

    @field_validator("mode", "runtime", "mpi", "image", "image_format", "image_place", "cold", "audit", "network",
                     "user", "gpus")
    @classmethod
    def _nonempty(cls, v):
        if not v:
            raise ValueError("expected a non-empty list")
        return v

    @model_validator(mode="after")
    def _zips_and_excludes(self):
        if self.ranks_per_node is not None and "ranks" in self.model_fields_set:
            raise ValueError(_BOTH_RANKS)
        _check_zip_names(self.zips)
        for zi, group in enumerate(self.zips):
            lengths = {dim: len(getattr(self, dim)) for dim in group}
            if len(set(lengths.values())) > 1:
                raise ValueError(f"zips[{zi}]: zipped dimensions must have equal lengths, found {lengths}")
        for ei, ex in enumerate(self.exclude):
            for dim in ex:
                if dim not in DIMENSIONS:
                    raise ValueError(f"exclude[{ei}]: unknown dimension {dim!r:.60} (dimensions: {', '.join(DIMENSIONS)})")
            if isinstance(ex.get("image_place"), str) and ex["image_place"]:  # as the matrix's values are
                ex["image_place"] = expand_dir(ex["image_place"])
            if "gpus" in ex:  # in the matrix's one spelling (2 and "2" are one value)
                from .fields import _gpus

                ex["gpus"] = _gpus(ex["gpus"])
        return self


class Benchmark(_Strict, ProgramFields, TraceFields, MpmdFields):
    """One kernel with its arguments, or any program (command = [...], study/config/program.py);
    any matrix dimension may be overridden per benchmark."""

    kernel: StrictStr | None = None
    name: Annotated[StrictStr, Field(max_length=256), AfterValidator(_nonblank)] | None = None
    args: list[ExecString] = []
    metrics: list[StrictStr] = []
    # the metric the first screen answers for this benchmark (analysis/quantities.py)
    primary: StrictStr | None = Field(default=None, min_length=1, max_length=64)
    where: dict[str, StrictStr | StrictInt | StrictFloat] = {}
    mode: list[Mode] | None = None
    runtime: list[Runtime] | None = None
    mpi: list[Mpi] | None = None
    image: list[ImageName] | None = None
    image_format: list[ImageFormat] | None = None
    image_place: list[ImagePlace] | None = None
    cold: list[StrictBool] | None = None
    audit: list[StrictBool] | None = None
    network: list[Network] | None = None
    user: list[Account] | None = None
    gpus: list[Gpus] | None = None
    ranks: list[Ranks] | None = None
    threads: list[Threads] | None = None
    nodes: list[Nodes] | None = None
    ranks_per_node: list[Ranks] | None = None
    zips: list[list[StrictStr]] | None = None
    env: EnvMap = {}
    workdir: StrictStr | None = None

    @field_validator("workdir")
    @classmethod
    def _workdir(cls, v):
        return expand_dir(v)

    @field_validator("kernel")
    @classmethod
    def _known_kernel(cls, v):
        from ...kernels import REGISTRY, unknown

        if v is not None and v not in REGISTRY:
            raise ValueError(unknown(v))
        return v

    @field_validator("mode", "runtime", "mpi", "image", "image_format", "image_place", "cold", "audit", "network",
                     "user", "gpus", "ranks", "threads", "nodes", "ranks_per_node")
    @classmethod
    def _override_nonempty(cls, v):
        if v is not None and not v:
            raise ValueError("expected a non-empty list (leave the key out to use [matrix]'s)")
        return v

    @model_validator(mode="after")
    def _zips_and_exec_size(self):
        if self.ranks is not None and self.ranks_per_node is not None:
            raise ValueError(_BOTH_RANKS)
        _check_zip_names(self.zips or [])
        if self.primary is not None and self.metrics and self.primary not in self.metrics:
            raise ValueError(f"primary = {self.primary!r:.60} is not one of metrics = {self.metrics!r:.200}")
        if self.command is not None:
            _check_fom_names(self)
        total = sum(len(a.encode()) + 1 for a in self.args + (self.command or []))
        total += sum(len(k.encode()) + len(v.encode()) + 2 for k, v in self.env.items())
        if total > MAX_EXEC_TOTAL:
            raise ValueError(f"args and env are {total} bytes together; at most {MAX_EXEC_TOTAL} (exec(2) limits them)")
        return self

    @property
    def label(self):
        return self.name or self.kernel or os.path.basename(self.command[0])


def _check_fom_names(bench):
    """primary and each inverse_of name one of a program benchmark's figures of merit (its
    preset's, then its own; primary may also be its wall_time): refused with the file, before
    anything is planned, not when the study's analysis is decided."""
    foms = all_foms(bench)
    names = [f.name for f in foms]
    for f in foms:
        if f.inverse_of is not None and f.inverse_of not in names:
            raise ValueError(f"figure of merit {f.name!r} has inverse_of = {f.inverse_of!r:.60}, which is none of "
                             f"its figures of merit ({', '.join(names)})")
    if bench.primary is not None and names and bench.primary not in names + ["wall_time"]:
        raise ValueError(f"primary = {bench.primary!r:.60} is none of its metrics ({', '.join(names + ['wall_time'])})")


class Variant(_Strict):
    """A named variant: mode x runtime x MPI x image plus its own environment and runtime
    arguments. It joins the matrix's variants, can be the baseline, and is reported under
    its name (two of identical settings make an A/A check)."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
    mode: Mode
    runtime: Runtime | None = None        # container modes: the first runtime when not given
    mpi: Mpi
    image: ImageName | None = None        # container modes: "default" when not given
    image_format: ImageFormat = "default"
    image_place: ImagePlace = ""
    cold: StrictBool = False
    audit: StrictBool = False             # the ranks under the rtld-audit library (audit/)
    network: Network = DEFAULT_NETWORK    # isolated: a rank per emulated node (networks/)
    user: Account = ""                    # the account the ranks run as ("": the caller; privilege.py)
    gpus: Gpus = ""                       # --gpus for the ranks ("": none; docs/gpu.md)
    env: EnvMap = {}       # for the ranks (inside the container), over the benchmark's
    runtime_args: list[ExecString] = []   # extra arguments for the runtime, before the image
    binding: Literal[BINDING_CHOICES] | None = None   # None: [study] binding

    @model_validator(mode="after")
    def _container_fields(self):
        if not in_container(self.mode):
            given = [k for k in ("runtime", "image") if getattr(self, k) is not None]
            given += [k for k in ("image_format", "image_place") if getattr(self, k) not in ("default", "")]
            if self.runtime_args:
                given.append("runtime_args")
            if given:
                raise ValueError(f"a {self.mode} variant runs no container: remove {', '.join(given)}")
        else:
            self.runtime = self.runtime or _runtimes()[0]
            self.image = self.image or "default"
        return self

    def as_dict(self):
        """The variant as planned and stored (runs.variant_json)."""
        d = {"name": self.name, "mode": self.mode, "runtime": self.runtime, "mpi": self.mpi, "image": self.image}
        from .ids import OPTIONAL_DIMS, is_set

        d.update({dim: getattr(self, dim) for dim in OPTIONAL_DIMS if is_set(getattr(self, dim))})
        if self.env:
            d["env"] = dict(self.env)
        if self.runtime_args:
            d["runtime_args"] = list(self.runtime_args)
        if self.binding is not None:  # only when named: other variants' stored dicts stay as they were
            d["binding"] = self.binding
        return d


class Baseline(_Strict):
    """What each variant is compared with: a named variant (`variant = NAME`), or a selector
    whose fields replace the variant's own (mode, and runtime/MPI/image where given)."""

    variant: str | None = None
    mode: Mode = "native"
    runtime: Runtime | None = None
    mpi: Mpi | None = None
    image: ImageName | None = None
    audit: StrictBool = False  # the baseline runs unaudited unless told
    user: Account = ""         # ... and as the caller unless told (a study run all as an account)

    @model_validator(mode="after")
    def _one_kind(self):
        if self.variant is not None and self.model_fields_set & {"mode", "runtime", "mpi", "image", "audit", "user"}:
            raise ValueError("give either variant (a named variant) or mode/runtime/mpi/image/audit/user, not both")
        return self


class StudyConfig(_Strict):
    study: StudySection
    baseline: Baseline = Baseline()
    slurm: SlurmSection = SlurmSection()
    matrix: Matrix = Matrix()
    variant: list[Variant] = []                        # named variants; unique names: plan.check
    benchmark: list[Benchmark] = Field(min_length=1)   # unique names: plan.check (it names the key)
    finding: list[Finding] = []                        # published findings the report evaluates

    def workdir_of(self, bench):
        """A benchmark's working directory (its own, else [study]'s): absolute since the file
        was read (relative paths resolved against the current directory then), or None."""
        return bench.workdir or self.study.workdir


def validated(text, source="<study>"):
    """A StudyConfig from a study's text (also a stored study's): every problem of the file
    at once, named by key path. What planning would refuse besides (zips, the baseline, the
    study's size) is checked by plan/study_file.parse. Touches no file system."""
    data = parse_toml(text, source)
    if "io" in data and "benchmark" not in data:  # an I/O sweep's file (io/config.py), given to `study`
        raise NearmetalError(f"{source}: an I/O study file ([io], no [[benchmark]]): run it with "
                             f"`nearmetal io sweep {source}`")
    try:
        return StudyConfig.model_validate(data)
    except ValidationError as e:
        raise validation_error(e, source, model=StudyConfig) from None


def check_paths(cfg, source="<study>"):
    """Working directories must exist or be creatable, and writable: checked before any run
    starts (not when parsing, which also reads stored studies whose directories may be gone:
    plan/study_file.check_runnable calls it)."""
    if cfg.study.workdir:
        why = check_workdir(cfg.study.workdir)
        if why:
            raise NearmetalError(one_line(f"{source}: study.workdir: {cfg.study.workdir}: {why}"))
    for i, bench in enumerate(cfg.benchmark):
        if bench.workdir:
            why = check_workdir(bench.workdir)
            if why:
                raise NearmetalError(one_line(f"{source}: benchmark[{i}].workdir: {bench.workdir}: {why}"))


def check_images(places, source):
    """[(key path, [image values])]: each image must be possible to look up (an image path
    under /proc/1/root is not, even for root)."""
    for where, values in places:
        for j, value in enumerate(values):
            why = probe_path(value)
            if why:
                raise NearmetalError(one_line(f"{source}: {where}[{j}]: {value}: {why}"))
