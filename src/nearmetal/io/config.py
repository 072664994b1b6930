"""I/O study files: TOML, validated before any rank starts (docs/io-tuning.md).

An I/O study is a regular [study] section (name, repetitions, warm-up, timeout, seed,
margin, ...) plus an [io] table: the grid, the domain layout, the file system under test
(`dir`), the variants (mode/runtime/mpi/image as in [matrix]) and the parameter space
[io.space]; [io.preselect] tunes the pre-selection pass. Errors name the file and key
path, in the same style as study files.
"""

import os
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, field_validator

from ..errors import NearmetalError
from ..study.config import Baseline, SlurmSection, StudySection, check_workdir
from .space import parse_pair, parse_size

# MPI_Info keys nm-iobench accepts: a user writing one of them into [io.space] meant a
# tuning parameter, and is told which one sets it.
HINT_KEYS = {"cb_nodes": "aggregators", "cb_config_list": "aggregators", "cb_buffer_size": "buffer",
             "striping_factor": "stripes", "striping_unit": None, "romio_cb_write": None, "romio_cb_read": None}
SPACE_KEYS = ("pattern", "library", "io_layout", "aggregators", "stripes", "buffer", "chunk", "read", "mpiio")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _unique(v):
    seen = []
    for x in v:
        if x in seen:
            raise ValueError(f"{x!r} is listed twice")
        seen.append(x)
    return v


class Space(_Strict):
    """The parameter space. "default" = leave the hint/component unset (the library's choice)."""

    pattern: list[Literal["serial", "file-per-rank", "io-domains", "shared"]] = ["serial", "shared"]
    library: list[Literal["posix", "mpiio", "pnetcdf", "netcdf4", "hdf5"]] = ["mpiio"]
    io_layout: list[str] = ["1x1"]
    aggregators: list[StrictInt | Literal["default"]] = ["default"]
    stripes: list[StrictInt | Literal["default"]] = ["default"]
    buffer: list[StrictInt | str] = ["default"]
    chunk: list[str] = ["default"]
    read: list[Literal["none", "serial", "parallel"]] = ["serial"]
    mpiio: list[Literal["default", "romio", "ompio"]] = ["default"]

    @field_validator("pattern", "library", "io_layout", "aggregators", "stripes", "buffer", "chunk", "read", "mpiio")
    @classmethod
    def _nonempty_unique(cls, v):
        if not v:
            raise ValueError("expected a non-empty list")
        return _unique(v)

    @field_validator("io_layout")
    @classmethod
    def _layouts(cls, v):
        for x in v:
            parse_pair(x, "io_layout")
        return v

    @field_validator("aggregators", "stripes")
    @classmethod
    def _positive(cls, v):
        for x in v:
            if x != "default" and x < 1:
                raise ValueError(f"expected positive integers or \"default\", got {x}")
        return v

    @field_validator("buffer")
    @classmethod
    def _sizes(cls, v):
        out = [x if x == "default" else parse_size(x) for x in v]
        return _unique(out)

    @field_validator("chunk")
    @classmethod
    def _chunks(cls, v):
        for x in v:
            if x != "default":
                parse_pair(x, "chunk")
        return v

    def values(self, key):
        """The values of a parameter as Configuration fields ("default" -> None)."""
        return [None if x == "default" else x for x in getattr(self, key)]


class Preselect(_Strict):
    enabled: bool = True
    repetitions: int = Field(3, ge=2, le=1000)
    threshold: float = Field(0.05, gt=0, lt=1)
    alpha: float = Field(0.05, gt=0, lt=1)


