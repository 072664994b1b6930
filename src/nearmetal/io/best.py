"""`nearmetal io best`: the fastest configuration of an I/O sweep, with its statistics, an
MPI-IO hints file and the matching FMS namelist (docs/io-tuning.md).

Metric: `write` = the max-over-ranks write time (gather + all steps, as FMS's mpp_write),
`total` = the max-over-ranks total (open + write + close + read). Per configuration and
variant: the median over the sweep's repetitions, its 95% percentile-bootstrap interval,
and the median write bandwidth. The fastest is compared with the serial reference (its
speed-up, with the bootstrap interval of the ratio of medians, paired by block) and with
the runner-up (is the difference real?).
"""

import json
import re
import sys
from pathlib import Path

import numpy as np

from ..errors import NearmetalError
from ..study import config as study_config
from ..study import stats
from ..study.store import Store
from .space import Configuration, parse_kernel_args, parse_pair
from .sweep import max_rank_values

N_BOOT = 2000
# What a hints file may hold (ROMIO reads "KEY VALUE" lines, split at blanks): a key is a
# name; a value is letters, digits and _ . : * , + = / @ - (enough for cb_config_list "*:2").
_HINT_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HINT_VALUE = re.compile(r"[A-Za-z0-9_.:*,+=/@-]+")


def _records(store, study_id, metric, rank):
    out = {}
    for rec in store.records(study_id):
        if rec["metric"] == metric and json.loads(rec["point_json"]).get("rank") == rank:
            out.setdefault((rec["benchmark"], rec["variant"]), []).append(rec["value"])
    return out


def _hint_records(store, study_id):
    """{(label, variant): {hint key: [0/1 per run]}}"""
    out = {}
    for rec in store.records(study_id):
        if rec["metric"].startswith("hint."):
            key = rec["metric"][len("hint."):]
            out.setdefault((rec["benchmark"], rec["variant"]), {}).setdefault(key, []).append(rec["value"])
    return out


def find_study(store, name=None):
    """The sweep study: the named one, or the only I/O sweep in the database."""
    if name is not None:
        row = store.study(name)
        if row is None:
            raise NearmetalError(f"no study '{name}' in {store.path}")
        return row
    sweeps = []
    for row in store.studies():
        if row["name"].endswith("-preselect"):
            continue
        try:
            cfg = study_config.parse(row["config_toml"], source=row["name"])
        except NearmetalError:
            continue
        if cfg.benchmark and all(b.kernel == "iobench" for b in cfg.benchmark):
            sweeps.append(row)
    if not sweeps:
        raise NearmetalError(f"{store.path} holds no I/O sweep (run: nearmetal io sweep FILE)")
    if len(sweeps) > 1:
        raise NearmetalError(f"{store.path} holds several I/O sweeps ({', '.join(r['name'] for r in sweeps)}): "
                             f"choose one with --study")
    return sweeps[0]


