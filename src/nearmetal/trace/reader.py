"""Read a directory of nm-trace files (trace-HOST-PID.nmt, docs/trace-format.md) into Python.

`read(dir)` gives a Trace: one Process per file, each with its events as a numpy structured
array (one row per recorded call, in order of start time) and the id -> name tables that
the events' `function`, `file` and `var` columns refer to. Ids are resolved after the whole
file is read: a string record may follow the events that use it (threads flush separately).
"""

import os
import struct
from dataclasses import dataclass, field

import numpy as np

from ..errors import NearmetalError
from . import LAYERS  # highest first, as in the tracer (csrc/nm-layers.def)
from ..safe_read import read_regular

# Bounds on what a trace directory may make nearmetal read (a directory handed over may be
# crafted: a link to /dev/zero, a FIFO, millions of files). A traced run writes 80 bytes per
# call: 1 GiB is 13 million calls in one process.
MAX_FILE_BYTES = 1 << 30
MAX_TOTAL_BYTES = 4 << 30
MAX_FILES = 100_000

MAGIC = b"NMTRACE\0"
VERSIONS = (1, 2)  # 2: event times may be TSC ticks, converted here with the file's clock pairs
REC_STRING, REC_EVENT, REC_RANK, REC_HINTS, REC_END, REC_CLOCK = 1, 2, 3, 4, 5, 6
CLOCK_NS, CLOCK_TSC = 0, 1
STR_FUNCTION, STR_FILE, STR_VAR = 1, 2, 3

HEADER = struct.Struct("<8sIIqiiqq64sIIQ")  # 128 bytes
FRAME = struct.Struct("<II")  # every record: type, total bytes (a multiple of 8)
STRING = struct.Struct("<IIIIII")  # + text
HINTS = struct.Struct("<IIIIQ")  # + key\0value\0...
RANK = struct.Struct("<IIii")
END = struct.Struct("<IIQQ")
CLOCK = struct.Struct("<IIQq")  # ticks, CLOCK_MONOTONIC ns read together
EVENT = np.dtype([("type", "<u4"), ("bytes", "<u4"), ("seq", "<u8"), ("parent", "<u8"), ("start_ns", "<i8"),
                  ("end_ns", "<i8"), ("offset", "<i8"), ("size", "<i8"), ("result", "<i8"), ("tid", "<u4"),
                  ("function", "<u2"), ("layer", "u1"), ("flags", "u1"), ("file", "<u4"), ("var", "<u4")])
assert HEADER.size == 128 and EVENT.itemsize == 80
MIN_BYTES = {REC_STRING: STRING.size, REC_EVENT: EVENT.itemsize, REC_RANK: RANK.size, REC_HINTS: HINTS.size,
             REC_END: END.size, REC_CLOCK: CLOCK.size}  # each record type's fixed fields
FIELDS = EVENT.names[2:]  # what a Process's events carry (type and bytes are framing)
EVENTS = np.dtype([(name, EVENT.fields[name][0]) for name in FIELDS])


@dataclass
class Process:
    """One traced process. `events` columns: seq, parent (seq of the enclosing call of a higher
    layer, 0 if none), start_ns/end_ns (CLOCK_MONOTONIC, one clock per node), offset and size
    (-1: not applicable), result (the call's return value), tid, function, layer (index into
    LAYERS), flags (bit 0: the call failed), file and var (ids; 0: none)."""

    path: str
    host: str
    pid: int
    rank: int  # MPI_Comm_rank(MPI_COMM_WORLD); -1: the process never initialised MPI
    env_rank: int  # the launcher's rank variable, inherited by a rank's children too; -1: none
    layers: tuple
    events: np.ndarray
    functions: dict = field(default_factory=dict)  # id -> name
    function_layers: dict = field(default_factory=dict)  # id -> layer name
    files: dict = field(default_factory=dict)  # id -> absolute path
    variables: dict = field(default_factory=dict)  # id -> name
    hints: dict = field(default_factory=dict)  # file path -> {key: value} of its last MPI_File_open
    world_size: int = 0
    monotonic_ns: int = 0  # clocks read together when the tracer was loaded
    realtime_ns: int = 0
    complete: bool = False  # the end record is there: the process exited normally
    recorded: int = 0  # events the end record counts (all of them reached the file unless dropped)
    truncated: bool = False  # the last record was cut short (a killed process) and dropped
    dropped: int = 0  # events the tracer could not buffer

    def function_names(self, events=None):
        """The function name of each event (all of them, or those given), as a list."""
        ids = self.events["function"] if events is None else [e["function"] for e in events]
        return [self.functions.get(int(f), "?") for f in ids]

    def calls(self, *names):
        """The events of the functions named (any of them)."""
        ids = [i for i, n in self.functions.items() if n in names]
        return self.events[np.isin(self.events["function"], ids)]

    def layer_events(self, layer):
        return self.events[self.events["layer"] == LAYERS.index(layer)]

    def file_of(self, event):
        return self.files.get(int(event["file"]))

    def var_of(self, event):
        return self.variables.get(int(event["var"]))


