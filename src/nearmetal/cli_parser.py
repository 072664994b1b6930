"""The argparse definition of nearmetal's command line: help, validation and error messages.

argparse (standard library) rather than click: it imports faster, and `nearmetal run`
sits in front of every MPI launch. Even so, argparse pulls in `re` (~6 ms here), so a
well-formed `run` command line is parsed by cli.fast_parse_run and only falls back to
this parser for help and errors; tests check that both agree.
"""

import argparse
import os
import sys

# Every choice list comes from the backends' registries (choices.py, registry.py).
from .choices import distros as _distros
from .choices import image_formats as _formats
from .choices import modes as _modes
from .choices import mpis as _mpis
from .choices import networks as _networks
from .choices import report_formats as _report_formats
from .choices import runtimes as _runtimes
from .choices import schedulers as _schedulers
from .errors import NearmetalError  # noqa: F401  (re-exported for callers)


def _formatter(prog):
    # An explicit width keeps argparse from importing shutil (and bz2, lzma) on every start.
    try:
        width = os.get_terminal_size(sys.stderr.fileno()).columns - 2
    except (OSError, ValueError):
        width = 78
    return argparse.HelpFormatter(prog, width=max(width, 40))


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _formatter)
        super().__init__(*args, **kwargs)

    def error(self, message):
        # One line, no usage dump: the user sees what was wrong and where to look (a bad
        # value quoted in the message may hold a newline: escaped).
        from .study.config.inputs import one_line

        self.exit(2, one_line(f"{self.prog}: error: {message} (see {getattr(self, 'see_help', self.prog + ' --help')})")
                  + "\n")


def _env_pair(text):
    key, sep, value = text.partition("=")
    if not sep or not key or not key.replace("_", "a").isalnum() or key[0].isdigit():
        raise argparse.ArgumentTypeError(f"expected K=V with a variable name K, got '{text}'")
    return key, value


def study_name_arg(text):
    """--study: checked as a study file's [study] name is (it may name a directory)."""
    from .study.config.fields import study_name_problem

    problem = study_name_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(f"'{text[:80]}': {problem}")
    return text


def _positive(text, limit=None):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got '{text[:60]}'")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    if limit is not None and value > limit:
        raise argparse.ArgumentTypeError(f"must be at most {limit}, got {str(value)[:40]}")
    return value


def _at_most(limit):
    """_positive with an upper bound: beyond it a count is a typo (the limits of study files)."""
    def parse(text):
        return _positive(text, limit)
    return parse


# As in study files (study/config/config.py): ranks, threads, and a timeout of at most a week.
_RANKS, _THREADS, _TIMEOUT = _at_most(1_000_000), _at_most(1024), _at_most(7 * 24 * 3600)


def _size(text):
    """A size in bytes: 5000, 512K, 300M, 64G, 1T (powers of 1024)."""
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    body = text.strip().upper().removesuffix("IB").removesuffix("B")
    unit = body[-1:] if body[-1:] in units else ""
    try:
        value = float(body[:len(body) - len(unit)]) * units[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a size such as 500M or 64G, got '{text[:60]}'")
    if not 1 <= value <= 1 << 60:
        raise argparse.ArgumentTypeError(f"must be between 1 byte and 1 EiB, got '{text[:60]}'")
    return int(value)


def _mpi_spec(text):
    from .discovery.mpi import spec_problem

    problem = spec_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


def _gpus(text):
    from .gpu.select import problem

    why = problem(text)
    if why:
        raise argparse.ArgumentTypeError(why)
    return text


def _csv(choices):
    def parse(text):
        items = [t.strip() for t in text.split(",") if t.strip()]
        bad = [i for i in items if i not in choices]
        if bad or not items:
            raise argparse.ArgumentTypeError(f"unknown value '{','.join(bad) or text}' (choose from: {', '.join(choices)})")
        return items
    return parse


def _share(text):
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"expected a share from 0 to below 1, got {text!r}")
    return value


