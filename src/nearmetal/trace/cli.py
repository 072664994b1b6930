"""The command line of `nearmetal trace`: the traced run's options, and `trace report DIR`
with only its own (its help and its refusals are not the run's)."""

REPORT_DESCRIPTION = "nearmetal trace report DIR: the report of a trace directory (docs/trace.md)."


def _report_options(p):
    from ..cli_parser import _share
    from .render import FORMATS

    p.add_argument("--format", choices=FORMATS, default=FORMATS[0],
                   help="report format (default: html, written into the trace directory; md and json: printed)")
    p.add_argument("--threshold", type=_share, default=0.01, metavar="SHARE",
                   help="leave out of the graph the call paths under this share of the largest function's time "
                        "(default: 0.01; 0: show every path)")


def add_parser(sub, parser_class):
    from ..cli_parser import _TIMEOUT, _csv, _launch_options
    from . import ALL_LAYERS, DEFAULT_LAYERS

    t = sub.add_parser("trace", help="trace a program's I/O through netCDF, PnetCDF, HDF5, MPI-IO and POSIX",
                       description="nearmetal trace [OPTIONS] -- PROGRAM [ARGS]: run it as `run` would, with the "
                                   "tracer preloaded into its ranks, then write the trace and its report. "
                                   + REPORT_DESCRIPTION + " (nearmetal trace report --help: its options)")
    t.add_argument("action", nargs="?", choices=("report",), help="report: the report of an existing trace directory")
    t.add_argument("trace_dir", nargs="?", metavar="DIR", help="the trace directory (with report)")
    t.add_argument("--layers", type=_csv(ALL_LAYERS), metavar="L[,L...]",
                   help=f"layers to trace (default: {','.join(DEFAULT_LAYERS)}; the layers there are: {','.join(ALL_LAYERS)})")
    t.add_argument("--out", help="trace directory (default: trace-YYYYmmdd-HHMMSS here)")
    _report_options(t)
    t.add_argument("--timeout", type=_TIMEOUT, default=1800, help="seconds before the run is killed (default: 1800)")
    _launch_options(t)
    # PROGRAM [ARGS] (after "--") are split off before parsing: see cli.main.


def parse_report(argv, program_argv, parser_class):
    """`nearmetal trace report ...` (argv: what follows 'report' up to a '--'), parsed by a
    parser of its own: its --help shows its options only, and a run's option given to it is
    refused, not ignored."""
    p = parser_class(prog="nearmetal trace report", description=REPORT_DESCRIPTION)
    p.add_argument("trace_dir", nargs="?", metavar="DIR", help="the trace directory")
    _report_options(p)
    args = p.parse_args(argv)
    if program_argv:
        p.error(f"a report runs no program (given: {' '.join(program_argv)}); to trace one: "
                f"nearmetal trace [OPTIONS] -- PROGRAM [ARGS]")
    args.command, args.action, args.program_argv = "trace", "report", []
    return args


def refuse_run_options(trace_parser, args):
    """`nearmetal trace --layers posix report DIR` (report after options) is parsed by the
    traced run's parser: a run's option given there is refused as the report's parser would."""
    defaults = vars(trace_parser.parse_args([]))
    for action in trace_parser._actions:  # argparse's table: the option strings of each dest
        dest = action.dest
        if dest in ("help", "action", "trace_dir", "format", "threshold") or not action.option_strings:
            continue
        if getattr(args, dest, None) != defaults.get(dest):
            trace_parser.prog = "nearmetal trace report"
            trace_parser.see_help = "nearmetal trace report --help"
            trace_parser.error(f"{action.option_strings[0]} is an option of a traced run, not of a report")
