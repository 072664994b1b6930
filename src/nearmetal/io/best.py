"""`nearmetal io best`: the fastest configuration of an I/O sweep, with its statistics, an
MPI-IO hints file and the matching FMS namelist (docs/io-tuning.md).

The numbers are those of the study's I/O analysis (io.analysis, the one the report's
Parallel I/O section renders): per configuration and variant the median of the max-over-ranks
`write` or `total` time with its 95% bootstrap interval, the median write bandwidth, the
speed-up over the serial reference and the hints not honoured. This module picks the
fastest, compares it with the runner-up, and writes the files.
"""

import json
import re
import sys
from pathlib import Path

from ..errors import NearmetalError
from ..safe_write import write_text
from ..study.plan import study_file
from ..analysis.analyze import analyze as analyze_study
from ..study.store.store import Store
from .analysis import IO_KERNEL
from .space import Configuration, parse_pair

# What a hints file may hold (ROMIO reads "KEY VALUE" lines, split at blanks): a key is a
# name; a value is letters, digits and _ . : * , + = / @ - (enough for cb_config_list "*:2").
_HINT_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HINT_VALUE = re.compile(r"[A-Za-z0-9_.:*,+=/@-]+")
HINT_STATUS = {"all": "not honoured on this file system", "some": "honoured in some runs only", "none": "honoured"}
OMPIO_STATUS = "not read: the runs used Open MPI's OMPIO, which reads no ROMIO hint"


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
            cfg = study_file.parse(row["config_toml"], source=row["name"])
        except NearmetalError:
            continue
        if cfg.benchmark and all(b.kernel == IO_KERNEL for b in cfg.benchmark):
            sweeps.append(row)
    if not sweeps:
        raise NearmetalError(f"{store.path} holds no I/O sweep (run: nearmetal io sweep FILE)")
    if len(sweeps) > 1:
        raise NearmetalError(f"{store.path} holds several I/O sweeps ({', '.join(r['name'] for r in sweeps)}): "
                             f"choose one with --study")
    return sweeps[0]


def hints_status(hints):
    """{hint key: status words} from the analysis' {key: {"runs", "not_honoured"}}."""
    out = {}
    for key, h in hints.items():
        which = "none" if h["not_honoured"] == 0 else ("all" if h["not_honoured"] == h["runs"] else "some")
        out[key] = HINT_STATUS[which]
    return out


def _row(row, group, metric):
    t = row["times"][metric]
    sp = row["speedup"][metric]
    return {"configuration": row["label"], "variant": group["variant"], "n": t["n"], "median_s": t["median"],
            "ci_low": t["ci"][0] if t["ci"] else None, "ci_high": t["ci"][1] if t["ci"] else None, "cv": t["cv"],
            "write_MBps": row["write_bw"], "reference": row["benchmark"] == row["reference"],
            "speedup": sp["value"] if sp else None, "speedup_ci": sp["ci"] if sp else None,
            "vs_baseline": (row.get("vs_baseline") or {}).get(metric), "hints_status": hints_status(row["hints"])}


def _per_variant(found):
    """The fastest row of each variant x placement, in the order of their medians, where the
    sweep has several variants (natively and in containers): each one's own answer, with the
    container's ratio to the same configuration under the baseline variant; [] with one."""
    firsts = {}
    for best, _row_, group in found:  # found is sorted: the first of a group is its fastest
        firsts.setdefault((str(group["variant"]), group["ranks"], group["threads"]), best | {
            "variant": str(group["variant"]), "ranks": group["ranks"], "threads": group["threads"]})
    return list(firsts.values()) if len({v for v, _, _ in firsts}) > 1 else []