@dataclass
class Trace:
    directory: str
    processes: list

    def by_rank(self):
        """{rank: Process} of the processes that know their MPI rank."""
        return {p.rank: p for p in self.processes if p.rank >= 0}


def _fail(path, what):
    raise NearmetalError(f"trace file {path}: {what}")


def _event_run(data, pos):
    """How many consecutive event records start at pos (vectorised: events are most records)."""
    m = (len(data) - pos) // EVENT.itemsize
    types = np.ndarray((m,), "<u4", data, pos, (EVENT.itemsize,))
    sizes = np.ndarray((m,), "<u4", data, pos + 4, (EVENT.itemsize,))
    bad = np.flatnonzero((types != REC_EVENT) | (sizes != EVENT.itemsize))
    return int(bad[0]) if bad.size else m


def _text(data, start, length):
    return data[start:start + length].decode("utf-8", "replace")


def read_file(path):
    """One trace file as a Process; NearmetalError if it is not one (bad magic, version, record)
    or is not a regular file of at most MAX_FILE_BYTES."""
    data = read_regular(path, MAX_FILE_BYTES, "trace file")
    if len(data) < HEADER.size or data[:8] != MAGIC:
        _fail(path, "not an nm-trace file (bad magic or shorter than its header)")
    _, version, header_bytes, pid, rank, env_rank, mono, real, host, mask, clock, ticks = HEADER.unpack_from(data)
    if version not in VERSIONS:
        _fail(path, f"format version {version}, this reader knows {', '.join(map(str, VERSIONS))}")
    if header_bytes < HEADER.size or header_bytes % 8 or header_bytes > len(data):
        _fail(path, f"corrupt header (it says {header_bytes} bytes)")
    clock = clock if version >= 2 else CLOCK_NS
    if clock not in (CLOCK_NS, CLOCK_TSC):
        _fail(path, f"unknown clock {clock} in the header")
    layers = tuple(name for k, name in enumerate(LAYERS) if mask >> k & 1)
    proc = Process(path=str(path), host=host.split(b"\0")[0].decode("utf-8", "replace"), pid=pid, rank=rank,
                   env_rank=env_rank, layers=layers, events=np.empty(0, EVENTS), monotonic_ns=mono, realtime_ns=real)
    chunks, hint_files, mpi_rank, pos, n = [], [], None, header_bytes, len(data)
    clock_pairs = [(ticks, mono)]
    while pos < n:
        if n - pos < FRAME.size:
            proc.truncated = True
            break
        rtype, rbytes = FRAME.unpack_from(data, pos)
        if rbytes < MIN_BYTES.get(rtype, 1 << 32) or rbytes % 8:  # unknown, or shorter than its fields
            _fail(path, f"corrupt record at byte {pos} (type {rtype}, {rbytes} bytes)")
        if pos + rbytes > n:
            proc.truncated = True  # the process was killed while writing its last record
            break
        if rtype == REC_EVENT:
            if rbytes != EVENT.itemsize:
                _fail(path, f"corrupt event record at byte {pos}")
            k = _event_run(data, pos)
            chunks.append(np.frombuffer(data, EVENT, k, pos))
            pos += k * EVENT.itemsize
            continue
        if rtype == REC_STRING:
            _, _, kind, sid, layer, length = STRING.unpack_from(data, pos)
            if STRING.size + length > rbytes:
                _fail(path, f"corrupt string record at byte {pos}")
            text = _text(data, pos + STRING.size, length)
            if kind == STR_FUNCTION:
                proc.functions[sid] = text
                proc.function_layers[sid] = LAYERS[layer] if layer < len(LAYERS) else "?"
            elif kind == STR_FILE:
                proc.files[sid] = text
            elif kind == STR_VAR:
                proc.variables[sid] = text
        elif rtype == REC_RANK:
            _, _, mpi_rank, proc.world_size = RANK.unpack_from(data, pos)
        elif rtype == REC_HINTS:
            _, _, fid, length, _seq = HINTS.unpack_from(data, pos)
            if HINTS.size + length > rbytes:
                _fail(path, f"corrupt hints record at byte {pos}")
            words = data[pos + HINTS.size:pos + HINTS.size + length].split(b"\0")
            pairs = {words[k].decode("utf-8", "replace"): words[k + 1].decode("utf-8", "replace")
                     for k in range(0, len(words) - 1, 2)}
            hint_files.append((fid, pairs))
        elif rtype == REC_CLOCK:
            clock_pairs.append(CLOCK.unpack_from(data, pos)[2:])
        elif rtype == REC_END:
            _, _, proc.recorded, proc.dropped = END.unpack_from(data, pos)
            proc.complete = True
        pos += rbytes
    if mpi_rank is not None:
        proc.rank = mpi_rank
    for fid, pairs in hint_files:  # resolved now: the file's string may come after its hints
        proc.hints[proc.files.get(fid, f"file#{fid}")] = pairs
    if chunks:
        raw = np.concatenate(chunks)
        events = np.empty(len(raw), EVENTS)
        for name in FIELDS:
            events[name] = raw[name]
        if clock == CLOCK_TSC:
            to_ns = _tick_converter(path, clock_pairs)
            events["start_ns"] = to_ns(events["start_ns"])
            events["end_ns"] = to_ns(events["end_ns"])
        proc.events = events[np.lexsort((events["seq"], events["start_ns"]))]
    return proc


