"""`nearmetal import`: results measured elsewhere, stored like a study's so the same
statistics and reports apply.

CSV columns (header names, case-insensitive):
  variant   (required) e.g. native, hybrid, bind, or any label
  metric    (required unless --metric) e.g. main_loop
  value     one measurement per row          - or -   mean (or median), n, std: one summary row
  unit      default "s" (or --unit)
  benchmark default the study name
  block     randomized block / repetition index (pairs values across variants); default: row order
  ranks, threads  the placement (ranks x threads), as a study's; either defaults to 1 when
            the other is given; neither: no placement
  any other column is a point parameter (e.g. cores, size), numbers kept as numbers.

Every row is checked before the database is opened (UTF-8, field counts, finite
non-negative values within records.VALUE_MIN..VALUE_MAX, integer n/block/ranks/threads, one unit per metric); the first
problem is a one-line error naming the file, line and column. The study and its rows are
then stored in one transaction, under the database's writer lock (docs/import.md).
"""

import csv
import io
import json
import math
import os
import stat
from datetime import datetime, timezone

from ... import __version__
from ...errors import NearmetalError
from ..records import out_of_range
from .store import Store

RESERVED = {"variant", "metric", "value", "mean", "median", "n", "std", "unit", "benchmark", "block", "repetition",
            "ranks", "threads"}  # ranks and threads are the placement, not point parameters
INT_MAX = 2**31 - 1
MAX_CSV_BYTES = 1 << 30  # far beyond any real import (103,040 runs are ~10 MB); refuses devices


def _num(text):
    """A point parameter: an int or float when it reads as a finite number, else the text."""
    try:
        v = float(text)
    except ValueError:
        return text
    if not math.isfinite(v):
        return text
    return int(v) if v.is_integer() and "." not in text else v


class _Bad(Exception):
    """One bad cell: (column, problem)."""


def _finite(r, col, *, non_negative=True):
    text = r.get(col, "")
    if text == "":
        raise _Bad(col, "empty")
    try:
        v = float(text)
    except ValueError:
        raise _Bad(col, f"{text!r} is not a number") from None
    if not math.isfinite(v):
        raise _Bad(col, f"{text!r} is not a finite number")
    if non_negative and v < 0:
        raise _Bad(col, f"{text} is negative")
    if why := out_of_range(v):
        raise _Bad(col, why)
    return v


def _integer(r, col, low):
    text = r.get(col, "")
    try:
        v = int(text)
    except ValueError:
        try:
            f = float(text)
        except ValueError:
            raise _Bad(col, f"{text!r} is not an integer") from None
        if not (math.isfinite(f) and f.is_integer()):
            raise _Bad(col, f"{text!r} is not an integer")
        v = int(f)
    if not low <= v <= INT_MAX:
        raise _Bad(col, f"{text} is out of range (an integer from {low} to {INT_MAX})")
    return v


def _read(csv_path):
    """(header, [(line number, row dict)]) with every structural problem refused."""
    try:
        st = os.stat(csv_path)
        if not stat.S_ISREG(st.st_mode):  # /dev/zero would be read until memory runs out
            raise NearmetalError(f"cannot read {csv_path}: not a regular file")
        if st.st_size > MAX_CSV_BYTES:
            raise NearmetalError(f"cannot read {csv_path}: {st.st_size} bytes, more than {MAX_CSV_BYTES >> 30} GiB")
        with open(csv_path, "rb") as f:
            data = f.read(MAX_CSV_BYTES + 1)
    except OSError as e:
        raise NearmetalError(f"cannot read {csv_path}: {e.strerror}")
    except ValueError:
        raise NearmetalError(f"cannot read {csv_path!r}: the path contains a NUL byte") from None
    if len(data) > MAX_CSV_BYTES:
        raise NearmetalError(f"cannot read {csv_path}: more than {MAX_CSV_BYTES >> 30} GiB")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise NearmetalError(f"{csv_path}: line {line}: not UTF-8 text (byte 0x{data[e.start]:02x}); "
                             f"save the file as UTF-8") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    rows = []
    try:
        header = next(reader, None)
        if header is None:
            raise NearmetalError(f"{csv_path}: no rows")
        header = [h.strip().lower() for h in header]
        seen = set()
        for h in header:
            if h and h in seen:
                raise NearmetalError(f"{csv_path}: line 1: column '{h}' appears twice")
            seen.add(h)
        for fields in reader:
            if not fields:
                continue  # blank line
            line = reader.line_num
            if len(fields) != len(header):
                raise NearmetalError(f"{csv_path}: line {line}: {len(fields)} fields, but the header (line 1) has "
                                     f"{len(header)}")
            row = {}
            for h, v in zip(header, fields):
                v = v.strip()
                if not h:
                    if v:
                        raise NearmetalError(f"{csv_path}: line {line}: a value ({v!r}) under a column without "
                                             f"a name")
                    continue
                row[h] = v
            rows.append((line, row))
    except csv.Error as e:
        raise NearmetalError(f"{csv_path}: line {reader.line_num}: not a CSV file: {e}") from None
    return [h for h in header if h], rows


