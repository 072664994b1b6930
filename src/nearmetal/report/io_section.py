"""The HTML report's parallel-I/O section, for studies with `iobench` benchmarks.

Each iobench benchmark is one I/O configuration (nearmetal.io.space.Configuration): its
name is the configuration's label in an I/O sweep (`nearmetal io sweep`), or, in a regular
study such as the quickstart, an ordinary name whose configuration is read back from the
benchmark's kernel arguments in the study file (-p -L -i -H -c -r, and OMPI_MCA_io in its
env). Figures (drawn by io_plots, each only where the data varies in what it shows):

- time per phase (open, write, close, read: the maximum over ranks) vs io_layout, one
  panel per library (seed 004, Figs. 3-7);
- write bandwidth over aggregators x stripes, one heatmap per library (Figs. 8-9);
- write time over chunk layouts CX x CY with the default-chunk and PnetCDF references
  (Fig. 15);
- per-rank write time of the fastest configuration and of serial (load balance);

and one table per variant x placement: every configuration with its median write and total
time and their 95% CIs, bandwidths, speed-up over serial (same grid) and the hints the MPI
library did not honour. Rows of the figures are variant x placement (at most MAX_ROWS).
docs/reports.md ("Parallel I/O") explains how to read them.
"""

import json
import math
import tomllib
from collections import OrderedDict
from dataclasses import dataclass, fields, replace
from importlib import resources

from . import common as C

IO_KERNEL = "iobench"
PHASES = ("open_s", "write_s", "close_s", "read_s")
MAX_ROWS = 4  # variant x placement rows per figure; the table has them all
N_BOOT = 2000  # bootstrap resamples for the speed-up CIs (stats.compare's default, as io best)
PARAMS = ("pattern", "library", "io_layout", "aggregators", "stripes", "buffer", "chunk", "read", "mpiio")
# Open MPI's OMPI_MCA_io values -> the component names of Configuration.mpiio
_OMPI_IO = {"romio321": "romio", "romio": "romio", "ompio": "ompio"}


@dataclass(frozen=True)
class IOConf:
    """One benchmark's I/O configuration as the report needs it (Configuration's fields,
    normalized: parameters that do not apply are None) and where it came from."""

    pattern: str
    library: str
    io_layout: str | None = None
    aggregators: int | None = None
    stripes: int | None = None
    buffer: int | None = None
    chunk: str | None = None
    read: str = "serial"
    mpiio: str | None = None
    label: str = ""
    grid: str | None = None  # "NXxNYxNZ/STEPS" from the kernel arguments in the study file (None: not known)

    def get(self, name):
        return getattr(self, name)


def _from_configuration(c, grid=None):
    return IOConf(**{f.name: getattr(c, f.name) for f in fields(IOConf) if f.name not in ("label", "grid")},
                  label=c.label(), grid=grid)


def conf_from_label(name):
    """The IOConf a benchmark name names, or None when it is not a configuration label."""
    from ..io.space import Configuration

    try:
        return _from_configuration(Configuration.from_label(name))
    except ValueError:
        return None


def conf_from_args(args, env=None):
    """The IOConf of an nm-iobench argv (without the program), with the kernel's defaults
    for what is not given; None when the arguments do not make a valid configuration."""
    from ..io.space import Configuration, parse_kernel_args, parse_size

    try:
        opts, hints = parse_kernel_args(args)
    except ValueError:
        return None
    pattern = opts.get("-p", "shared")
    library = opts.get("-L", "mpiio" if pattern == "shared" else "posix")
    aggr = hints.get("cb_config_list", "").rpartition(":")[2] or hints.get("cb_nodes")
    try:
        c = Configuration(pattern, library, io_layout=opts.get("-i"),
                          aggregators=int(aggr) if aggr else None,
                          stripes=int(hints["striping_factor"]) if hints.get("striping_factor") else None,
                          buffer=parse_size(hints["cb_buffer_size"]) if hints.get("cb_buffer_size") else None,
                          chunk=opts.get("-c"), read=opts.get("-r", "serial"),
                          mpiio=_OMPI_IO.get((env or {}).get("OMPI_MCA_io", "")))
        c = c.normalize()
    except ValueError:
        return None
    return _from_configuration(c, grid=_grid(opts))


