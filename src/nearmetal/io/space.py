"""One point of the I/O tuning space: how a domain-decomposed field goes to disk.

A `Configuration` is what one `nm-iobench` run measures: write pattern, I/O library,
io_layout, MPI-IO hints (aggregators per node, stripe count, collective buffer size),
chunk layout, read mode and (Open MPI) the MPI-IO component. Its `label()` is canonical
and parseable; it is the study's benchmark name, so the store, `io best` and the report
recover the configuration from it with `Configuration.from_label`.

Label grammar (parts that do not apply to the pattern/library are omitted, in this order):

    PATTERN/LIBRARY [io=IXxIY] [aggr=N] [stripes=N] [cb=SIZE] [chunk=default|CXxCY] read=READ [mpiio=romio|ompio]

    shared/pnetcdf io=2x1 aggr=1 stripes=4 cb=16MiB read=parallel mpiio=romio
    shared/hdf5 io=1x1 chunk=2x2 read=serial
    serial/posix read=serial

SIZE is bytes written with the largest exact binary unit (64KiB, 16MiB, 1GiB) or a plain
number of bytes.
"""

import re
from dataclasses import dataclass, replace

PATTERNS = ("serial", "file-per-rank", "io-domains", "shared")
READS = ("none", "serial", "parallel")
MPIIO_COMPONENTS = ("romio", "ompio")
# Open MPI's component names for OMPI_MCA_io (Open MPI 4.x ships ROMIO as "romio321").
OMPI_IO_COMPONENT = {"romio": "romio321", "ompio": "ompio"}

_UNITS = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))
_PAIR = re.compile(r"^([1-9][0-9]*)x([1-9][0-9]*)$")
_SIZE = re.compile(r"^([1-9][0-9]*)\s*(GiB|MiB|KiB|B)?$")


def parse_pair(text, what="layout"):
    """'2x1' -> (2, 1); ValueError otherwise."""
    m = _PAIR.match(str(text))
    if not m:
        raise ValueError(f"{what} must look like 2x1 (two positive integers), got '{text}'")
    return int(m.group(1)), int(m.group(2))


def parse_size(text):
    """'16MiB' | '64KiB' | '1GiB' | '4096' | 4096 -> bytes; ValueError otherwise."""
    if isinstance(text, bool):
        raise ValueError(f"a size must be bytes or like 16MiB, got {text!r}")
    if isinstance(text, int):
        if text < 1:
            raise ValueError(f"a size must be positive, got {text}")
        return text
    m = _SIZE.match(str(text).strip())
    if not m:
        raise ValueError(f"a size must be bytes or like 64KiB, 16MiB, 1GiB; got '{text}'")
    factor = dict(_UNITS).get(m.group(2) or "B", 1)
    return int(m.group(1)) * factor


def format_size(nbytes):
    for unit, factor in _UNITS:
        if nbytes % factor == 0:
            return f"{nbytes // factor}{unit}"
    return str(nbytes)


def __getattr__(name):
    # LIBRARIES from the I/O library registry (io/libraries/), asked when used.
    if name == "LIBRARIES":
        from .libraries import names

        return names()
    raise AttributeError(name)


def _library(name):
    from .libraries import get

    return get(name)


def _uses_mpiio(library):
    return _library(library).mpiio


