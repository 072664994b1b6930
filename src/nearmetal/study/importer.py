"""`nearmetal import`: results measured elsewhere, stored like a study's so the same
statistics and reports apply.

CSV columns (header names, case-insensitive):
  variant   (required) e.g. native, hybrid, bind, or any label
  metric    (required unless --metric) e.g. main_loop
  value     one measurement per row          - or -   mean (or median), n, std: one summary row
  unit      default "s" (or --unit)
  benchmark default the study name
  block     randomized block / repetition index (pairs values across variants); default: row order
  any other column is a point parameter (e.g. cores, size), numbers kept as numbers.
"""

import csv
import json
from datetime import datetime, timezone

from .. import __version__
from ..errors import NearmetalError
from .store import Store

RESERVED = {"variant", "metric", "value", "mean", "median", "n", "std", "unit", "benchmark", "block", "repetition"}


def _num(text):
    try:
        v = float(text)
    except ValueError:
        return text
    return int(v) if v.is_integer() and "." not in text else v


def import_csv(csv_path, db_path, study, baseline, metric=None, unit="s", margin=0.03):
    try:
        with open(csv_path, newline="") as f:
            reader = csv.DictReader(f)
            rows = [{(k or "").strip().lower(): (v or "").strip() for k, v in row.items()} for row in reader]
    except OSError as e:
        raise NearmetalError(f"cannot read {csv_path}: {e.strerror}")
    except csv.Error as e:
        raise NearmetalError(f"{csv_path}: not a CSV file: {e}")
    if not rows:
        raise NearmetalError(f"{csv_path}: no rows")
    cols = set(rows[0])
    if "variant" not in cols:
        raise NearmetalError(f"{csv_path}: needs a 'variant' column (found: {', '.join(sorted(cols))})")
    if "metric" not in cols and not metric:
        raise NearmetalError(f"{csv_path}: needs a 'metric' column or --metric")
    summary = "value" not in cols
    if summary and not ({"n", "std"} <= cols and ({"mean", "median"} & cols)):
        raise NearmetalError(f"{csv_path}: needs a 'value' column (one run per row) or 'mean', 'n' and 'std' "
                             f"(summary rows)")
    variants = sorted({r["variant"] for r in rows})
    if baseline not in variants:
        raise NearmetalError(f"{csv_path}: baseline variant '{baseline}' not among the variants ({', '.join(variants)})")
    store = Store(db_path)
    if store.study(study) is not None:
        raise NearmetalError(f"study '{study}' already exists in {db_path}: choose another --study or --db")
    created = datetime.now(timezone.utc).isoformat(timespec="seconds")
    study_id = store.create_study(study, "", None, margin, {"variant": baseline, "imported_from": str(csv_path)},
                                  __version__, created)
    planned, results = [], []
    counters = {}
    point_texts = {}   # one JSON text per distinct point: 100,000 rows share a few thousand
    for i, r in enumerate(rows, start=2):
        try:
            bench = r.get("benchmark") or study
            raw = tuple((k, v) for k, v in r.items() if k not in RESERVED and v != "")
            if raw not in point_texts:
                point = {k: _num(v) for k, v in raw}
                point_texts[raw] = (point, json.dumps(point, sort_keys=True))
            point, point_text = point_texts[raw]
            blk = r.get("block") or r.get("repetition")
            key_base = (bench, r["variant"], point_text)
            counters[key_base] = counters.get(key_base, -1) + 1
            block = int(float(blk)) if blk else counters[key_base]
            if summary:
                rec = {"value": float(r.get("mean") or r.get("median")), "n": int(float(r["n"])), "std": float(r["std"])}
            else:
                rec = {"value": float(r["value"])}
        except (KeyError, ValueError) as e:
            store.close()
            raise NearmetalError(f"{csv_path}: line {i}: bad value ({e})")
        rec.update({"metric": r.get("metric") or metric, "unit": r.get("unit") or unit, "point": point,
                    "point_json": point_text})
        run_key = f"{bench}|{r['variant']}|{point_text}|{block}|line{i}"
        planned.append({"run_key": run_key, "position": i, "block": block, "repetition": block, "warmup": False,
                        "benchmark": bench, "kernel": "imported", "variant": r["variant"],
                        "variant_json": {"mode": r["variant"], "runtime": None, "mpi": None, "image": None},
                        "variant_text": json.dumps({"mode": r["variant"], "runtime": None, "mpi": None, "image": None}),
                        "ranks": int(point.get("ranks", 0) or 0), "threads": int(point.get("threads", 0) or 0)})
        results.append(rec)
    for p in planned:
        p["started"] = created
    store.add_finished(study_id, planned, [[rec] for rec in results])
    return store, study_id, len(planned)
