"""I/O study files: TOML, validated before any rank starts (docs/io-tuning.md).

An I/O study is a regular [study] section (name, repetitions, warm-up, timeout, seed,
margin, ...) plus an [io] table: the grid, the domain layout, the file system under test
(`dir`), the variants (mode/runtime/mpi/image as in [matrix]) and the parameter space
[io.space]; [io.preselect] tunes the pre-selection pass. Errors name the file and key
path, in the same style as study files.
"""

import re
from pathlib import Path
from typing import Literal

from pydantic import (BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, ValidationError, field_validator,
                      model_validator)

from ..choices import io_libraries as _libraries
from ..errors import NearmetalError
from ..models import in_container
from ..study.config.config import (MAX_RANKS, Baseline, ImageName, Mode, Mpi, Runtime, SlurmSection, StudySection, _choices, _mpis,
                            _runtimes, check_images, check_workdir)
from ..study.config.inputs import expand_dir, one_line, parse_toml, read_text, validation_error
from .space import parse_pair, parse_size

# MPI_Info keys nm-iobench accepts: a user writing one of them into [io.space] meant a
# tuning parameter, and is told which one sets it.
HINT_KEYS = {"cb_nodes": "aggregators", "cb_config_list": "aggregators", "cb_buffer_size": "buffer",
             "striping_factor": "stripes", "striping_unit": None, "romio_cb_write": None, "romio_cb_read": None}
SPACE_KEYS = ("pattern", "library", "io_layout", "aggregators", "stripes", "buffer", "chunk", "read", "mpiio")
C_INT_MAX = (1 << 31) - 1   # grid sizes and hint values are C ints in nm-iobench and ROMIO
MAX_SPACE = 100_000         # raw configurations in the space's cross product (the sweep plans them all)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _unique(v):
    seen = []
    for x in v:
        if x in seen:
            raise ValueError(f"{x!r} is listed twice")
        seen.append(x)
    return v


IoLibraryName = _choices(_libraries)


class Space(_Strict):
    """The parameter space. "default" = leave the hint/component unset (the library's choice)."""

    pattern: list[Literal["serial", "file-per-rank", "io-domains", "shared"]] = ["serial", "shared"]
    library: list[IoLibraryName] = ["mpiio"]
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
            if x != "default" and not 1 <= x <= C_INT_MAX:
                raise ValueError(f"expected positive integers (at most {C_INT_MAX}) or \"default\", got {x}")
        return v

    @field_validator("buffer")
    @classmethod
    def _sizes(cls, v):
        out = [x if x == "default" else parse_size(x) for x in v]
        for x in out:
            if x != "default" and x > C_INT_MAX:
                raise ValueError(f"a size must be at most {C_INT_MAX} bytes (cb_buffer_size is a C int), got {x}")
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
    enabled: StrictBool = True
    repetitions: StrictInt = Field(3, ge=2, le=1000)
    threshold: StrictFloat = Field(0.05, gt=0, lt=1, allow_inf_nan=False)
    alpha: StrictFloat = Field(0.05, gt=0, lt=1, allow_inf_nan=False)


class IOSection(_Strict):
    grid: list[StrictInt] = Field(min_length=3, max_length=3)
    steps: StrictInt = Field(2, ge=1, le=100000)
    layout: str = "2x1"
    types: list[Literal["double", "float"]] = ["double", "float"]
    dir: str
    nodes: StrictInt = Field(1, ge=1, le=100000)
    metric: Literal["total", "write"] = "total"   # what pre-selection and the summary rank by
    mode: list[Mode] = ["native"]
    runtime: list[Runtime] = Field(default_factory=lambda: _runtimes()[:1])
    mpi: list[Mpi] = Field(default_factory=lambda: _mpis()[:1])
    image: list[ImageName] = ["default"]
    space: Space = Space()
    preselect: Preselect = Preselect()

    @field_validator("grid")
    @classmethod
    def _grid(cls, v):
        if any(not 1 <= x <= C_INT_MAX for x in v):
            raise ValueError(f"expected three positive integers nx, ny, nz (at most {C_INT_MAX})")
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
        return expand_dir(v)

    @property
    def ranks(self):
        px, py = parse_pair(self.layout)
        return px * py


class IOStudy(_Strict):
    study: StudySection
    baseline: Baseline | None = None
    slurm: SlurmSection = SlurmSection()
    io: IOSection

    @model_validator(mode="after")
    def _fixed_repetitions(self):
        # The tuner compares configurations over a fixed number of repetitions (its
        # pre-selection decides what to sweep): adaptive repetitions are for regular studies.
        if self.study.adaptive:
            if self.study.model_fields_set & {"min_repetitions", "max_repetitions", "max_time"}:
                raise ValueError("study: an I/O study takes repetitions (default 5), not min_repetitions, "
                                 "max_repetitions or max_time")
            self.study.repetitions = IO_REPETITIONS
        return self


IO_REPETITIONS = 5