def analyze(store, study_row, metric="total", variant=None):
    """Everything `io best` prints, as a JSON-ready dict; `variant` restricts the choice of
    the fastest (and so the files) to one variant."""
    m = f"{metric}_s"
    analysis = analyze_study(store, study_row["name"])
    io = analysis.get("io") or {}
    configurations = io.get("configurations") or {}
    if not configurations:
        raise NearmetalError(f"study '{study_row['name']}' has no I/O configurations")
    found = [(_row(r, g, m), r, g) for g in io["groups"] for r in g["rows"] if r["times"][m]]
    if not found:
        counts = store.counts(study_row["id"])
        raise NearmetalError(f"study '{study_row['name']}' has no successful measurement yet "
                             f"({', '.join(f'{k}: {v}' for k, v in sorted(counts.items()))})")
    found.sort(key=lambda x: (x[0]["median_s"], x[0]["configuration"], x[0]["variant"]))
    per_variant = _per_variant(found)
    if variant is not None:
        known = sorted({str(g["variant"]) for g in io["groups"]})
        if variant not in known:
            raise NearmetalError(f"--variant {variant!r} is not a variant of study '{study_row['name']}' "
                                 f"(its variants: {', '.join(known)})")
        found = [f for f in found if str(f[2]["variant"]) == variant]
        if not found:
            raise NearmetalError(f"variant '{variant}' of study '{study_row['name']}' has no successful "
                                 f"{metric} measurement")
    best, row, group = found[0]
    conf = configurations[row["benchmark"]]
    reference = row["reference"]
    out = {"study": study_row["name"], "metric": metric, "db": str(store.path), "rows": [f[0] for f in found],
           "best": best["configuration"], "variant": best["variant"], "median_s": best["median_s"],
           "ci": [best["ci_low"], best["ci_high"]], "write_MBps": best["write_MBps"],
           "reference": configurations[reference]["label"] if reference else None,
           "speedup": best["speedup"], "speedup_ci": best["speedup_ci"],
           "speedup_verdict": (row["speedup"][m] or {}).get("verdict"),
           "runner_up": None, "distinguishable": None, "runner_up_comparison": None,
           "hints": dict(conf["hints"]), "env": dict(conf["env"]), "hints_status": best["hints_status"],
           "layout": conf["layout"], "vs_baseline": best["vs_baseline"], "chosen_from": variant,
           "per_variant": per_variant}
    # Open MPI's default MPI-IO component, OMPIO, reads no hints file: a hint it did not keep was
    # not read, which says nothing of the file system, and the file is for ROMIO only
    from ..families import get as family, names

    parts = str(best["variant"]).split("/")
    default = next((family(n).default_mpiio for n in names() if n in parts), None)
    chosen = conf["env"].get("OMPI_MCA_io")
    out["ompio"] = default == "ompio" and chosen in (None, "ompio")
    if out["ompio"]:
        out["hints_status"] = {k: OMPIO_STATUS for k in out["hints_status"]}
    if reference == row["benchmark"]:
        out["speedup_ci"] = [1.0, 1.0]  # the reference itself: exactly 1
    second = group["runner_up"][m]
    if second:
        out["runner_up"] = configurations[second["benchmark"]]["label"]
        out["runner_up_comparison"] = second["comparison"]
        out["distinguishable"] = second["distinguishable"]
    return out


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
    write_text(path, _one_entry_per_line(lines, "hints file"), "hints file")


def namelist(result):
    """The FMS namelist values matching the fastest configuration (text), with what does not map."""
    cfg = Configuration.from_label(result["best"])
    ix, iy = parse_pair(cfg.io_layout) if cfg.io_layout else (1, 1)
    lines = [f"! FMS namelist values for {cfg.label()} (nearmetal io best, study {result['study']})"]
    parallel = cfg.pattern == "shared"
    notes = []
    from .libraries import get as get_library

    library = get_library(cfg.library)
    if cfg.pattern == "shared" and library.fms_note:
        notes.append(f"! {library.fms_note}")
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
              f"  pnetcdf = {_flag(parallel and library.fms_pnetcdf)}",
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


def answered_by(path):
    """(study, metric) a hints file written by hints_file() answers, from its header; None."""
    import re

    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            head = f.read(4096)
    except OSError:
        return None
    found = re.search(r"^# measured by `nearmetal io best` \(study (.+), [^,]*, metric (\S+)\)$", head, re.M)
    return (found.group(1), found.group(2)) if found else None


