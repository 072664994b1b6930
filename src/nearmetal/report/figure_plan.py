"""Which figures the HTML report draws for an analysis, as jobs (section, plot function,
arguments) that html.draw runs in this process or in forked workers. Each benchmark gets
the figures its results call for (docs/reports.md): an all-pairs matrix, or a size sweep per
size-swept metric and overhead bars for the rest; scaling at its headline metric when it was
measured at several placements; a phase breakdown; one dispersion figure for all headline
points; and the Parallel I/O section's figures."""

import json
from collections import OrderedDict

from . import formatting as F
from . import io_section as IO
from . import kernel_semantics as K
from . import plots_scaling, plots_spread, plots_sweeps
from . import points as PT


def _by_benchmark(points):
    out = OrderedDict()
    for p in points:
        out.setdefault(p.get("benchmark"), OrderedDict()).setdefault(p.get("metric"), []).append(p)
    return out


def _headline_rows(bench, head, entries):
    """(title, unit, entries) of a benchmark's headline point at its largest placement."""
    hp = K.headline_point(entries)
    pl = max(PT.placements(entries), key=lambda x: ((x[0] or 0) * (x[1] or 0), x))
    rows = [p for p in entries if PT.point_json(p.get("point")) == hp and (p.get("ranks"), p.get("threads")) == pl]
    if not rows:
        return None
    pt = F.point_label(json.loads(hp))
    where = F.fmt_placement(*pl)
    title = F.what(bench, head) + (f" @ {pt}" if pt != "—" else "") + (f" ({where})" if where != "—" else "")
    return title, rows[0].get("unit") or "", rows


def plan(analysis, style, fid):
    """(jobs, io section): the figure jobs [(section, plot function, args)] in page order and
    the Parallel I/O section (its jobs are among them). fid() gives figure ids."""
    jobs = []
    headline = []
    for bench, metrics in _by_benchmark(analysis.get("points") or []).items():
        all_entries = [p for es in metrics.values() for p in es]
        pairs = K.is_pairs(all_entries)
        if pairs:
            for metric, entries in metrics.items():
                jobs.append(("pairs", plots_scaling.pairs_heatmaps, (fid(), bench, metric, entries, style)))
        else:
            rest = OrderedDict()
            for metric, entries in metrics.items():
                if PT.is_size_swept(entries):  # the lower panel holds the overhead bars per size
                    jobs.append(("sweeps", plots_sweeps.size_sweep, (fid(), bench, metric, entries, style)))
                else:
                    rest[metric] = entries
            if rest:
                jobs.append(("overhead", plots_sweeps.overhead_bars, (fid(), bench, rest, style)))
        head = K.headline_metric(list(metrics))
        if head is not None:
            entries = metrics[head]
            if not pairs and (len(PT.placements(entries)) > 1 or PT.scale_param(entries)):
                jobs.append(("scaling", plots_scaling.scaling, (fid(), bench, head, entries, style)))
            row = _headline_rows(bench, head, entries)
            if row:
                headline.append(row)
        if K.has_phases(all_entries):
            jobs.append(("phases", plots_spread.phases_bars, (fid(), bench, all_entries, style)))
    if headline:
        jobs.append(("dispersion", plots_spread.dispersion, (fid(), headline, style)))
    io = IO.plan(analysis, style, fid)  # iobench configurations: figures and tables of their own
    return jobs + io.jobs, io