def analyze(store, study_row, metric="total"):
    """Everything `io best` prints, as a JSON-ready dict."""
    cfg = study_config.parse(study_row["config_toml"], source=f"study '{study_row['name']}'")
    sid = study_row["id"]
    benches = {b.label: b for b in cfg.benchmark if b.kernel == "iobench"}
    configs = {}
    for label in benches:
        try:
            configuration = Configuration.from_label(label)
        except ValueError:
            continue  # not written by io sweep: not a configuration
        if configuration.label() == label:  # io sweep writes canonical labels only (one line, single blanks)
            configs[label] = configuration
    if not configs:
        raise NearmetalError(f"study '{study_row['name']}' has no I/O configurations")
    # the compiled study lists the serial reference first
    reference = next((l for l in benches if l in configs and configs[l].pattern == "serial"), None)
    times = max_rank_values(store, sid, f"{metric}_s")
    bandwidth = _records(store, sid, "write_bw", "total")
    hints_seen = _hint_records(store, sid)
    rows = []
    for (label, vid), byblock in times.items():
        if label not in configs:
            continue
        values = list(byblock.values())
        s = stats.summarize(values)
        ci = stats.median_ci(values, n_boot=N_BOOT)
        bw = bandwidth.get((label, vid))
        rows.append({"configuration": label, "variant": vid, "n": s["n"], "median_s": s["median"],
                     "ci_low": ci[0] if ci else None, "ci_high": ci[1] if ci else None, "cv": s["cv"],
                     "write_MBps": float(np.median(bw)) if bw else None, "reference": label == reference})
    if not rows:
        counts = store.counts(sid)
        raise NearmetalError(f"study '{study_row['name']}' has no successful measurement yet "
                             f"({', '.join(f'{k}: {v}' for k, v in sorted(counts.items()))})")
    rows.sort(key=lambda r: (r["median_s"], r["configuration"], r["variant"]))
    best = rows[0]
    vid = best["variant"]
    out = {"study": study_row["name"], "metric": metric, "db": str(store.path), "rows": rows,
           "best": best["configuration"], "variant": vid, "median_s": best["median_s"],
           "ci": [best["ci_low"], best["ci_high"]], "write_MBps": best["write_MBps"],
           "reference": reference, "speedup": None, "speedup_ci": None, "speedup_verdict": None,
           "runner_up": None, "distinguishable": None, "runner_up_comparison": None,
           "hints": parse_kernel_args(benches[best["configuration"]].args)[1],
           "env": dict(benches[best["configuration"]].env), "hints_status": {},
           "layout": parse_kernel_args(benches[best["configuration"]].args)[0].get("-l")}
    mine = times[(best["configuration"], vid)]
    if reference and (reference, vid) in times and reference != best["configuration"]:
        ref = times[(reference, vid)]
        cmp = _compare(ref, mine, cfg.study.margin)
        if cmp["ratio"]:
            out["speedup"] = 1.0 / cmp["ratio"]
            if cmp["ci_low"]:
                out["speedup_ci"] = [1.0 / cmp["ci_high"], 1.0 / cmp["ci_low"]]
        out["speedup_verdict"] = cmp["verdict"]
    elif reference == best["configuration"]:
        out["speedup"], out["speedup_ci"] = 1.0, [1.0, 1.0]
    same_variant = [r for r in rows[1:] if r["variant"] == vid]
    if same_variant:
        second = same_variant[0]
        cmp = _compare(mine, times[(second["configuration"], vid)], cfg.study.margin)
        out["runner_up"] = second["configuration"]
        out["runner_up_comparison"] = {k: cmp[k] for k in ("ratio", "ci_low", "ci_high", "p_value", "test", "verdict")}
        out["distinguishable"] = cmp["verdict"] == "slower"
    for key, seen in hints_seen.get((best["configuration"], vid), {}).items():
        out["hints_status"][key] = "honoured" if all(v >= 1 for v in seen) else (
            "not honoured on this file system" if all(v <= 0 for v in seen) else "honoured in some runs only")
    return out


def _compare(base_byblock, var_byblock, margin):
    pairs = [(base_byblock[b], var_byblock[b]) for b in var_byblock if b in base_byblock]
    return stats.compare(list(base_byblock.values()), list(var_byblock.values()), margin=margin,
                         pairs=pairs if len(pairs) >= 2 else None)


# -- files -------------------------------------------------------------------------------------

def _one_entry_per_line(lines, what):
    """The file's text; refused when a line holds a newline or another control character,
    which would let a value (a study name, a path) start an entry of its own."""
    for line in lines:
        if not line.isprintable():
            raise NearmetalError(f"cannot write the {what}: {line[:60]!r} holds a newline or control character")
    return "\n".join(lines) + "\n"