def _grid(opts):
    """'NXxNYxNZ/STEPS' from parsed kernel options, with the kernel's defaults."""
    return "x".join(opts.get(k, d) for k, d in (("-x", "128"), ("-y", "128"), ("-z", "16"))) + "/" + opts.get("-t", "2")


def grid_of(args):
    """The grid and steps an nm-iobench argv asks for ('512x512x8/2')."""
    from ..io.space import parse_kernel_args

    try:
        opts = parse_kernel_args(args)[0]
    except ValueError:
        opts = {}
    return _grid(opts)


def _study_benchmarks(analysis):
    """{benchmark name: (args, env)} from the study file kept in the analysis."""
    text = (analysis.get("study") or {}).get("config_toml") or ""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {}
    out = {}
    for b in data.get("benchmark") or []:
        if isinstance(b, dict) and b.get("kernel") == IO_KERNEL:
            out[b.get("name") or b["kernel"]] = (b.get("args") or [], b.get("env") or {})
    return out


def configurations(analysis):
    """{benchmark: IOConf} for every iobench benchmark of the analysis whose configuration
    is known: from its name (a label) or else from its arguments in the study file."""
    names = list(OrderedDict.fromkeys(p.get("benchmark") for p in analysis.get("points") or []
                                      if C.kernel_base(p.get("kernel")) == IO_KERNEL))
    if not names:
        return {}
    study = _study_benchmarks(analysis)
    out = {}
    for name in names:
        conf = conf_from_label(name)
        if conf is None and name in study:
            conf = conf_from_args(*study[name])
        elif conf is not None and name in study:  # a label names no size: the arguments do
            conf = replace(conf, grid=grid_of(study[name][0]))
        if conf is not None:
            out[name] = conf
    return out


# ---------------------------------------------------------------------- statistics

def median_ci(values):
    """95% CI of the median, as `nearmetal io best` prints it (study.stats.median_ci)."""
    from ..study.stats import median_ci as _median_ci

    return _median_ci(values)


@dataclass
class Measure:
    """One metric at one point of one configuration: median, the values and, where the
    analysis gives them, the block of each value (for paired comparisons); .ci, the 95% CI
    of the median, is computed on first use (most entries are never shown with one)."""

    values: list
    median: float
    blocks: list | None = None
    _ci: tuple | None = None
    _ci_done: bool = False

    @classmethod
    def of(cls, entry):
        vals = [v for v in entry.get("values") or [] if C.is_num(v)]
        med = C.median_of(entry)
        if med is None:
            return None
        blocks = entry.get("blocks")
        if not isinstance(blocks, list) or len(blocks) != len(entry.get("values") or []) or len(vals) != len(blocks):
            blocks = None
        return cls(vals, med, blocks)

    @property
    def ci(self):
        if not self._ci_done:
            self._ci, self._ci_done = median_ci(self.values), True
        return self._ci


@dataclass
class Cell:
    """One configuration measured under one variant and placement."""

    bench: str
    conf: IOConf
    max: dict      # phase metric -> Measure (rank "max")
    ranks: dict    # rank (int) -> {metric: Measure}
    total: dict    # rank "total" metrics (write_bw, read_bw, bytes, files, hint.*) -> Measure

    def time(self, metric="write_s"):
        m = self.max.get(metric)
        return m.median if m else None


def _rank_key(r):
    if isinstance(r, bool):
        return None
    if isinstance(r, int):
        return r
    if isinstance(r, str) and r.isdigit():
        return int(r)
    return r