class IOSection(_Strict):
    grid: list[StrictInt] = Field(min_length=3, max_length=3)
    steps: int = Field(2, ge=1, le=100000)
    layout: str = "2x1"
    types: list[Literal["double", "float"]] = ["double", "float"]
    dir: str
    nodes: int = Field(1, ge=1)
    metric: Literal["total", "write"] = "total"   # what pre-selection and the summary rank by
    mode: list[Literal["native", "hybrid", "bind"]] = ["native"]
    runtime: list[Literal["charliecloud", "bwrap", "podman"]] = ["charliecloud"]
    mpi: list[Literal["openmpi", "mpich"]] = ["openmpi"]
    image: list[str] = ["default"]
    space: Space = Space()
    preselect: Preselect = Preselect()

    @field_validator("grid")
    @classmethod
    def _grid(cls, v):
        if any(x < 1 for x in v):
            raise ValueError("expected three positive integers nx, ny, nz")
        return v

    @field_validator("layout")
    @classmethod
    def _layout(cls, v):
        parse_pair(v, "layout")
        return v

    @field_validator("types", "mode", "runtime", "mpi", "image")
    @classmethod
    def _nonempty(cls, v):
        if not v:
            raise ValueError("expected a non-empty list")
        return _unique(v)

    @field_validator("dir")
    @classmethod
    def _dir(cls, v):
        full = os.path.expandvars(os.path.expanduser(v))
        if "$" in full:
            raise ValueError(f"'{v}' names an environment variable that is not set")
        if not full.strip():
            raise ValueError("expected a directory path")
        return os.path.abspath(full)

    @property
    def ranks(self):
        px, py = parse_pair(self.layout)
        return px * py


class IOStudy(_Strict):
    study: StudySection
    baseline: Baseline | None = None
    slurm: SlurmSection = SlurmSection()
    io: IOSection


def _where(loc):
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _validation_error(e, source):
    errors = e.errors()
    err = errors[0]
    # Union members (int | "default") report one error per member, under a tagged location.
    branches = ("int", "str", "literal['default']")
    union = err["loc"] and err["loc"][-1] in branches
    loc = [p for p in err["loc"] if p not in branches]
    if union:
        errors = [x for x in errors if [p for p in x["loc"] if p not in branches] != loc]
    found = err.get("input")
    found_s = repr(found) if not isinstance(found, dict) else "a table"
    msg = err["msg"].removeprefix("Value error, ")
    if union:
        msg = 'expected a positive integer or "default"' if loc[-2] in ("aggregators", "stripes") else \
            'expected a size (bytes, or like 16MiB) or "default"'
    more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
    if err["type"] == "missing":
        return NearmetalError(f"{source}: {_where(loc)}: required key is missing{more}")
    if err["type"] == "extra_forbidden":
        key = loc[-1]
        if loc[:2] == ["io", "space"] and key in HINT_KEYS:
            via = HINT_KEYS[key]
            how = f"the tuner sets it from io.space.{via}" if via else "the tuner does not vary it"
            return NearmetalError(f"{source}: {_where(loc)}: an MPI-IO hint, not a tuning parameter: {how}{more}")
        if loc[:2] == ["io", "space"]:
            return NearmetalError(f"{source}: {_where(loc)}: unknown parameter (parameters: {', '.join(SPACE_KEYS)}){more}")
        return NearmetalError(f"{source}: {_where(loc)}: unknown key{more}")
    return NearmetalError(f"{source}: {_where(loc)}: {msg}; found {found_s}{more}")


def _check_combinations(s, source):
    io = s.io
    px, py = parse_pair(io.layout)
    nx, ny, _ = io.grid
    if px > nx or py > ny:
        raise NearmetalError(f"{source}: io.layout: {io.layout} has more ranks along x or y than the grid "
                             f"{nx}x{ny} has points")
    for i, lay in enumerate(io.space.io_layout):
        ix, iy = parse_pair(lay)
        if px % ix or py % iy:
            raise NearmetalError(f"{source}: io.space.io_layout[{i}]: {lay} does not divide the domain layout {io.layout}")
    for i, ch in enumerate(io.space.chunk):
        if ch != "default":
            cx, cy = parse_pair(ch)
            if cx > nx or cy > ny:
                raise NearmetalError(f"{source}: io.space.chunk[{i}]: {ch} splits the {nx}x{ny} grid into more "
                                     f"chunks than it has points")
    if set(io.space.pattern) == {"shared"} and set(io.space.library) == {"posix"}:
        raise NearmetalError(f"{source}: io.space: posix cannot write one shared file: the space is empty "
                             f"(add a pattern or an MPI-IO library)")
    if any(m != "default" for m in io.space.mpiio) and "openmpi" not in io.mpi:
        raise NearmetalError(f"{source}: io.space.mpiio: romio/ompio choose Open MPI's MPI-IO component, "
                             f"but io.mpi has no openmpi")
    if len(s.study.name) > 54:
        raise NearmetalError(f"{source}: study.name: at most 54 characters for an I/O study "
                             f"(its pre-selection study is '<name>-preselect')")
    if s.study.workdir is not None:
        raise NearmetalError(f"{source}: study.workdir: I/O studies run in io.dir (the file system under test)")