def _tick_converter(path, pairs):
    """ticks -> CLOCK_MONOTONIC ns, piecewise linear between the file's (ticks, ns) pairs (one
    at load, one before every buffer written), extended past either end with the nearest
    segment's slope: NTP slews CLOCK_MONOTONIC, so one line for a long run would drift."""
    t = np.array([p[0] for p in pairs], np.int64)
    ns = np.array([p[1] for p in pairs], np.int64)
    order = np.argsort(t, kind="stable")
    t, ns = t[order], ns[order]
    keep = np.concatenate(([True], np.diff(t) > 0))  # one pair per tick value
    t, ns = t[keep], ns[keep]
    if len(t) < 2:
        _fail(path, "event times are clock ticks but the file has no second clock reading to convert them")
    if np.any(np.diff(ns) < 0):
        _fail(path, "its clock readings do not advance together")

    def to_ns(ticks):
        with np.errstate(all="ignore"):  # a crafted file's values may overflow: checked below
            x = ticks.astype(np.int64) - t[0]  # small integers before any floating point
            xs, ys = (t - t[0]).astype(np.float64), (ns - ns[0]).astype(np.float64)
            k = np.clip(np.searchsorted(xs, x, side="right") - 1, 0, len(xs) - 2)
            slope = (ys[k + 1] - ys[k]) / (xs[k + 1] - xs[k])
            rel = np.rint(ys[k] + (x - xs[k]) * slope)
        if not np.all(np.abs(rel) < 2.0**62):
            _fail(path, "event times far outside its clock readings")
        return ns[0] + rel.astype(np.int64)
    return to_ns


def read(trace_dir):
    """Every trace-*.nmt in trace_dir, as a Trace (processes sorted by host, rank, pid)."""
    try:
        names = sorted(f for f in os.listdir(trace_dir) if f.startswith("trace-") and f.endswith(".nmt"))
    except OSError as e:
        raise NearmetalError(f"cannot read trace directory {trace_dir}: {e.strerror}") from None
    if not names:
        raise NearmetalError(f"no trace files (trace-*.nmt) in {trace_dir}")
    if len(names) > MAX_FILES:
        raise NearmetalError(f"{trace_dir} holds {len(names)} trace files, over the limit of {MAX_FILES}")
    procs, total = [], 0
    for name in names:
        path = os.path.join(trace_dir, name)
        try:
            total += os.lstat(path).st_size  # counted before reading (read_file refuses what is not a file)
        except OSError:
            pass  # read_file says why
        if total > MAX_TOTAL_BYTES:
            raise NearmetalError(f"the trace files in {trace_dir} hold over {MAX_TOTAL_BYTES >> 30} GiB, the limit "
                                 f"for one report")
        procs.append(read_file(path))
    procs.sort(key=lambda p: (p.host, p.rank, p.pid))
    return Trace(directory=str(trace_dir), processes=procs)