def _add_doctor(sub):
    d = sub.add_parser("doctor", help="report MPI installations, container runtimes, CPU, hazards", description=(
        "Starts each runtime's smoke container and one 1-rank nm-iobench -A per MPI with built kernels; builds nothing."))
    d.add_argument("--image", help="also inspect an image (name or path)")
    d.add_argument("--program", action="append", default=[], help="a program to inspect: its MPI and libraries, inside --image or else on the host (repeatable)")
    d.add_argument("--json", action="store_true", help="machine-readable output (see docs/doctor-json.md)")
    d.add_argument("--clean-shm", action="store_true",
                   help="first remove your MPI shared-memory segments in /dev/shm that no process uses (left by "
                        "jobs stopped before MPI_Finalize)")


def _add_presets(sub):
    p = sub.add_parser("presets", help="list the presets: built-in ones and NAME.toml files (docs/applications.md)")
    p.add_argument("--json", action="store_true", help="one record per preset")


def _add_image(sub):
    im = sub.add_parser("image", help="build and list container images")
    isub = im.add_subparsers(dest="image_command", metavar="ACTION", parser_class=_Parser)
    isub.required = True
    b = isub.add_parser("build", help="build a Debian image with MPI and nearmetal's kernels")
    b.add_argument("--distro", choices=_distros(), help="Debian release (default: the host's)")
    b.add_argument("--mpi", type=_csv(_mpis()), default=list(_mpis()),
                   help=f"MPI families to install, comma-separated (default: {','.join(_mpis())})")
    b.add_argument("--format", choices=_formats(), default=_formats()[0],
                   help=f"{_formats()[0]} is always built; also build one of: {', '.join(_formats()[1:])}")
    b.add_argument("--name", help="image name (default: nm-DISTRO-MPIS, nm-DISTRO-generic-MPIS with --generic)")
    b.add_argument("--generic", action="store_true", default=None,
                   help="the generic variant: the MPIs' shared-memory transports left out of the image, as a portable "
                        "build without the host's fabric support (hybrid then talks TCP within a node, bind does "
                        "not); kept when the image is built again without --generic")
    b.add_argument("--portable-kernels", action="store_true", default=None,
                   help="build nearmetal's compute kernels for any x86-64 CPU (-march=x86-64: SSE2) instead of this "
                        "one, as an image made to run anywhere ships its programs; needs --name; kept when the image "
                        "is built again without it")
    b.add_argument("--packages", type=lambda v: v.split(","), default=None,
                   metavar="P1,P2", help="also install these Debian packages (an application: gromacs, hpcc, ...); "
                                         "needs --name; kept when the image is built again without --packages")
    b.add_argument("--recipe", metavar="BUILD.sh", help="a script that builds your application from --source, run "
                                                          "natively and in the image once per MPI family "
                                                          "(docs/applications.md); needs --name")
    b.add_argument("--source", metavar="DIR", help="the application's source directory (read-only to the script)")
    imp = isub.add_parser("import", help="make an image nearmetal did not build one of its own",
                          description="SOURCE: a root file system directory (a Charliecloud image), a docker/podman "
                                      "save archive, an OCI layout or archive, a SquashFS file or a SIF.")
    imp.add_argument("source", metavar="SOURCE")
    imp.add_argument("--name", required=True, help="the image's name")
    imp.add_argument("--format", type=_csv(_formats()), default=["dir"],
                     help=f"formats to make, comma-separated ({', '.join(_formats())}; dir always)")
    imp.add_argument("--keep-modes", action="store_true",
                     help="keep setuid/setgid bits and world-writable modes as the image has them (default: cleared, "
                          "except on sticky directories such as /tmp); the image directory is then 0700")
    imp.add_argument("--max-files", type=_at_most(1 << 40), default=1_000_000, metavar="N",
                     help="refuse an image of more files and directories than this (default: 1000000)")
    imp.add_argument("--max-size", type=_size, default=64 << 30, metavar="SIZE",
                     help="refuse an image whose files add up to more than this (default: 64G)")
    isub.add_parser("list", help="list images (built and imported)")