def collect(analysis, confs):
    """{(variant, ranks, threads): {benchmark: Cell}} in variant display order."""
    cells = OrderedDict()
    for p in analysis.get("points") or []:
        bench = p.get("benchmark")
        if bench not in confs:
            continue
        m = Measure.of(p)
        if m is None:
            continue
        key = (p.get("variant"), p.get("ranks"), p.get("threads"))
        cell = cells.setdefault(key, OrderedDict()).get(bench)
        if cell is None:
            cell = cells[key][bench] = Cell(bench, confs[bench], {}, {}, {})
        rank = _rank_key((p.get("point") or {}).get("rank"))
        metric = p.get("metric")
        if rank == "max":
            cell.max[metric] = m
        elif rank == "total":
            cell.total[metric] = m
        elif isinstance(rank, int):
            cell.ranks.setdefault(rank, {})[metric] = m
    order = C.variant_order(analysis)
    return OrderedDict(sorted(cells.items(), key=lambda kv: (order.get(kv[0][0], 1e9), kv[0][1] or 0, kv[0][2] or 0)))


def best_cell(cells, metric="write_s"):
    timed = [c for c in cells if c.time(metric) is not None]
    return min(timed, key=lambda c: (c.time(metric), c.bench)) if timed else None


def serial_cell(cells, near=None):
    """The serial reference among cells (the same grid as `near` where grids are known)."""
    serial = [c for c in cells if c.conf.pattern == "serial" and c.time() is not None
              and (near is None or c.conf.grid == near.conf.grid)]
    return best_cell(serial)


def speedup(serial, cell, metric):
    """(speed-up, ci) of cell over serial in metric: serial median / cell median with the
    bootstrap CI of stats.compare, paired by randomized block where the analysis says which
    block each value came from (as `nearmetal io best` does), unpaired otherwise."""
    a, b = serial.max.get(metric), cell.max.get(metric)
    if not a or not b or b.median <= 0:
        return None, None
    if cell is serial:
        return 1.0, None
    from ..study import stats

    if len(a.values) >= 2 and len(b.values) >= 2 and min(a.values) > 0 and min(b.values) > 0:
        pairs = None
        if a.blocks is not None and b.blocks is not None:
            mine = {json.dumps(k): v for k, v in zip(b.blocks, b.values)}
            pairs = [(v, mine[json.dumps(k)]) for k, v in zip(a.blocks, a.values) if json.dumps(k) in mine]
        c = stats.compare(a.values, b.values, n_boot=N_BOOT, pairs=pairs if pairs and len(pairs) >= 2 else None)
        ci = (1 / c["ci_high"], 1 / c["ci_low"]) if C.is_num(c.get("ci_low")) and C.is_num(c.get("ci_high")) else None
        return a.median / b.median, ci
    return a.median / b.median, None


def hints_not_honoured(cell):
    """'striping_factor' for a hint record that is 0 in every run; 'cb_nodes (2/5 runs)'
    where only some runs did not honour it."""
    out = []
    for metric, m in sorted(cell.total.items()):
        if not metric.startswith("hint."):
            continue
        bad = sum(1 for v in m.values if v < 0.5)
        if bad:
            key = metric.removeprefix("hint.")
            out.append(key if bad == len(m.values) else f"{key} ({bad}/{len(m.values)} runs)")
    return out


# ---------------------------------------------------------------------- slices for the figures

def _distance(a, b, free):
    """How many parameters (other than `free`) two configurations differ in."""
    return sum(1 for name in PARAMS if name not in free and a.get(name) != b.get(name))


def slice_through(cells, ref, free):
    """For every value of the `free` parameters among cells, the cell closest to `ref` in the
    other parameters (fewest differences, then the fastest write): the configurations drawn
    against the free parameters, the others held as in the reference where measured."""
    out = {}
    for c in cells:
        k = tuple(c.conf.get(n) for n in free)
        cand = (_distance(c.conf, ref.conf, free), c.time() if c.time() is not None else math.inf, c.bench)
        if k not in out or cand < out[k][0]:
            out[k] = (cand, c)
    return {k: v[1] for k, v in out.items()}


