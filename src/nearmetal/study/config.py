"""Study files: TOML, validated before anything runs.

A study names its variants (mode x runtime x MPI x image), the benchmarks with their
arguments, the placement matrix (ranks x threads), repetitions, warm-up runs, timeout,
the run order and the baseline. Matrices are full cross products, with zipped
dimensions (varying together, as Ramble's `zips`) and exclusions.

Errors name the file, the key path, what was expected and what was found.
"""

import os
import re
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import NearmetalError

DIMENSIONS = ("mode", "runtime", "mpi", "image", "ranks", "threads")
MODES = ("native", "hybrid", "bind")
RUNTIMES = ("charliecloud", "bwrap", "podman")
MPIS = ("openmpi", "mpich")


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _expand_dir(v):
    """~ and $VARS expanded, made absolute (relative to the current directory)."""
    if v is None:
        return None
    full = os.path.expandvars(os.path.expanduser(v))
    if "$" in full:
        raise ValueError(f"'{v}' names an environment variable that is not set")
    if not full.strip():
        raise ValueError("expected a directory path")
    return os.path.abspath(full)


def check_workdir(path):
    """None when `path` is a directory a file can be created in, or can be created; else why
    not. Tried for real (a temporary entry, removed at once): as root, access(2) says yes to
    directories nobody can write (/proc, read-only mounts)."""
    import tempfile

    p = Path(path)
    if p.exists() and not p.is_dir():
        return "not a directory"
    probe = p
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        return f"cannot be created ({probe} is not a directory)"
    try:
        tempfile.TemporaryDirectory(dir=probe, prefix=".nearmetal-probe-").cleanup()
    except OSError as e:
        return "not writable" if probe == p else f"cannot be created ({probe}: {e.strerror})"
    return None


def make_workdir(path, what="working directory"):
    """Create a directory check_workdir accepted (and its parents); a one-line error if that fails."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise NearmetalError(f"cannot create the {what} {path}: {e.strerror}")


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
    workdir: str | None = None

    @field_validator("workdir")
    @classmethod
    def _workdir(cls, v):
        return _expand_dir(v)


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
    env: dict[str, str] = {}
    workdir: str | None = None

    @field_validator("workdir")
    @classmethod
    def _workdir(cls, v):
        return _expand_dir(v)

    @field_validator("env")
    @classmethod
    def _env_names(cls, v):
        for key in v:
            if not _ENV_NAME.match(key):
                raise ValueError(f"'{key}' is not an environment variable name")
        return v

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


def check_paths(cfg, source="<study>"):
    """Working directories must exist or be creatable, and writable: checked before any run
    starts (not in parse(), which also reads stored studies whose directories may be gone)."""
    if cfg.study.workdir:
        why = check_workdir(cfg.study.workdir)
        if why:
            raise NearmetalError(f"{source}: study.workdir: {cfg.study.workdir}: {why}")
    for i, bench in enumerate(cfg.benchmark):
        if bench.workdir:
            why = check_workdir(bench.workdir)
            if why:
                raise NearmetalError(f"{source}: benchmark[{i}].workdir: {bench.workdir}: {why}")


def load(path):
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise NearmetalError(f"cannot read study file {path}: {e.strerror}")
    cfg = parse(text, source=str(path))
    check_paths(cfg, source=str(path))
    return cfg, text


QUICKSTART = Path(__file__).with_name("quickstart.toml")


def builtin_quickstart():
    text = QUICKSTART.read_text()
    return parse(text, source="built-in quickstart"), text
