"""Study files: TOML, validated before anything runs.

A study names its variants (mode x runtime x MPI x image), the benchmarks with their
arguments, the placement matrix (ranks x threads), repetitions, warm-up runs, timeout,
the run order and the baseline. Matrices are full cross products, with zipped
dimensions (varying together, as Ramble's `zips`) and exclusions.

Errors name the file, the key path, what was expected and what was found.
"""

import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import NearmetalError

DIMENSIONS = ("mode", "runtime", "mpi", "image", "ranks", "threads")
MODES = ("native", "hybrid", "bind")
RUNTIMES = ("charliecloud", "bwrap", "podman")
MPIS = ("openmpi", "mpich")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StudySection(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
    description: str = ""
    repetitions: int = Field(5, ge=1, le=10000)
    warmup: int = Field(1, ge=0, le=100)
    timeout: float = Field(600, gt=0)
    seed: int | None = None
    order: Literal["blocks", "sequential"] = "blocks"
    margin: float = Field(0.03, gt=0, lt=1)
    pin: bool = False
    scheduler: Literal["local", "slurm"] = "local"


class SlurmSection(_Strict):
    """Used with scheduler = "slurm": srun inside an allocation, else one sbatch job per run."""

    partition: str | None = None
    nodes: int | None = Field(None, ge=1)
    time: str | None = None
    account: str | None = None
    export: str | None = None


class Matrix(_Strict):
    mode: list[Literal["native", "hybrid", "bind"]] = ["native", "hybrid", "bind"]
    runtime: list[Literal["charliecloud", "bwrap", "podman"]] = ["charliecloud"]
    mpi: list[Literal["openmpi", "mpich"]] = ["openmpi", "mpich"]
    image: list[str] = ["default"]
    ranks: list[int] = [2]
    threads: list[int] = [1]
    zips: list[list[str]] = []
    exclude: list[dict[str, str | int]] = []

    @field_validator("ranks", "threads")
    @classmethod
    def _positive(cls, v):
        if not v or any(x < 1 for x in v):
            raise ValueError("expected a non-empty list of positive integers")
        return v

    @field_validator("mode", "runtime", "mpi", "image")
    @classmethod
    def _nonempty(cls, v):
        if not v:
            raise ValueError("expected a non-empty list")
        return v

    @model_validator(mode="after")
    def _zips_and_excludes(self):
        for zi, group in enumerate(self.zips):
            for dim in group:
                if dim not in DIMENSIONS:
                    raise ValueError(f"zips[{zi}]: unknown dimension '{dim}' (dimensions: {', '.join(DIMENSIONS)})")
            lengths = {dim: len(getattr(self, dim)) for dim in group}
            if len(set(lengths.values())) > 1:
                raise ValueError(f"zips[{zi}]: zipped dimensions must have equal lengths, found {lengths}")
        seen = [d for g in self.zips for d in g]
        if len(seen) != len(set(seen)):
            raise ValueError("a dimension may appear in only one zip")
        for ei, ex in enumerate(self.exclude):
            for dim in ex:
                if dim not in DIMENSIONS:
                    raise ValueError(f"exclude[{ei}]: unknown dimension '{dim}' (dimensions: {', '.join(DIMENSIONS)})")
        return self


class Benchmark(_Strict):
    """One kernel with its arguments; any matrix dimension may be overridden per benchmark."""

    kernel: str
    name: str | None = None
    args: list[str] = []
    metrics: list[str] = []
    where: dict[str, str | int | float] = {}
    mode: list[Literal["native", "hybrid", "bind"]] | None = None
    runtime: list[Literal["charliecloud", "bwrap", "podman"]] | None = None
    mpi: list[Literal["openmpi", "mpich"]] | None = None
    image: list[str] | None = None
    ranks: list[int] | None = None
    threads: list[int] | None = None
    zips: list[list[str]] | None = None

    @field_validator("kernel")
    @classmethod
    def _known_kernel(cls, v):
        from ..kernels import REGISTRY

        if v not in REGISTRY:
            raise ValueError(f"unknown kernel '{v}' (kernels: {', '.join(sorted(REGISTRY))})")
        return v

    @property
    def label(self):
        return self.name or self.kernel


class Baseline(_Strict):
    mode: Literal["native", "hybrid", "bind"] = "native"
    runtime: str | None = None
    mpi: str | None = None
    image: str | None = None


class StudyConfig(_Strict):
    study: StudySection
    baseline: Baseline = Baseline()
    slurm: SlurmSection = SlurmSection()
    matrix: Matrix = Matrix()
    benchmark: list[Benchmark] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_benchmark_names(self):
        labels = [b.label for b in self.benchmark]
        dup = {l for l in labels if labels.count(l) > 1}
        if dup:
            raise ValueError(f"benchmark names must be unique (give `name =`): {', '.join(sorted(dup))}")
        return self


def _where(loc):
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def parse(text, source="<study>"):
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise NearmetalError(f"{source}: not valid TOML: {e}")
    try:
        return StudyConfig.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        found = err.get("input")
        found_s = repr(found) if not isinstance(found, dict) else "a table"
        msg = err["msg"].removeprefix("Value error, ")
        more = f" (and {len(e.errors()) - 1} more problems)" if len(e.errors()) > 1 else ""
        if err["type"] == "missing":
            raise NearmetalError(f"{source}: {_where(err['loc'])}: required key is missing{more}")
        if err["type"] == "extra_forbidden":
            raise NearmetalError(f"{source}: {_where(err['loc'])}: unknown key{more}")
        raise NearmetalError(f"{source}: {_where(err['loc'])}: {msg}; found {found_s}{more}")


def load(path):
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise NearmetalError(f"cannot read study file {path}: {e.strerror}")
    return parse(text, source=str(path)), text


QUICKSTART = Path(__file__).with_name("quickstart.toml")


def builtin_quickstart():
    text = QUICKSTART.read_text()
    return parse(text, source="built-in quickstart"), text