def hints_file(result, path):
    """A ROMIO hints file ("key value" lines; '#' lines are comments)."""
    for key, value in result["hints"].items():
        if not _HINT_KEY.fullmatch(key) or not _HINT_VALUE.fullmatch(value):
            hint = f"{key}={value}"
            raise NearmetalError(f"cannot write the hints file: hint {hint!r} of '{result['best']}' is not KEY=VALUE "
                                 f"with a name and a value of letters, digits and _ . : * , + = / @ -")
    lines = [f"# MPI-IO hints of the fastest I/O configuration: {result['best']}",
             f"# measured by `nearmetal io best` (study {result['study']}, {result['variant']}, metric {result['metric']})",
             "# MPICH (ROMIO):       ROMIO_HINTS=" + str(Path(path).resolve()) + " mpiexec ...",
             "# Open MPI with ROMIO: mpirun -x OMPI_MCA_io=romio321 -x ROMIO_HINTS=" + str(Path(path).resolve()) + " ...",
             "# Open MPI's default component OMPIO reads no hints file and ignores most ROMIO hints.",
             "# Check what is in effect with ROMIO_PRINT_HINTS=1."]
    for key, status in sorted(result["hints_status"].items()):
        if status != "honoured":
            lines.append(f"# {key}: {status}")
    if not result["hints"]:
        lines.append("# (this configuration sets no MPI-IO hint)")
    lines += [f"{k} {v}" for k, v in result["hints"].items()]
    Path(path).write_text(_one_entry_per_line(lines, "hints file"))