def held_fixed(cells, free):
    """Words for the parameters that are the same across cells (besides free): 'read serial, mpiio romio'."""
    bits = []
    for name in PARAMS:
        if name in free or name in ("pattern", "library"):
            continue
        vals = {c.conf.get(name) for c in cells}
        if len(vals) == 1 and None not in vals:
            v = vals.pop()
            bits.append(f"{name} {C.fmt_size(v).replace(' ', '') if name == 'buffer' else v}")
    return ", ".join(bits)


def _pair_key(text):
    if text is None:
        return (0, 0, 0)
    try:
        a, b = (int(x) for x in str(text).split("x"))
        return (1, a * b, a)
    except ValueError:
        return (2, 0, str(text))


def _num_key(v):
    return (0, 0) if v is None else (1, v)


def _measure_d(m):
    return None if m is None else {"median": m.median, "ci": m.ci, "n": len(m.values)}


def phase_panels(cells):
    """{library: [(x label, pattern, {phase: measure dict})]} where a library has two or more
    x positions: (pattern, io_layout) in the slice through the library's fastest write."""
    out = OrderedDict()
    for lib in ("posix", "mpiio", "pnetcdf", "netcdf4", "hdf5"):
        mine = [c for c in cells if c.conf.library == lib and any(c.max.get(ph) for ph in PHASES)]
        ref = best_cell(mine)
        if ref is None:
            continue
        sl = slice_through(mine, ref, ("pattern", "io_layout"))
        if len(sl) < 2:
            continue
        order = {p: i for i, p in enumerate(("serial", "file-per-rank", "io-domains", "shared"))}
        xs = []
        for (pattern, layout), c in sorted(sl.items(), key=lambda kv: (order.get(kv[0][0], 9), _pair_key(kv[0][1]))):
            label = pattern if layout is None else f"{pattern}\n{layout}"
            xs.append((label, pattern, {ph: _measure_d(c.max.get(ph)) for ph in PHASES}))
        out[lib] = {"xs": xs, "fixed": held_fixed(list(sl.values()), ("pattern", "io_layout"))}
    return out


def bw_panels(cells):
    """{library: {aggr, stripes, values[i][j] (MB/s median or None), fixed}} for the shared
    MPI-IO libraries with two or more (aggregators, stripes) cells in the slice through the
    library's highest write bandwidth."""
    out = OrderedDict()
    for lib in ("mpiio", "pnetcdf", "netcdf4", "hdf5"):
        mine = [c for c in cells if c.conf.library == lib and c.conf.pattern == "shared" and c.total.get("write_bw")]
        if not mine:
            continue
        ref = max(mine, key=lambda c: (c.total["write_bw"].median, c.bench))
        sl = slice_through(mine, ref, ("aggregators", "stripes"))
        if len(sl) < 2:
            continue
        aggr = sorted({k[0] for k in sl}, key=_num_key)
        stripes = sorted({k[1] for k in sl}, key=_num_key)
        values = [[sl[(a, s)].total["write_bw"].median if (a, s) in sl else None for a in aggr] for s in stripes]
        out[lib] = {"aggr": aggr, "stripes": stripes, "values": values,
                    "fixed": held_fixed(list(sl.values()), ("aggregators", "stripes"))}
    return out


