"""The one analysis of a study's I/O configurations, shared by `nearmetal io best` and the
report's Parallel I/O section (docs/io-tuning.md, "One analysis, two views").

Every `iobench` benchmark is one I/O configuration: its name is the configuration's label
(canonical, as `nearmetal io sweep` writes it), or an ordinary name whose configuration is
read from the benchmark's kernel arguments in the study file (-p -L -i -H -c -r, and
OMPI_MCA_io in its env). A name that reads as a label but is not canonical (a newline, two
blanks) is neither, and is left out: it never reaches a hints file.

analyze(points, config_toml, margin) takes the analysis dict's points (analysis.analyze) and
returns a JSON-ready dict, one group per variant x placement:

    {"configurations": {benchmark: {pattern, library, ..., label, grid, hints, env, layout}},
     "unknown": [measured benchmarks whose configuration is unknown],
     "groups": [{"variant", "ranks", "threads", "rows": [...], "best": {"write_s", "total_s"},
                 "runner_up": {...}, "figures": {...} (figure_data.py)}]}

The rules, one set for every view:

- time = the maximum over ranks of each run (rank "max"), summarized by the median of the
  repetitions with its 95% percentile-bootstrap CI (stats.median_ci: 2000 resamples, seed 0);
- the fastest: the smallest median (ties: the benchmark name);
- the serial reference of a row: the first serial configuration in the study file's order
  with the same grid, in the same variant x placement;
- speed-up = 1 / ratio of stats.compare(reference, row, margin=the study's margin, paired by
  randomized block where 2 or more blocks hold both), its 95% CI inverted accordingly; the
  reference's own speed-up is 1;
- the runner-up is distinguishable when stats.compare(best, runner-up) calls it `slower`;
- a run did not honour a hint when its `hint.<key>` record is below HONOURED_AT.
"""

import json
import math
import tomllib
from dataclasses import dataclass, field, fields, replace

from .. import kernels
from ..analysis import stats
from .figure_data import figures
from .space import Configuration, parse_kernel_args, parse_size

IO_KERNEL = "iobench"
TIMES = ("write_s", "total_s")  # the max-over-ranks times every view ranks and compares by
N_BOOT = 2000  # bootstrap resamples of every CI here (stats.compare's default)
DEFAULT_MARGIN = 0.03  # the study default; only the verdicts of comparisons depend on it
# nm-iobench records hint.<key> = 1 when the MPI library kept the hint, 0 when it dropped it
HONOURED_AT = 0.5
# Open MPI's OMPI_MCA_io values -> the component names of Configuration.mpiio
_OMPI_IO = {"romio321": "romio", "romio": "romio", "ompio": "ompio"}


# ---------------------------------------------------------------------- configurations

@dataclass(frozen=True)
class IOConf:
    """One benchmark's configuration (Configuration's fields, normalized: parameters that do
    not apply are None), its label and, from the kernel arguments, its grid."""

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
    grid: str | None = None  # "NXxNYxNZ/STEPS" (None: no arguments in the study file)

    def get(self, name):
        return getattr(self, name)


def _from_configuration(c, grid=None):
    return IOConf(**{f.name: getattr(c, f.name) for f in fields(IOConf) if f.name not in ("label", "grid")},
                  label=c.label(), grid=grid)


def _parses_as_label(name):
    try:
        Configuration.from_label(name)
    except ValueError:
        return False
    return True


def conf_from_label(name):
    """The IOConf a benchmark name names, or None when it is not a canonical label."""
    try:
        c = Configuration.from_label(name)
    except ValueError:
        return None
    return _from_configuration(c) if c.label() == name else None


def conf_from_args(args, env=None):
    """The IOConf of an nm-iobench argv (without the program), with the kernel's defaults
    for what is not given; None when the arguments do not make a valid configuration."""
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


def _kernel_options(args):
    try:
        return parse_kernel_args(args)
    except ValueError:
        return {}, {}


def grid_of(args):
    """The grid and steps an nm-iobench argv asks for ('512x512x8/2')."""
    return _grid(_kernel_options(args)[0])


def study_benchmarks(config_toml):
    """{benchmark name: (args, env)} of the study file's iobench benchmarks, in file order."""
    try:
        data = tomllib.loads(config_toml or "")
    except tomllib.TOMLDecodeError:
        return {}
    out = {}
    for b in data.get("benchmark") or []:
        if isinstance(b, dict) and b.get("kernel") == IO_KERNEL:
            out[b.get("name") or b["kernel"]] = (b.get("args") or [], b.get("env") or {})
    return out


def configuration_of(name, args_env=None):
    """The IOConf of one benchmark: its name when that is a canonical label (grid from its
    arguments), else its arguments when the name is not a label at all; None otherwise."""
    conf = conf_from_label(name)
    if conf is not None:
        return conf if args_env is None else replace(conf, grid=grid_of(args_env[0]))
    if args_env is None or _parses_as_label(name):
        return None
    return conf_from_args(*args_env)