def parse_hints_file(text):
    """{key: value} of a ROMIO hints file."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition(" ")
            out[key] = value.strip()
    return out


def namelist(result):
    """The FMS namelist values matching the fastest configuration (text), with what does not map."""
    cfg = Configuration.from_label(result["best"])
    ix, iy = parse_pair(cfg.io_layout) if cfg.io_layout else (1, 1)
    lines = [f"! FMS namelist values for {cfg.label()} (nearmetal io best, study {result['study']})"]
    parallel = cfg.pattern == "shared"
    notes = []
    if cfg.pattern == "shared" and cfg.library in ("mpiio", "hdf5"):
        notes.append(f"! FMS has no {cfg.library} backend: the nearest is parallel netCDF-4 (HDF5 underneath)")
    if cfg.pattern == "file-per-rank":
        notes.append("! file-per-rank = FMS distributed I/O with one I/O domain per rank: io_layout = the domain layout")
    if cfg.pattern == "io-domains":
        notes.append("! io-domains = FMS distributed I/O: one file per I/O domain (combine with mppnccombine)")
    if cfg.pattern == "serial":
        notes.append("! serial = FMS's default single-file output written by the root PE")
    if cfg.mpiio is not None:
        notes.append(f"! MPI-IO component: export OMPI_MCA_io={cfg.env()['OMPI_MCA_io']} (Open MPI)")
    if result["hints"]:
        notes.append("! MPI-IO hints: not a namelist setting; use the hints file (ROMIO_HINTS)")
    chunked = cfg.chunk not in (None, "default")
    lines += notes
    lines += ["&mpp_io_nml",
              f"  parallel_netcdf = {_flag(parallel)}",
              f"  pnetcdf = {_flag(parallel and cfg.library == 'pnetcdf')}",
              f"  parallel_read = {_flag(cfg.read == 'parallel')}",
              f"  parallel_chunk = {_flag(chunked)}"]
    if chunked:
        cx, cy = parse_pair(cfg.chunk)
        lines.append(f"  chunk_layout = {cx}, {cy}")
    lines.append("/")
    if cfg.pattern == "serial":
        lines.append("! io_layout = 1, 1 (every PE's data to the root: the serial pattern)")
        ix, iy = 1, 1
    elif cfg.pattern == "file-per-rank":
        lines.append("! io_layout = the domain layout (one I/O domain per PE)")
        ix = iy = None
    lines.append("! MOM5: io_layout is in &ocean_model_nml (other FMS components have their own, e.g. &fv_core_nml)")
    lines.append("&ocean_model_nml")
    if ix is None:
        try:
            ix, iy = parse_pair(result["layout"]) if result.get("layout") else ("PX", "PY")
        except ValueError as e:
            raise NearmetalError(f"cannot write the FMS namelist: the study's domain layout (-l): {e}") from None
    lines.append(f"  io_layout = {ix}, {iy}")
    lines.append("/")
    return _one_entry_per_line(lines, "FMS namelist")


def _flag(b):
    return ".true." if b else ".false."


def parse_namelist(text):
    """{(group, key): value} of Fortran namelist text (enough for what namelist() writes)."""
    out, group = {}, None
    for raw in text.splitlines():
        line = raw.split("!", 1)[0].strip()
        if not line:
            continue
        if line.startswith("&"):
            group = line[1:].strip()
        elif line == "/":
            group = None
        elif "=" in line and group:
            key, _, value = line.partition("=")
            out[(group, key.strip())] = value.strip()
    return out


# -- the command -------------------------------------------------------------------------------

def run(db, study=None, metric="total", console=None, as_json=False):
    from rich.console import Console

    # Piped or captured output is not squeezed into 80 columns: configuration labels are long.
    console = console or Console(width=None if sys.stdout.isatty() else 160)
    store = Store(db, readonly=True)  # io best never writes the database
    try:
        row = find_study(store, study)
        result = analyze(store, row, metric)
    finally:
        store.close()
    out_dir = Path(db).parent
    result["hints_file"] = str(out_dir / "best.hints")
    result["namelist_file"] = str(out_dir / "best.nml")
    hints_file(result, result["hints_file"])
    Path(result["namelist_file"]).write_text(namelist(result))
    if as_json:
        print(json.dumps(result, indent=1))
    else:
        render(result, console)
    return result


def _fmt_ci(lo, hi, fmt="{:.4g}"):
    if lo is None:
        return "-"
    return f"[{fmt.format(lo)}, {fmt.format(hi)}]"


def render(result, console):
    from rich.table import Table

    metric = result["metric"]
    table = Table(title=f"{result['study']}: {metric} time, max over ranks (median of the repetitions)",
                  title_justify="left")
    for col in ("#", "configuration", "variant", "n", "median (s)", "95% CI", "write MB/s"):
        table.add_column(col, justify="right" if col in ("#", "n", "median (s)", "write MB/s") else "left")
    for i, r in enumerate(result["rows"], 1):
        name = r["configuration"] + ("  (serial reference)" if r["reference"] else "")
        table.add_row(str(i), name, r["variant"], str(r["n"]), f"{r['median_s']:.4g}",
                      _fmt_ci(r["ci_low"], r["ci_high"]), f"{r['write_MBps']:.1f}" if r["write_MBps"] else "-")
    console.print(table)
    say = lambda m: console.print(m, highlight=False, soft_wrap=True)
    say(f"fastest: [bold]{result['best']}[/] ({result['variant']}): {result['median_s']:.4g} s "
        f"{_fmt_ci(*result['ci'])}" + (f", write {result['write_MBps']:.1f} MB/s" if result["write_MBps"] else ""))
    if result["speedup"] is not None and result["best"] != result["reference"]:
        say(f"speed-up over the serial reference ({result['reference']}): {result['speedup']:.2f}x "
            f"{_fmt_ci(*(result['speedup_ci'] or [None, None]), fmt='{:.2f}')} (95% CI)")
    elif result["best"] == result["reference"]:
        say("the serial reference itself is the fastest: no parallel configuration beat it here")
    if result["runner_up"]:
        c = result["runner_up_comparison"]
        p = f", p = {c['p_value']:.3g}" if c["p_value"] is not None else ""
        if result["distinguishable"]:
            say(f"runner-up {result['runner_up']} is slower: x{c['ratio']:.3f} "
                f"{_fmt_ci(c['ci_low'], c['ci_high'], '{:.3f}')}{p}")
        else:
            say(f"[yellow]not statistically distinguishable from the runner-up[/] {result['runner_up']}: "
                f"x{c['ratio']:.3f} {_fmt_ci(c['ci_low'], c['ci_high'], '{:.3f}')}{p} ({c['verdict']}); "
                f"more repetitions could separate them")
    for key, status in sorted(result["hints_status"].items()):
        if status != "honoured":
            say(f"hint {key}: {status}")
    say(f"MPI-IO hints file: {result['hints_file']}  (ROMIO_HINTS={result['hints_file']}; "
        f"Open MPI: also OMPI_MCA_io=romio321)")
    say(f"FMS namelist: {result['namelist_file']}")