def chunk_panels(cells, metric="write_s"):
    """{library: {cx, cy, values[i][j] (median s or None), refs [(name, median)], fixed}} for
    netcdf4/hdf5 with two or more CXxCY chunk layouts in the slice through the library's
    fastest chunked write; references: the library's default chunking and PnetCDF
    (contiguous) and HDF5's default (contiguous) closest to that configuration."""
    out = OrderedDict()
    for lib in ("netcdf4", "hdf5"):
        mine = [c for c in cells if c.conf.library == lib and c.time(metric) is not None]
        chunked = [c for c in mine if c.conf.chunk not in (None, "default")]
        ref = best_cell(chunked, metric)
        if ref is None:
            continue
        sl = {k[0]: c for k, c in slice_through(chunked, ref, ("chunk",)).items()}
        if len(sl) < 2:
            continue
        pairs = {k: tuple(int(x) for x in k.split("x")) for k in sl}
        cx = sorted({p[0] for p in pairs.values()})
        cy = sorted({p[1] for p in pairs.values()})
        by = {pairs[k]: c for k, c in sl.items()}
        values = [[by[(x, y)].time(metric) if (x, y) in by else None for x in cx] for y in cy]
        refs = []
        own = "hdf5 contiguous (default)" if lib == "hdf5" else f"{lib} default chunks"
        candidates = [(own, lib, "default"), ("pnetcdf contiguous", "pnetcdf", None)]
        if lib != "hdf5":  # hdf5's own default is already the first reference
            candidates.append(("hdf5 contiguous (default)", "hdf5", "default"))
        for name, lib2, chunk in candidates:
            cand = [c for c in cells if c.conf.library == lib2 and c.conf.chunk == chunk and c.time(metric) is not None]
            near = slice_through(cand, ref, ("library", "chunk")) if cand else {}
            if near:
                c = next(iter(near.values()))
                refs.append((name, c.time(metric)))
        out[lib] = {"cx": cx, "cy": cy, "values": values, "refs": refs,
                    "fixed": held_fixed(list(sl.values()), ("chunk",))}
    return out


def balance_panels(cells, metric="write_s"):
    """[(title, [(rank, measure dict)])] for the fastest configuration and serial, where the
    run has per-rank values for two or more ranks."""
    best = best_cell(cells, metric)
    serial = serial_cell(cells, best) if best is not None else None
    out = []
    for what, c in (("fastest", best), ("serial", serial)):
        if c is None or (what == "serial" and c is best):
            continue
        ranks = sorted((r, _measure_d(ms.get(metric))) for r, ms in c.ranks.items() if ms.get(metric))
        if len(ranks) >= 2:
            out.append((f"{what}: {c.conf.label}", ranks))
    return out


# ---------------------------------------------------------------------- the section

def _row_title(key, style, multi_pl):
    vid, ranks, threads = key
    t = style.label(vid) if style is not None else vid
    return f"{t} · {C.fmt_placement(ranks, threads)}" if multi_pl else t


def _fmt_ci(m):
    if m is None:
        return "—"
    s = C.fmt_num(m.median)
    if m.ci:
        s += f" [{C.fmt_num(m.ci[0])}–{C.fmt_num(m.ci[1])}]"
    return s


def _fmt_speedup(v, ci):
    if v is None:
        return "—"
    s = f"{v:.2f}×"
    if ci:
        s += f" [{ci[0]:.2f}–{ci[1]:.2f}]"
    return s


def table_rows(cells):
    """The table of one variant x placement: every configuration, fastest write first."""
    best = best_cell(cells)
    several_grids = len({c.conf.grid for c in cells}) > 1  # benchmarks of a regular study may differ in size
    rows = []
    for c in sorted(cells, key=lambda c: (c.time() is None, c.time() or 0, c.bench)):
        serial = serial_cell(cells, c)
        sw, swci = speedup(serial, c, "write_s") if serial else (None, None)
        st, stci = speedup(serial, c, "total_s") if serial else (None, None)
        files = c.total.get("files")
        rows.append({
            "label": c.conf.label + (f" grid={c.conf.grid}" if several_grids and c.conf.grid else ""),
            "bench": c.bench if c.bench != c.conf.label else "",
            "best": c is best, "serial": c.conf.pattern == "serial",
            "n": len(c.max["write_s"].values) if c.max.get("write_s") else 0,
            "write": _fmt_ci(c.max.get("write_s")), "total": _fmt_ci(c.max.get("total_s")),
            "write_bw": C.fmt_num(c.total["write_bw"].median) if c.total.get("write_bw") else "—",
            "read_bw": C.fmt_num(c.total["read_bw"].median) if c.total.get("read_bw") else "—",
            "files": f"{files.median:g}" if files else "—",
            "speedup_write": _fmt_speedup(sw, swci), "speedup_total": _fmt_speedup(st, stci),
            "hints": ", ".join(hints_not_honoured(c)) or "—",
        })
    return rows