def configurations(config_toml, names=()):
    """{benchmark: IOConf} for the study file's iobench benchmarks and the other `names`
    (measured ones), in that order, where the configuration is known."""
    study = study_benchmarks(config_toml)
    out = {}
    for name in list(study) + [n for n in names if n not in study]:
        conf = configuration_of(name, study.get(name))
        if conf is not None:
            out[name] = conf
    return out


def _configuration_dict(conf, args_env):
    args, env = args_env or ([], {})
    opts, hints = _kernel_options(args)
    return {**conf.__dict__, "hints": hints, "env": dict(env), "layout": opts.get("-l")}


# ---------------------------------------------------------------------- measurements

def median_ci(values):
    """95% CI of the median (analysis.stats.median_ci with N_BOOT resamples, seed 0)."""
    return stats.median_ci(values, n_boot=N_BOOT)


def _is_num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


@dataclass
class Measure:
    """One metric at one point of one configuration: the median, the values and, where the
    analysis gives them, the block of each value (for paired comparisons); .ci, the 95% CI of
    the median, is computed on first use (most entries are never shown with one)."""

    values: list
    median: float
    blocks: list | None = None
    cv: float | None = None
    _ci: tuple | None = None
    _ci_done: bool = False

    @classmethod
    def of(cls, entry):
        vals = [v for v in entry.get("values") or [] if _is_num(v)]
        s = entry.get("stats") or {}
        med = s.get("median") if _is_num(s.get("median")) else None
        if med is None:
            return None
        blocks = entry.get("blocks")
        if not isinstance(blocks, list) or len(blocks) != len(entry.get("values") or []) or len(vals) != len(blocks):
            blocks = None
        return cls(vals, med, blocks, s.get("cv") if _is_num(s.get("cv")) else None)

    @property
    def ci(self):
        if not self._ci_done:
            self._ci, self._ci_done = median_ci(self.values), True
        return self._ci

    def as_dict(self):
        return {"n": len(self.values), "median": self.median, "ci": list(self.ci) if self.ci else None, "cv": self.cv}


@dataclass
class Cell:
    """One configuration measured under one variant and placement."""

    bench: str
    conf: IOConf
    max: dict      # metric -> Measure at rank "max" (the times)
    ranks: dict    # rank (int) -> {metric: Measure}
    total: dict    # rank "total" metrics (write_bw, read_bw, bytes, files, hint.*) -> Measure
    against: dict = field(default_factory=dict)  # time metric -> the point's comparison with its baseline variant

    def time(self, metric="write_s"):
        m = self.max.get(metric)
        return m.median if m else None


def _rank_key(r):
    if isinstance(r, bool):
        return None
    if isinstance(r, str) and r.isdigit():
        return int(r)
    return r


def collect(points, confs):
    """{(variant, ranks, threads): {benchmark: Cell}} from the analysis points."""
    cells = {}
    for p in points:
        bench = p.get("benchmark")
        if bench not in confs:
            continue
        m = Measure.of(p)
        if m is None:
            continue
        key = (p.get("variant"), p.get("ranks"), p.get("threads"))
        cell = cells.setdefault(key, {}).get(bench)
        if cell is None:
            cell = cells[key][bench] = Cell(bench, confs[bench], {}, {}, {})
        rank = _rank_key((p.get("point") or {}).get("rank"))
        if rank == "max":
            cell.max[p.get("metric")] = m
            if p.get("baseline") and p.get("comparison"):
                cell.against[p.get("metric")] = (p["baseline"], p["comparison"])
        elif rank == "total":
            cell.total[p.get("metric")] = m
        elif isinstance(rank, int):
            cell.ranks.setdefault(rank, {})[p.get("metric")] = m
    return cells


# ---------------------------------------------------------------------- the rules

def fastest(cells, metric="write_s"):
    timed = [c for c in cells if c.time(metric) is not None]
    return min(timed, key=lambda c: (c.time(metric), c.bench)) if timed else None


def reference_of(cell, cells, order):
    """The serial reference of `cell`: the first serial configuration in study order with
    the same grid among cells."""
    serial = [c for c in cells if c.conf.pattern == "serial" and c.conf.grid == cell.conf.grid]
    return min(serial, key=lambda c: (order.get(c.bench, math.inf), c.bench)) if serial else None


def compare_cells(base, cell, metric, margin=DEFAULT_MARGIN):
    """stats.compare(base, cell) of one metric, paired by block where 2 or more blocks hold
    both; None where either lacks the metric."""
    a, b = base.max.get(metric), cell.max.get(metric)
    if not a or not b or not a.values or not b.values:
        return None
    pairs = None
    if a.blocks is not None and b.blocks is not None:
        mine = {json.dumps(k): v for k, v in zip(b.blocks, b.values)}
        pairs = [(v, mine[json.dumps(k)]) for k, v in zip(a.blocks, a.values) if json.dumps(k) in mine]
    try:
        return stats.compare(a.values, b.values, margin=margin, n_boot=N_BOOT,
                             pairs=pairs if pairs and len(pairs) >= 2 else None)
    except ValueError:
        return None


