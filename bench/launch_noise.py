#!/usr/bin/env python3
"""How noisy a stored study's launches were, in the unit its verdicts feel: for each point of
each container variant, the standard deviation over blocks of the paired log ratio (the
variant's run against its block's native run of the same MPI, the quickstart's baseline);
printed per benchmark as the median over its points and variants. Made for studies with one
native variant per MPI, as the quickstart: with several (threads, networks) one of them is
taken for all, so read such a study's figure as a rough one.

At a margin of ±10%, a point needs roughly (2.5 * sd / 0.1)^2 blocks to be decided when the
true difference is small: sd 0.12 needs ~9, sd 0.30 ~56. Comparing two hosts' databases with
this tells whether a study that decides less on one of them met a noisier host (the analysis
is the same). Warm-up runs and failed runs are left out; a point needs 4 paired blocks.

usage: bench/launch_noise.py DB [DB ...]
"""

import json
import math
import sqlite3
import statistics
import sys
from collections import defaultdict


def paired_noise(db):
    """{benchmark: median sd of the paired log ratios} of one study database."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    values = defaultdict(list)  # (benchmark, metric, point, variant, block) -> the run's values
    mode_mpi = {}
    for bench, variant, vjson, block, metric, point, value in con.execute(
            "SELECT r.benchmark, r.variant, r.variant_json, r.block, x.metric, x.point_json, x.value "
            "FROM runs r JOIN records x ON x.run_id = r.id WHERE r.status = 'ok' AND r.warmup = 0"):
        if value is None or value <= 0:
            continue
        values[(bench, metric, point, variant, block)].append(value)
        v = json.loads(vjson)
        mode_mpi[variant] = (v.get("mode"), v.get("mpi"))
    blocks = defaultdict(dict)
    for (bench, metric, point, variant, block), xs in values.items():
        blocks[(bench, metric, point, variant)][block] = statistics.median(xs)
    native = {mpi: variant for variant, (mode, mpi) in mode_mpi.items() if mode == "native"}
    sds = defaultdict(list)
    for (bench, metric, point, variant), by_block in blocks.items():
        mode, mpi = mode_mpi[variant]
        base = blocks.get((bench, metric, point, native.get(mpi)))
        if mode == "native" or not base:
            continue
        ratios = [math.log(by_block[b] / base[b]) for b in by_block if b in base]
        if len(ratios) >= 4:
            sds[bench].append(statistics.stdev(ratios))
    return {bench: statistics.median(s) for bench, s in sorted(sds.items())}


def main(argv):
    if not argv or argv[0].startswith("-"):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    for db in argv:
        noise = paired_noise(db)
        print(f"{db}: " + ", ".join(f"{b} {sd:.3f}" for b, sd in noise.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