def _launch_options(r):
    """Options shared by `run` and `bench`: how ranks are launched."""
    r.add_argument("--mode", choices=_modes(), default=_modes()[0], help=f"MPI model (default: {_modes()[0]})")
    r.add_argument("--runtime", choices=_runtimes(), help=f"container runtime (default: {_runtimes()[0]})")
    r.add_argument("--image", help="image name, directory, .sqfs or .sif (default: the host distro's default image)")
    r.add_argument("--mpi", type=_mpi_spec, metavar="{" + ",".join(_mpis()) + "}[@PREFIX]",
                   help="host MPI family (default: what the program was built with); FAMILY@PREFIX: the "
                        "installation whose wrapper and launcher are in PREFIX/bin")
    r.add_argument("-n", dest="ranks", type=_RANKS, default=2, help="number of ranks (default: 2)")
    r.add_argument("--ranks-per-node", type=_RANKS, help="ranks per node")
    r.add_argument("--threads", type=_THREADS, default=1, help="OpenMP threads per rank")
    r.add_argument("--env", action="append", type=_env_pair, default=[], metavar="K=V", help="environment for the ranks (repeatable)")
    r.add_argument("--workdir", metavar="DIR", help="the ranks' working directory; containers get it read-write at /nm/work "
                                                    "(default: unchanged)")
    r.add_argument("--runtime-arg", dest="runtime_args", action="append", default=[], metavar="ARG",
                   help="an argument for the container runtime, before the image (repeatable; "
                        "--runtime-arg=--userns for one that starts with '-')")
    r.add_argument("--network", choices=_networks(), default=_networks()[0],
                   help="host: the ranks share the machine's network and shared memory; isolated: each rank on "
                        "its own emulated node (network, IPC and /dev/shm namespaces, veth pairs), as containers "
                        "on an overlay network; local runs as root (default: host)")
    r.add_argument("--user", metavar="NAME",
                   help="run the launcher and every rank as this unprivileged account (nearmetal as root; "
                        "docs/privilege.md; create one with scripts/setup.sh --create-user NAME)")
    r.add_argument("--gpus", type=_gpus, metavar="all|N|ID,ID...",
                   help="give the ranks NVIDIA GPUs: all, a count N, or a comma list of indices/UUIDs (one index: "
                        "'1,'); each local rank sees one (CUDA_VISIBLE_DEVICES = local rank mod their count; "
                        "--env CUDA_VISIBLE_DEVICES=... overrides); docs/gpu.md")
    r.add_argument("--scheduler", choices=_schedulers(), default=_schedulers()[0],
                   help="local: the MPI's launcher; slurm: srun in an allocation, else an sbatch job (default: local)")
    r.add_argument("--partition", help="Slurm partition")
    r.add_argument("--nodes", type=_positive, help="Slurm nodes")
    r.add_argument("--time", help="Slurm time limit (e.g. 10:00)")
    r.add_argument("--account", help="Slurm account")
    r.add_argument("--export", dest="slurm_export", help="Slurm --export for the job (default: ALL)")
    r.add_argument("--dry-run", action="store_true", help="print the argv and environment, run nothing")
    r.add_argument("-v", "--verbose", action="store_true", help="print the argv and environment before running")
    r.add_argument("--witness", action="store_true",
                   help="each MPI rank says at exit which MPI library it really ran (path, inode, version)")
    r.add_argument("--evidence", metavar="DIR",
                   help="each rank writes what it saw (CPUs, namespaces, cgroup limits, time to main and MPI_Init, "
                        "its MPI library and an MPI profile) as DIR/ev-HOST-PID.json; in a container mode DIR must be "
                        "under /tmp (docs/explain.md; studies record it for every run)")
    r.add_argument("--audit", action="store_true",
                   help="run the ranks under an rtld-audit library that sees every object and symbol binding "
                        "(LD_AUDIT interception, which some HPC container set-ups use to redirect library loads to the "
                        "host's: measure what it costs)")


def _add_run(sub):
    r = sub.add_parser("run", help="launch an MPI program natively or in a container")
    _launch_options(r)
    r.add_argument("program_argv", nargs=argparse.REMAINDER, metavar="-- PROGRAM [ARGS...] [: [-n N ...] -- PROGRAM [ARGS...]]...",
                   help="MPMD: components separated by a lone ':', each with optional -n, --mode, --runtime, "
                        "--image, --threads, --env before its own '--'; a component's -n is 1 unless given, its other "
                        "unset options come from the first component, and --mpi is the job's")