@dataclass(frozen=True)
class Configuration:
    pattern: str
    library: str
    io_layout: str | None = None      # "IXxIY": io-domains and shared only
    aggregators: int | None = None    # per node (cb_config_list "*:N", cb_nodes N*nodes)
    stripes: int | None = None        # striping_factor
    buffer: int | None = None         # cb_buffer_size in bytes
    chunk: str | None = None          # "default" | "CXxCY": netcdf4 and hdf5 only
    read: str = "serial"              # none | serial | parallel
    mpiio: str | None = None          # romio | ompio: the MPI-IO component under Open MPI

    def __post_init__(self):
        if self.pattern not in PATTERNS:
            raise ValueError(f"unknown pattern '{self.pattern}' (patterns: {', '.join(PATTERNS)})")
        from .libraries import names, where

        if self.library not in names():
            raise ValueError(f"unknown library '{self.library}' (libraries: {', '.join(names())})")
        if self.pattern == "shared" and not _library(self.library).shared:
            raise ValueError(f"{self.library} cannot write one shared file (use {', '.join(where(shared=True))})")
        if self.io_layout is not None:
            parse_pair(self.io_layout, "io_layout")
        for name in ("aggregators", "stripes", "buffer"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if self.chunk is not None and self.chunk != "default":
            parse_pair(self.chunk, "chunk")
        if self.read not in READS:
            raise ValueError(f"unknown read mode '{self.read}' (read modes: {', '.join(READS)})")
        if self.mpiio is not None and self.mpiio not in MPIIO_COMPONENTS:
            raise ValueError(f"unknown MPI-IO component '{self.mpiio}' (components: {', '.join(MPIIO_COMPONENTS)})")

    # -- what applies -----------------------------------------------------------------------
    @property
    def has_io_layout(self):
        return self.pattern in ("io-domains", "shared")

    @property
    def has_hints(self):
        """MPI-IO hints matter only where several writers share a file through MPI-IO."""
        return self.pattern == "shared" and _uses_mpiio(self.library)

    @property
    def has_chunk(self):
        return _library(self.library).chunked

    @property
    def has_parallel_read(self):
        """Collective reads need a file shared by several ranks and a library with them:
        posix reads independently, and under file-per-rank every file has one reader."""
        return _uses_mpiio(self.library) and self.pattern != "file-per-rank"

    def normalize(self, mpi=None):
        """The same configuration with every non-applicable parameter set to None, and the
        defaults of applicable ones filled in (io_layout 1x1, chunk default); read=parallel
        becomes serial where it cannot differ. mpi: the MPI family it runs under (None = not
        known yet): the MPI-IO component is a choice only where the family's profile offers
        one (Open MPI: ROMIO or OMPIO; MPICH always uses ROMIO)."""
        changes = {}
        if self.read == "parallel" and not self.has_parallel_read:
            changes["read"] = "serial"
        changes["io_layout"] = (self.io_layout or "1x1") if self.has_io_layout else None
        if not self.has_hints:
            changes.update(aggregators=None, stripes=None, buffer=None)
        changes["chunk"] = (self.chunk or "default") if self.has_chunk else None
        if not _uses_mpiio(self.library) or (mpi is not None and not _mpiio_choice(mpi)):
            changes["mpiio"] = None
        return replace(self, **changes)

    # -- label ------------------------------------------------------------------------------
    def label(self):
        parts = [f"{self.pattern}/{self.library}"]
        if self.io_layout is not None:
            parts.append(f"io={self.io_layout}")
        if self.aggregators is not None:
            parts.append(f"aggr={self.aggregators}")
        if self.stripes is not None:
            parts.append(f"stripes={self.stripes}")
        if self.buffer is not None:
            parts.append(f"cb={format_size(self.buffer)}")
        if self.chunk is not None:
            parts.append(f"chunk={self.chunk}")
        parts.append(f"read={self.read}")
        if self.mpiio is not None:
            parts.append(f"mpiio={self.mpiio}")
        return " ".join(parts)

    __str__ = label

    @classmethod
    def from_label(cls, text):
        """The configuration a label names; ValueError for anything that is not a label of a
        normalized configuration (unknown or repeated key, a part that does not apply)."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"not an I/O configuration label: {text!r}")
        head, *rest = text.split()
        pattern, slash, library = head.partition("/")
        if not slash:
            raise ValueError(f"not an I/O configuration label (expected PATTERN/LIBRARY first): '{text}'")
        keys = {"io": "io_layout", "aggr": "aggregators", "stripes": "stripes", "cb": "buffer",
                "chunk": "chunk", "read": "read", "mpiio": "mpiio"}
        fields = {}
        for token in rest:
            key, eq, value = token.partition("=")
            if not eq or key not in keys:
                raise ValueError(f"'{text}': unknown part '{token}' (parts: {', '.join(k + '=' for k in keys)})")
            name = keys[key]
            if name in fields:
                raise ValueError(f"'{text}': '{key}=' given twice")
            if name in ("aggregators", "stripes"):
                if not value.isdigit():
                    raise ValueError(f"'{text}': {key}= needs a positive integer, got '{value}'")
                fields[name] = int(value)
            elif name == "buffer":
                try:
                    fields[name] = parse_size(value)
                except ValueError as e:
                    raise ValueError(f"'{text}': cb=: {e}") from None
            else:
                fields[name] = value
        if "read" not in fields:
            raise ValueError(f"'{text}': read= is missing")
        try:
            cfg = cls(pattern, library, **fields)
        except ValueError as e:
            raise ValueError(f"'{text}': {e}") from None
        norm = cfg.normalize()
        if norm.read != cfg.read:
            raise ValueError(f"'{text}': read=parallel is the same as read=serial for {pattern}/{library} "
                             f"(no file has several readers through MPI-IO)")
        for key, name in keys.items():
            if getattr(norm, name) is None and getattr(cfg, name) is not None:
                raise ValueError(f"'{text}': {key}= does not apply to {pattern}/{library}")
            if getattr(norm, name) != getattr(cfg, name):
                raise ValueError(f"'{text}': {key}= is missing (it applies to {pattern}/{library})")
        return cfg

    # -- what a run gets --------------------------------------------------------------------
    def hints(self, nodes=1):
        """MPI-IO hints (MPI_Info key -> value) for this configuration on `nodes` nodes.
        Aggregators per node go to cb_config_list "*:N" with cb_nodes = N * nodes, as the
        paper sets them (ROMIO honours cb_nodes together with cb_config_list)."""
        out = {}
        if self.aggregators is not None:
            out["cb_config_list"] = f"*:{self.aggregators}"
            out["cb_nodes"] = str(self.aggregators * nodes)
        if self.stripes is not None:
            out["striping_factor"] = str(self.stripes)
        if self.buffer is not None:
            out["cb_buffer_size"] = str(self.buffer)
        return out

    def env(self):
        """Environment for the ranks: the MPI-IO component under Open MPI."""
        if self.mpiio is None:
            return {}
        return {"OMPI_MCA_io": OMPI_IO_COMPONENT[self.mpiio]}

    def kernel_args(self, grid, steps, layout, types, nodes=1):
        """nm-iobench's argv (without the program) for this configuration. The target
        directory is the ranks' working directory (the study's workdir), so no -d: that
        keeps the argv the same natively and in containers."""
        nx, ny, nz = grid
        args = ["-x", str(nx), "-y", str(ny), "-z", str(nz), "-t", str(steps), "-l", str(layout),
                "-p", self.pattern, "-L", self.library, "-T", ",".join(types)]
        if self.io_layout is not None:
            args += ["-i", self.io_layout]
        if self.chunk is not None:
            args += ["-c", self.chunk]
        for key, value in self.hints(nodes).items():
            args += ["-H", f"{key}={value}"]
        args += ["-r", self.read]
        return args


# nm-iobench options that take a value (docs/kernel-iobench.md)
KERNEL_VALUE_OPTIONS = ("-x", "-y", "-z", "-t", "-l", "-i", "-p", "-L", "-T", "-c", "-H", "-r", "-d")


def parse_kernel_args(args):
    """The inverse of Configuration.kernel_args for any nm-iobench argv: ({option: value},
    {hint key: value}); the last value of a repeated option wins, as in the kernel.
    ValueError when an option lacks its value."""
    opts, hints = {}, {}
    it = iter([str(a) for a in args or []])
    for a in it:
        if a not in KERNEL_VALUE_OPTIONS:
            continue
        v = next(it, None)
        if v is None:
            raise ValueError(f"nm-iobench option {a} without a value")
        if a == "-H":
            key, _, val = v.partition("=")
            hints[key] = val
        else:
            opts[a] = v
    return opts, hints


def _mpiio_choice(family):
    from ..families import get

    return bool(get(family).mpiio_components)