def import_csv(csv_path, db_path, study, baseline, metric=None, unit="s", margin=0.03):
    from ..config.fields import study_name_problem

    if study_name_problem(study):
        raise NearmetalError(f"study name '{study[:80]}': {study_name_problem(study)}")
    header, rows = _read(csv_path)
    if not rows:
        raise NearmetalError(f"{csv_path}: no rows")
    cols = set(header)
    if "variant" not in cols:
        raise NearmetalError(f"{csv_path}: needs a 'variant' column (found: {', '.join(sorted(cols))})")
    if metric is not None:
        metric = metric.strip()
        if not metric or not metric.isprintable():
            raise NearmetalError(f"--metric {metric!r:.60}: a metric's name is printable text, not empty")
    if "metric" not in cols and not metric:
        raise NearmetalError(f"{csv_path}: needs a 'metric' column or --metric")
    summary = "value" not in cols
    if summary and not ({"n", "std"} <= cols and ({"mean", "median"} & cols)):
        raise NearmetalError(f"{csv_path}: needs a 'value' column (one run per row) or 'mean', 'n' and 'std' "
                             f"(summary rows)")
    planned, results = _parse_rows(csv_path, rows, study, metric, unit, summary)
    variants = sorted({p["variant"] for p in planned})
    if baseline not in variants:
        raise NearmetalError(f"{csv_path}: baseline variant '{baseline}' not among the variants ({', '.join(variants)})")
    created = datetime.now(timezone.utc).isoformat(timespec="seconds")
    for p in planned:
        p["started"] = created
    # Everything is checked before the database is opened; the study row and its runs
    # then go in one transaction, under the writer lock: a failure leaves nothing behind.
    store = Store(db_path, what=f"import of study '{study}'")
    try:
        if store.study(study) is not None:
            raise NearmetalError(f"study '{study}' already exists in {db_path}: choose another --study or --db")
        study_id = store.import_study(study, "", None, margin, {"variant": baseline, "imported_from": str(csv_path)},
                                      __version__, created, planned, [[rec] for rec in results])
    except BaseException:
        store.close()
        raise
    return store, study_id, len(planned)


def _parse_rows(csv_path, rows, study, metric, unit, summary):
    planned, results = [], []
    counters, summaries = {}, {}
    point_texts = {}   # one JSON text per distinct point: 100,000 rows share a few thousand
    units = {}         # (benchmark, metric) -> (unit, first line)
    for i, r in rows:
        try:
            if not r["variant"]:
                raise _Bad("variant", "empty")
            m = r.get("metric") or metric
            if not m:
                raise _Bad("metric", "empty (and no --metric)")
            if not m.isprintable():
                raise _Bad("metric", f"{m!r:.60} is not printable text")
            bench = r.get("benchmark") or study
            u = r.get("unit") or unit
            first = units.setdefault((bench, m), (u, i))
            if first[0] != u:
                raise _Bad("unit", f"metric '{m}' is in '{u}' here but in '{first[0]}' on line {first[1]}")
            raw = tuple((k, v) for k, v in r.items() if k not in RESERVED and v != "")
            if raw not in point_texts:
                point = {k: _num(v) for k, v in raw}
                point_texts[raw] = (point, json.dumps(point, sort_keys=True))
            point, point_text = point_texts[raw]
            # The placement: either count missing is 1 when the other is given (ranks and no
            # threads is ranks x 1, not "2×0"); neither given is no placement (0 x 0).
            ranks = _integer(r, "ranks", 1) if r.get("ranks") else 0
            threads = _integer(r, "threads", 1) if r.get("threads") else 0
            if ranks or threads:
                ranks, threads = ranks or 1, threads or 1
            key_base = (bench, r["variant"], point_text, ranks, threads)  # a cell: blocks count per cell
            counters[key_base] = counters.get(key_base, -1) + 1
            blk_col = "block" if r.get("block") else "repetition" if r.get("repetition") else None
            block = _integer(r, blk_col, 0) if blk_col else counters[key_base]
            if summary:  # one row describes all runs of its cell: a second one would be dropped unseen
                first = summaries.setdefault(key_base + (m,), i)
                if first != i:
                    raise _Bad("variant", f"a second summary row for variant '{r['variant'][:80]}' at this point and "
                                          f"metric '{m[:80]}' (the first is line {first}): one row per variant, "
                                          f"point and metric")
                mean_col = "mean" if r.get("mean") or "median" not in r else "median"
                rec = {"value": _finite(r, mean_col), "n": _integer(r, "n", 1), "std": _finite(r, "std")}
            else:
                rec = {"value": _finite(r, "value")}
        except _Bad as e:
            col, problem = e.args
            raise NearmetalError(f"{csv_path}: line {i}, column '{col}': {problem}") from None
        rec.update({"metric": m, "unit": u, "point": point, "point_json": point_text})
        run_key = f"{bench}|{r['variant']}|{point_text}|{block}|line{i}"
        variant_json = {"mode": r["variant"], "runtime": None, "mpi": None, "image": None}
        planned.append({"run_key": run_key, "position": i, "block": block, "repetition": block, "warmup": False,
                        "benchmark": bench, "kernel": "imported", "variant": r["variant"],
                        "variant_json": variant_json, "variant_text": json.dumps(variant_json),
                        "ranks": ranks, "threads": threads})
        results.append(rec)
    return planned, results
