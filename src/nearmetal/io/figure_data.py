"""What the report's Parallel I/O figures show, decided from the configurations measured in
one variant x placement (io.analysis): each figure is drawn only where the data varies in
what it shows, and holds the other parameters as in a reference configuration.

- phases: per library, the median of open, write, close and read (max over ranks) per
  write pattern and io_layout, through the library's fastest write (seed 004, Figs. 3-7);
- bandwidth: per shared-file library, the median write bandwidth over aggregators x
  stripes, through the library's highest bandwidth (Figs. 8-9);
- chunks: for netcdf4/hdf5, the median write time over chunk layouts CX x CY with the
  library's default chunking and the contiguous PnetCDF and HDF5 files as references (Fig. 15);
- balance: the per-rank write time of the fastest configuration and of its serial reference.

Plain JSON-ready lists and dicts; `fixed` says which parameters every configuration of a
panel shares ({parameter: value}).
"""

import math
from dataclasses import fields

from .space import Configuration

PARAMS = tuple(f.name for f in fields(Configuration))  # pattern, library, io_layout, ..., mpiio
PHASES = ("open_s", "write_s", "close_s", "read_s")
PATTERN_ORDER = ("serial", "file-per-rank", "io-domains", "shared")


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
    """{parameter: value} the cells share, besides the free ones, pattern and library."""
    out = {}
    for name in PARAMS:
        if name in free or name in ("pattern", "library"):
            continue
        vals = {c.conf.get(name) for c in cells}
        if len(vals) == 1 and None not in vals:
            out[name] = vals.pop()
    return out


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


def _measure(m):
    return None if m is None else m.as_dict()


def _fastest(cells, metric="write_s"):
    timed = [c for c in cells if c.time(metric) is not None]
    return min(timed, key=lambda c: (c.time(metric), c.bench)) if timed else None


def phase_panels(cells):
    """{library: {"xs": [[pattern, io_layout, {phase: measure}]], "fixed"}} where a library
    has two or more (pattern, io_layout) positions in the slice through its fastest write."""
    out = {}
    from .libraries import names

    for lib in names():
        mine = [c for c in cells if c.conf.library == lib and any(c.max.get(ph) for ph in PHASES)]
        ref = _fastest(mine)
        if ref is None:
            continue
        sl = slice_through(mine, ref, ("pattern", "io_layout"))
        if len(sl) < 2:
            continue
        order = {p: i for i, p in enumerate(PATTERN_ORDER)}
        xs = [[pattern, layout, {ph: _measure(c.max.get(ph)) for ph in PHASES}]
              for (pattern, layout), c in sorted(sl.items(), key=lambda kv: (order.get(kv[0][0], 9),
                                                                             _pair_key(kv[0][1])))]
        out[lib] = {"xs": xs, "fixed": held_fixed(list(sl.values()), ("pattern", "io_layout"))}
    return out


def bw_panels(cells):
    """{library: {aggr, stripes, values[i][j] (MB/s median or None), fixed}} for the shared
    MPI-IO libraries with two or more (aggregators, stripes) cells in the slice through the
    library's highest write bandwidth."""
    out = {}
    from .libraries import where

    for lib in where(mpiio=True):
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
    """{library: {cx, cy, values[i][j] (median s or None), refs [[name, median]], fixed}} for
    netcdf4/hdf5 with two or more CXxCY chunk layouts in the slice through the library's
    fastest chunked write; references: the library's default chunking and PnetCDF
    (contiguous) and HDF5's default (contiguous) closest to that configuration."""
    out = {}
    from .libraries import where

    for lib in where(chunked=True):
        mine = [c for c in cells if c.conf.library == lib and c.time(metric) is not None]
        chunked = [c for c in mine if c.conf.chunk not in (None, "default")]
        ref = _fastest(chunked, metric)
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
                refs.append([name, next(iter(near.values())).time(metric)])
        out[lib] = {"cx": cx, "cy": cy, "values": values, "refs": refs,
                    "fixed": held_fixed(list(sl.values()), ("chunk",))}
    return out


def balance_panels(best, reference, metric="write_s"):
    """[{"which": "fastest"|"serial", "label", "ranks": [[rank, measure]]}] for the fastest
    configuration and its serial reference, where a run has values for two or more ranks."""
    out = []
    for which, c in (("fastest", best), ("serial", reference)):
        if c is None or (which == "serial" and c is best):
            continue
        ranks = sorted([r, _measure(ms.get(metric))] for r, ms in c.ranks.items() if ms.get(metric))
        if len(ranks) >= 2:
            out.append({"which": which, "label": c.conf.label, "ranks": ranks})
    return out


def figures(cells, best, reference):
    """Every figure's data for one variant x placement (empty where nothing varies)."""
    return {"phases": phase_panels(cells), "bandwidth": bw_panels(cells), "chunks": chunk_panels(cells),
            "balance": balance_panels(best, reference)}