class Section:
    """What the I/O section shows: figure jobs for html.draw and the tables (computed on
    first use, so that they are built while the figures draw in worker processes)."""

    def __init__(self):
        self.jobs = []      # (section "io", plots function, args)
        self.notes = []
        self.groups = []    # (row title, [Cell]) for the tables
        self._tables = None

    def __bool__(self):
        return bool(self.groups)

    @property
    def tables(self):
        if self._tables is None:
            self._tables = [{"title": t, "rows": table_rows(cells)} for t, cells in self.groups]
        return self._tables


def plan(analysis, style, fid):
    """The I/O section of an analysis: Section (empty when the study has no iobench
    benchmark with a known configuration). fid() gives figure ids."""
    from . import io_plots

    sec = Section()
    confs = configurations(analysis)
    if not confs:
        return sec
    data = collect(analysis, confs)
    unknown = sorted({p.get("benchmark") for p in analysis.get("points") or []
                      if C.kernel_base(p.get("kernel")) == IO_KERNEL} - set(confs))
    if unknown:
        sec.notes.append("Configuration unknown (not a label, no arguments in the study file), left out: "
                         + ", ".join(unknown) + ".")
    multi_pl = len({(k[1], k[2]) for k in data}) > 1
    keys = list(data)
    shown = keys[:MAX_ROWS]
    if len(keys) > len(shown):
        sec.notes.append(f"Figures show {len(shown)} of {len(keys)} variant × placement rows (the first in display "
                         "order); the tables have them all.")
    titles = {k: _row_title(k, style, multi_pl) for k in keys}
    sec.groups = [(titles[k], list(data[k].values())) for k in keys]
    cells = {k: list(data[k].values()) for k in shown}
    phases = [(titles[k], phase_panels(cells[k])) for k in shown]
    if any(p for _, p in phases):
        sec.jobs.append(("io", io_plots.phase_times, (fid(), [(t, p) for t, p in phases if p])))
    bws = [(titles[k], bw_panels(cells[k])) for k in shown]
    if any(p for _, p in bws):
        sec.jobs.append(("io", io_plots.bw_heatmaps, (fid(), [(t, p) for t, p in bws if p])))
    chunks = [(titles[k], chunk_panels(cells[k])) for k in shown]
    if any(p for _, p in chunks):
        sec.jobs.append(("io", io_plots.chunk_grid, (fid(), [(t, p) for t, p in chunks if p])))
    bal = [(titles[k], balance_panels(cells[k])) for k in shown]
    if any(p for _, p in bal):
        sec.jobs.append(("io", io_plots.load_balance, (fid(), [(t, p) for t, p in bal if p])))
    return sec


def render(sec, figures):
    """The section's HTML (a string for the page template), or '' when it is empty."""
    if not sec:
        return ""
    import jinja2

    text = resources.files(__package__).joinpath("templates/io_section.html").read_text(encoding="utf-8")
    env = jinja2.Environment(autoescape=True, trim_blocks=True, lstrip_blocks=True)
    return env.from_string(text).render(figures=figures, tables=sec.tables, notes=sec.notes)


__all__ = ["IOConf", "configurations", "conf_from_args", "conf_from_label", "median_ci", "plan", "render"]