def _add_bench(sub):
    from .kernels import REGISTRY

    kernels = ", ".join(sorted(REGISTRY))
    b = sub.add_parser("bench", help="run one of nearmetal's benchmark kernels, or any program with its figures of merit",
                       description=f"Kernels: {kernels}. Launch options are those of `run`; "
                                   f"KERNEL_ARGS go to the kernel (OSU-style -m, -i, -x, -f for the MPI benchmarks). "
                                   f"With --command, what follows '--' is any program and its arguments, and "
                                   f"--preset/--fom say which figures of merit to read (docs/applications.md).")
    b.add_argument("kernel", metavar="KERNEL", nargs="?", help=f"one of: {kernels}")
    b.add_argument("--command", dest="run_program", action="store_true", help="run the program after '--' instead of a kernel")
    b.add_argument("--preset", help="figures of merit of a known application (with --command)")
    b.add_argument("--fom", action="append", default=[], metavar="NAME:UNIT:REGEX",
                   help="a figure of merit: the first group of REGEX in the output (repeatable; with --command)")
    b.add_argument("--success", metavar="REGEX", help="a pattern a completed run prints (with --command)")
    b.add_argument("--no-evidence", action="store_true", help="with --command: no evidence library preloaded "
                   "(a study's evidence = false), so no check that the launch was one MPI job")
    _launch_options(b)
    b.set_defaults(ranks=None)
    from . import kernels

    one = sorted(k.name for k in kernels.REGISTRY.values() if k.min_ranks == 1 and k.program)
    b._option_string_actions["-n"].help = f"number of ranks (default: 2; 1 for {', '.join(one)})"
    b.add_argument("--json", action="store_true", help="one JSON record per measured point")
    b.add_argument("--timeout", type=_TIMEOUT, default=1800, help="seconds before the run is killed (default: 1800)")
    # KERNEL_ARGS (after "--") are split off before parsing: see cli.main.


def _add_trace(sub):
    from .trace.cli import add_parser
    add_parser(sub, _Parser)


def _add_study(sub):
    s = sub.add_parser("study", help="run a study: variants x benchmarks x placements, repeated in randomized blocks",
                       description="Without STUDY.toml, runs the built-in quickstart study.")
    s.add_argument("file", nargs="?", metavar="STUDY.toml", help="study file (default: the built-in quickstart)")
    s.add_argument("--db", help="results database (default: results/<study name>/study.db)")
    s.add_argument("--resume", action="store_true", help="complete an interrupted study: run exactly the missing runs")
    s.add_argument("--submit", action="store_true",
                   help="with a batch scheduler: plan the study, then run it as one batch job (each run an srun step, "
                        "in block order) with a follow-on job queued behind it that resumes where a time limit "
                        "stopped it")
    s.add_argument("--dry-run", action="store_true", help="print the plan (every run, in order, with its argv)")
    s.add_argument("--out", help="report directory (default: beside the database)")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")


def _add_report(sub):
    r = sub.add_parser("report", help="statistics, verdicts and plots from a results database")
    r.add_argument("--db", help="results database (default: results/NAME/study.db for --study NAME, else results/quickstart/study.db)")
    r.add_argument("--study", type=study_name_arg, help="study name (needed when the database holds several)")
    r.add_argument("--out", help="output directory (default: beside the database)")
    r.add_argument("--format", choices=_report_formats(), default=_report_formats()[0], help=f"report format (default: "
                   f"{_report_formats()[0]}, which also prints the terminal report; the others only the file's path)")


def _add_explain(sub):
    e = sub.add_parser("explain", help="test the causes of a finished study's slower answers by ablation runs",
                       description="For each slower answer: rank the candidate causes from the runs' evidence, run "
                                   "variants that change exactly one factor beside the slow variant and its baseline, "
                                   "and report the share of the gap each recovers (docs/explain.md). Resumable: run "
                                   "it again to go on.")
    e.add_argument("--db", help="results database (default: results/NAME/study.db for --study NAME, else results/quickstart/study.db)")
    e.add_argument("--study", type=study_name_arg, help="study name (needed when the database holds several)")
    e.add_argument("--budget", type=_positive_seconds, default=600.0, metavar="SECONDS",
                   help="seconds of ablation runs at most (default: 600)")


def _positive_seconds(text):
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, found {text!r:.40}") from None
    if not math.isfinite(value) or value <= 0 or value > 1e7:
        raise argparse.ArgumentTypeError(f"expected seconds above 0 and at most 1e7, found {text!r:.40}")
    return value