def parse(text, source="<io study>"):
    """Validate an I/O study's text (syntax and combinations; no file system or MPI checks)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise NearmetalError(f"{source}: not valid TOML: {e}")
    try:
        s = IOStudy.model_validate(data)
    except ValidationError as e:
        raise _validation_error(e, source) from None
    _check_combinations(s, source)
    return s


def check_environment(s, source="<io study>", availability=None):
    """Checks that need the machine: the target directory, and every listed library in
    every variant (asked from nm-iobench -A of that variant's build). `availability`:
    a function variant -> {library: None | reason}, for callers that already know."""
    why = check_workdir(s.io.dir)
    if why:
        raise NearmetalError(f"{source}: io.dir: {s.io.dir}: {why}")
    ask = availability or library_availability
    for variant in variants(s):
        have = ask(variant)
        for i, lib in enumerate(s.io.space.library):
            reason = have.get(lib, "not reported by nm-iobench -A")
            if reason is not None:
                raise NearmetalError(f"{source}: io.space.library[{i}]: {lib} is unavailable for "
                                     f"{variant_name(variant)}: {reason}")


def variants(s):
    """The study's variants (mode x runtime x MPI x image), native collapsing runtime/image."""
    out = []
    for mode in s.io.mode:
        for runtime in (s.io.runtime if mode != "native" else [None]):
            for mpi in s.io.mpi:
                for image in (s.io.image if mode != "native" else [None]):
                    v = {"mode": mode, "runtime": runtime, "mpi": mpi, "image": image}
                    if v not in out:
                        out.append(v)
    return out


def variant_name(v):
    if v["mode"] == "native":
        return f"{v['mpi']} (native)"
    return f"{v['mpi']} ({v['mode']} on {v['runtime']}, image {v['image']})"


_AVAILABLE = re.compile(r"^(\w+) available$")
_UNAVAILABLE = re.compile(r"^(\w+) unavailable: (.*)$")


def parse_availability(text):
    """nm-iobench -A output -> {library: None (available) | reason}."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        m = _AVAILABLE.match(line)
        if m:
            out[m.group(1)] = None
            continue
        m = _UNAVAILABLE.match(line)
        if m:
            out[m.group(1)] = m.group(2).strip()
    return out


_availability_cache = {}


def library_availability(variant):
    """Which I/O libraries the nm-iobench build of a variant has: one real 1-rank launch of
    `nm-iobench -A` through the same launch path as the study's runs."""
    key = tuple(sorted((k, str(v)) for k, v in variant.items()))
    if key in _availability_cache:
        return _availability_cache[key]
    from ..run import RunRequest, plan

    image = None if variant["image"] in (None, "default") else variant["image"]
    req = RunRequest("nm-iobench", ["-A"], mode=variant["mode"], runtime=variant["runtime"] or "charliecloud",
                     image=image, mpi=variant["mpi"], ranks=1)
    p = plan(req)
    try:
        out = subprocess.run(p.argv, env=p.environ(), capture_output=True, text=True, timeout=120,
                             stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise NearmetalError(f"nm-iobench -A did not answer within 120 s for {variant_name(variant)}")
    have = parse_availability(out.stdout)
    if out.returncode != 0 or not have:
        tail = (out.stderr.strip().splitlines() or out.stdout.strip().splitlines() or ["(no output)"])[-1]
        raise NearmetalError(f"cannot ask nm-iobench which I/O libraries it has for {variant_name(variant)}: {tail}")
    _availability_cache[key] = have
    return have


def load(path):
    """(IOStudy, text) of a file; syntax and combinations checked (check_environment next)."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise NearmetalError(f"cannot read I/O study file {path}: {e.strerror}")
    return parse(text, source=str(path)), text


BUILTIN = Path(__file__).with_name("builtin.toml")


def builtin():
    text = BUILTIN.read_text()
    return parse(text, source="built-in I/O study"), text