def _special(loc, err, union):
    """The I/O study's own wording: union members of the space, MPI-IO hint names."""
    if union and loc[-2:-1] and loc[-2] in ("aggregators", "stripes"):
        return f'expected a positive integer or "default"; found {err.get("input")!r:.60}'
    if union and loc[-2:-1] and loc[-2] == "buffer":
        return f'expected a size (bytes, or like 16MiB) or "default"; found {err.get("input")!r:.60}'
    if err["type"] == "extra_forbidden" and loc[:2] == ["io", "space"] and len(loc) == 3:
        key = loc[-1]
        if key in HINT_KEYS:
            via = HINT_KEYS[key]
            how = f"the tuner sets it from io.space.{via}" if via else "the tuner does not vary it"
            return f"an MPI-IO hint, not a tuning parameter: {how}"
        return f"unknown parameter (parameters: {', '.join(SPACE_KEYS)})"
    return None


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
    from .libraries import get as get_library

    if "shared" in io.space.pattern and not any(get_library(lib).shared for lib in io.space.library):
        raise NearmetalError(f"{source}: io.space.pattern[{io.space.pattern.index('shared')}]: shared needs an MPI-IO "
                             f"library, but io.space.library lists only {', '.join(io.space.library)} "
                             f"({' and '.join(io.space.library)} cannot write one shared file)")
    if px * py > MAX_RANKS:
        raise NearmetalError(f"{source}: io.layout: {io.layout} is {px * py} ranks; at most {MAX_RANKS}")
    combinations = 1
    for key in SPACE_KEYS:
        combinations *= len(getattr(io.space, key))
    if combinations > MAX_SPACE:
        raise NearmetalError(f"{source}: io.space: {combinations} combinations; at most {MAX_SPACE} (fix some "
                             f"parameters, or split the study)")
    _check_baseline(s, source)
    from ..families import get as get_family

    if any(m != "default" for m in io.space.mpiio) and not any(get_family(m).mpiio_components for m in io.mpi):
        raise NearmetalError(f"{source}: io.space.mpiio: romio/ompio choose the MPI-IO component, which none of "
                             f"io.mpi ({', '.join(io.mpi)}) lets a run choose (Open MPI does)")
    if len(s.study.name) > 54:
        raise NearmetalError(f"{source}: study.name: at most 54 characters for an I/O study "
                             f"(its pre-selection study is '<name>-preselect')")
    if s.study.workdir is not None:
        raise NearmetalError(f"{source}: study.workdir: I/O studies run in io.dir (the file system under test)")


def _check_baseline(s, source):
    """The baseline must be one of the study's variants (the compiled study would refuse it
    only when the sweep starts, and without this file's name)."""
    b, io = s.baseline, s.io
    if b is None:
        return
    for key, values in (("mode", io.mode), ("runtime", io.runtime), ("mpi", io.mpi), ("image", io.image)):
        value = getattr(b, key)
        if value is not None and value not in values and not (key in ("runtime", "image") and not in_container(b.mode)):
            raise NearmetalError(f"{source}: baseline.{key}: {value!r:.60} is not in io.{key} ({', '.join(values)})")


def parse(text, source="<io study>"):
    """Validate an I/O study's text (syntax and combinations; no file system or MPI checks)."""
    data = parse_toml(text, source)
    try:
        s = IOStudy.model_validate(data)
    except ValidationError as e:
        raise validation_error(e, source, _special, model=IOStudy) from None
    try:
        _check_combinations(s, source)
    except NearmetalError as e:
        raise NearmetalError(one_line(str(e))) from None
    return s


def check_environment(s, source="<io study>", availability=None):
    """Checks that need the machine: the target directory, and every listed library in
    every variant (asked from nm-iobench -A of that variant's build). `availability`:
    a function variant -> {library: None | reason}, for callers that already know."""
    why = check_workdir(s.io.dir)
    if why:
        raise NearmetalError(one_line(f"{source}: io.dir: {s.io.dir}: {why}"))
    check_images([("io.image", s.io.image)], source)
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
        for runtime in (s.io.runtime if in_container(mode) else [None]):
            for mpi in s.io.mpi:
                for image in (s.io.image if in_container(mode) else [None]):
                    v = {"mode": mode, "runtime": runtime, "mpi": mpi, "image": image}
                    if v not in out:
                        out.append(v)
    return out


def variant_name(v):
    if not in_container(v["mode"]):
        return f"{v['mpi']} ({v['mode']})"
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


def library_availability(variant, timeout=120):
    """Which I/O libraries the nm-iobench build of a variant has: one real 1-rank launch of
    `nm-iobench -A` through the same launch path as the study's runs."""
    key = tuple(sorted((k, str(v)) for k, v in variant.items()))
    if key in _availability_cache:
        return _availability_cache[key]
    from ..run import RunRequest, plan

    image = None if variant["image"] in (None, "default") else variant["image"]
    req = RunRequest("nm-iobench", ["-A"], mode=variant["mode"], runtime=variant["runtime"],
                     image=image, mpi=variant["mpi"], ranks=1)
    from .. import schedulers

    p = plan(req)
    out = schedulers.get(req.scheduler).run(p, req, [req], timeout=timeout)
    if out.status in ("timeout", "not started"):
        raise NearmetalError(f"cannot ask nm-iobench which I/O libraries it has for {variant_name(variant)}: "
                             f"{out.reason}")
    have = parse_availability(out.stdout)
    if out.exit_status != 0 or not have:
        tail = (out.stderr.strip().splitlines() or out.stdout.strip().splitlines() or ["(no output)"])[-1]
        raise NearmetalError(f"cannot ask nm-iobench which I/O libraries it has for {variant_name(variant)}: {tail}")
    _availability_cache[key] = have
    return have


def load(path):
    """(IOStudy, text) of a file; syntax and combinations checked (check_environment next)."""
    text = read_text(path, "I/O study file")
    return parse(text, source=one_line(str(path))), text


BUILTIN = Path(__file__).with_name("builtin.toml")


def builtin():
    text = BUILTIN.read_text()
    return parse(text, source="built-in I/O study"), text