def _add_import(sub):
    i = sub.add_parser("import", help="store results measured elsewhere (CSV) so the same statistics and reports apply",
                       description="CSV columns: variant, metric, value (one run per row) or mean|median, n, std "
                                   "(summary rows); optional unit, benchmark, block; other columns are point "
                                   "parameters (e.g. cores). See docs/import.md.")
    i.add_argument("csv", metavar="CSV")
    i.add_argument("--study", required=True, type=study_name_arg, help="name for the imported study")
    i.add_argument("--baseline", required=True, help="the variant the others are compared with (e.g. native)")
    i.add_argument("--db", help="results database (default: results/<study>/study.db)")
    i.add_argument("--metric", help="metric name when the CSV has no metric column")
    i.add_argument("--unit", default="s", help="unit when the CSV has no unit column (default: s)")
    i.add_argument("--margin", type=float, default=0.03, help="equivalence margin (default: 0.03)")
    i.add_argument("--out", help="report directory (default: beside the database)")


def _add_kernels(sub):
    k = sub.add_parser("kernels", help="build nearmetal's C kernels on the host")
    ksub = k.add_subparsers(dest="kernels_command", metavar="ACTION", parser_class=_Parser)
    ksub.required = True
    kb = ksub.add_parser("build", help="build the kernels for each host MPI")
    kb.add_argument("--mpi", type=_csv(_mpis()), help="MPI families (default: all found)")


def component_parser():
    """Options of the second and later MPMD components (unset = inherit from the first)."""
    c = _Parser(prog="nearmetal run (MPMD component)", add_help=False)
    c.add_argument("-n", dest="ranks", type=_RANKS, default=1)
    c.add_argument("--mode", choices=_modes())
    c.add_argument("--runtime", choices=_runtimes())
    c.add_argument("--image")
    c.add_argument("--threads", type=_THREADS)
    c.add_argument("--env", action="append", type=_env_pair, default=[])
    c.add_argument("--runtime-arg", dest="runtime_args", action="append", default=[])
    c.add_argument("program_argv", nargs=argparse.REMAINDER)
    c.see_help = "nearmetal run --help; a component takes " + ", ".join(a.option_strings[0] for a in c._actions[:-1])
    return c


def _add_cluster(sub):
    c = sub.add_parser("cluster", help="a real local Slurm cluster (munged, slurmctld, N slurmd on 127.0.0.1)",
                       description="State, configuration and logs live in --dir (default: $NEARMETAL_HOME/cluster). "
                                   "Clients use it with: export SLURM_CONF=DIR/slurm.conf. See docs/slurm-cluster.md.")
    csub = c.add_subparsers(dest="cluster_command", metavar="ACTION", parser_class=_Parser)
    csub.required = True
    u = csub.add_parser("up", help="start the cluster and wait until every node is idle (no-op when up)")
    u.add_argument("--nodes", type=_positive, help="number of slurmd nodes n1..nN (default: 3; >= 2 for heterogeneous jobs)")
    d = csub.add_parser("down", help="stop every daemon and job-step process of the cluster (no-op when down)")
    s = csub.add_parser("status", help="daemons, nodes and their state, and the SLURM_CONF to export (exit 3 when down)")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    for p in (u, d, s):
        p.add_argument("--dir", help="cluster directory (default: $NEARMETAL_HOME/cluster)")


def _add_io(sub):
    from .io.cli import add_parser
    add_parser(sub, _Parser)


SUBCOMMANDS = {"doctor": _add_doctor, "image": _add_image, "run": _add_run, "bench": _add_bench,
               "study": _add_study, "report": _add_report, "explain": _add_explain, "import": _add_import,
               "kernels": _add_kernels, "cluster": _add_cluster, "io": _add_io, "trace": _add_trace,
               "presets": _add_presets}


def build_parser(only=None):
    """The full parser, or (only=NAME) one with just that subcommand: `run` is on every
    launch's critical path and building every subparser costs milliseconds."""
    p = _Parser(prog="nearmetal", description="Does my MPI application run as fast in a container as on bare metal?")
    p.add_argument("--version", action="version", version=f"nearmetal {_version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name, add in SUBCOMMANDS.items():
        if only in (None, name):
            add(sub)
    return p


def _version():
    from . import __version__

    return __version__