def speedup(reference, cell, metric, margin=DEFAULT_MARGIN):
    """{"value", "ci", "verdict"}: the speed-up of cell over its reference in metric (None
    where either lacks it); the reference's own is 1, without a CI."""
    if reference is None or cell.max.get(metric) is None or reference.max.get(metric) is None:
        return None
    if cell is reference:
        return {"value": 1.0, "ci": None, "verdict": None}
    c = compare_cells(reference, cell, metric, margin)
    if c is None or not c["ratio"]:
        return None
    ci = [1 / c["ci_high"], 1 / c["ci_low"]] if c["ci_low"] and c["ci_high"] else None
    return {"value": 1 / c["ratio"], "ci": ci, "verdict": c["verdict"]}


def hint_counts(cell):
    """{hint key: {"runs": n, "not_honoured": k}} from the cell's hint.<key> records."""
    out = {}
    for metric, m in sorted(cell.total.items()):
        if metric.startswith("hint."):
            out[metric.removeprefix("hint.")] = {"runs": len(m.values),
                                                 "not_honoured": sum(1 for v in m.values if v < HONOURED_AT)}
    return out


def _median(m):
    return m.median if m else None


def versus_baseline(cell, metric):
    """{"variant", "ratio", "ci", "verdict"}: the same configuration under the study's
    baseline variant (a container against native), as the analysis compared them; None in
    the baseline variant itself."""
    if metric not in cell.against:
        return None
    bid, c = cell.against[metric]
    ci = [c["ci_low"], c["ci_high"]] if c.get("ci_low") is not None and c.get("ci_high") is not None else None
    return {"variant": bid, "ratio": c.get("ratio"), "ci": ci, "verdict": c.get("verdict")}


def _row(cell, reference, margin):
    return {"benchmark": cell.bench, "label": cell.conf.label, "grid": cell.conf.grid,
            "times": {t: cell.max[t].as_dict() if cell.max.get(t) else None for t in TIMES},
            "write_bw": _median(cell.total.get("write_bw")), "read_bw": _median(cell.total.get("read_bw")),
            "files": _median(cell.total.get("files")),
            "reference": reference.bench if reference else None,
            "speedup": {t: speedup(reference, cell, t, margin) for t in TIMES},
            "vs_baseline": {t: versus_baseline(cell, t) for t in TIMES},
            "hints": hint_counts(cell)}


def _runner_up(best, cells, metric, margin):
    others = [c for c in cells if c is not best]
    second = fastest(others, metric)
    if best is None or second is None:
        return None
    c = compare_cells(best, second, metric, margin)
    keep = ("ratio", "ci_low", "ci_high", "p_value", "test", "verdict")
    return {"benchmark": second.bench, "comparison": {k: c[k] for k in keep} if c else None,
            "distinguishable": bool(c) and c["verdict"] == "slower"}


def _group(key, cells, order, margin):
    cells = list(cells)
    refs = {c.bench: reference_of(c, cells, order) for c in cells}
    rows = sorted(cells, key=lambda c: (c.time() is None, c.time() or 0, c.bench))
    best = {t: fastest(cells, t) for t in TIMES}
    vid, ranks, threads = key
    return {"variant": vid, "ranks": ranks, "threads": threads,
            "rows": [_row(c, refs[c.bench], margin) for c in rows],
            "best": {t: b.bench if b else None for t, b in best.items()},
            "runner_up": {t: _runner_up(best[t], cells, t, margin) for t in TIMES},
            "figures": figures(cells, best["write_s"], refs.get(best["write_s"].bench) if best["write_s"] else None)}


def analyze(points, config_toml="", margin=DEFAULT_MARGIN):
    """The I/O analysis of a study (module docstring), or None when it has no iobench
    benchmark in its points or study file."""
    measured = list(dict.fromkeys(p.get("benchmark") for p in points
                                 if kernels.traits(p.get("kernel")).shape == "io"))
    study = study_benchmarks(config_toml)
    if not measured and not study:
        return None
    confs = configurations(config_toml, measured)
    order = {name: i for i, name in enumerate(confs)}
    cells = collect([p for p in points if p.get("benchmark") in confs], confs)
    margin = margin if _is_num(margin) else DEFAULT_MARGIN
    groups = [_group(k, cells[k].values(), order, margin)
              for k in sorted(cells, key=lambda k: (str(k[0]), k[1] or 0, k[2] or 0))]
    return {"configurations": {n: _configuration_dict(c, study.get(n)) for n, c in confs.items()},
            "unknown": sorted(set(measured) - set(confs)), "groups": groups}