def run(db, study=None, metric="total", console=None, as_json=False, variant=None):
    from ..console import Console

    # Piped or captured output is not squeezed into 80 columns: configuration labels are long.
    console = console or Console(width=None if sys.stdout.isatty() else 160)
    store = Store(db, readonly=True)  # io best never writes the database
    try:
        row = find_study(store, study)
        result = analyze(store, row, metric, variant)
    finally:
        store.close()
    out_dir = Path(db).parent
    result["hints_file"] = str(out_dir / "best.hints")
    result["namelist_file"] = str(out_dir / "best.nml")
    before = answered_by(result["hints_file"])
    if before and before != (result["study"], result["metric"]):  # one pair of files per database: said
        print(f"nearmetal io best: replacing {result['hints_file']} and {result['namelist_file']}, the answer of "
              f"study '{before[0]}' (metric {before[1]}), with that of study '{result['study']}' (metric "
              f"{result['metric']})", file=sys.stderr)
    hints_file(result, result["hints_file"])
    write_text(result["namelist_file"], namelist(result), "namelist file")
    if as_json:
        print(json.dumps(result, indent=1))
    else:
        render(result, console)
    return result


def _fmt_ci(lo, hi, fmt="{:.4g}"):
    if lo is None:
        return "-"
    return f"[{fmt.format(lo)}, {fmt.format(hi)}]"


def _versus(v, short=False):
    """A row's ratio to the same configuration under the baseline variant, in words."""
    if not v or v.get("ratio") is None:
        return "-"
    ci = _fmt_ci(*(v["ci"] or [None, None]), fmt="{:.3f}") if v.get("ci") else ""
    said = f"x{v['ratio']:.3f} {ci}".strip() + (f" {v['verdict']}" if v.get("verdict") else "")
    return said if short else f"{said} against the same configuration under {v['variant']}"


def render(result, console):
    from rich.table import Table

    metric = result["metric"]
    table = Table(title=f"{result['study']}: {metric} time, max over ranks (median of the repetitions)",
                  title_justify="left")
    against = any(r["vs_baseline"] for r in result["rows"])
    # write_bw is the bytes over open + write + close, whichever metric ranks the rows
    columns = ["#", "configuration", "variant", "n", "median (s)", "95% CI", "write MB/s (open+write+close)"]
    columns += ["vs baseline variant"] if against else []
    for col in columns:
        table.add_column(col, justify="left" if col in ("configuration", "variant", "95% CI") else "right")
    for i, r in enumerate(result["rows"], 1):
        name = r["configuration"] + ("  (serial reference)" if r["reference"] else "")
        cells = [str(i), name, r["variant"], str(r["n"]), f"{r['median_s']:.4g}",
                 _fmt_ci(r["ci_low"], r["ci_high"]), f"{r['write_MBps']:.1f}" if r["write_MBps"] else "-"]
        table.add_row(*cells + ([_versus(r["vs_baseline"], short=True)] if against else []))
    console.print(table)
    say = lambda m: console.print(m, highlight=False, soft_wrap=True)
    among = f" among {result['chosen_from']}'s configurations" if result.get("chosen_from") else ""
    say(f"fastest{among}: [bold]{result['best']}[/] ({result['variant']}): {result['median_s']:.4g} s "
        f"{_fmt_ci(*result['ci'])}" + (f", write {result['write_MBps']:.1f} MB/s" if result["write_MBps"] else ""))
    if result["per_variant"]:
        files = (f"the files below are for {result['chosen_from']}'s" if result.get("chosen_from")
                 else "the files below are for the first line; choose another with --variant")
        say(f"fastest in each variant (its own answer; {files})")
        placements = {(p["ranks"], p["threads"]) for p in result["per_variant"]}
        for r in result["per_variant"]:
            where = r["variant"] + (f", {r['ranks']} ranks x {r['threads']} threads" if len(placements) > 1 else "")
            versus = f"; {_versus(r['vs_baseline'])}" if r["vs_baseline"] else ""
            say(f"  {where}: {r['configuration']} {r['median_s']:.4g} s {_fmt_ci(r['ci_low'], r['ci_high'])}{versus}")
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
    if not result["hints"]:
        say(f"MPI-IO hints file: {result['hints_file']}  (the fastest configuration sets no MPI-IO hint)")
    elif result.get("ompio"):
        say(f"MPI-IO hints file: {result['hints_file']}  (for ROMIO: MPICH, or Open MPI with OMPI_MCA_io=romio321; "
            f"the fastest runs used Open MPI's OMPIO, which reads none, so these hints were not what was measured)")
    else:
        say(f"MPI-IO hints file: {result['hints_file']}  (ROMIO_HINTS={result['hints_file']}; "
            f"Open MPI: also OMPI_MCA_io=romio321)")
    say(f"FMS namelist: {result['namelist_file']}")
