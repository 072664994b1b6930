"""Which rows a short table keeps when the full one is too long to read: representative
message sizes (and the slowest), aggregate ranks, the largest overheads."""

import json
import math
from collections import defaultdict

from . import formatting as F
from . import points as PT


# representative message sizes, in order of priority (min and max are the smallest and largest measured)
SIZE_PRIORITY = ("min", "max", 8, 1 << 20, 1 << 10, 1 << 16, 64, 1 << 13, 1 << 18, 1 << 4)
TERMINAL_MAX_KEYS = 8


def representative_sizes(sizes, budget=TERMINAL_MAX_KEYS):
    """At most `budget` of the measured sizes: the smallest and largest, then the measured
    size nearest (in log scale) to 8 B, 1 MiB, 1 KiB, 64 KiB, 64 B, 8 KiB, ..."""
    sizes = sorted(set(sizes))
    if len(sizes) <= budget:
        return sizes
    chosen = []
    for target in SIZE_PRIORITY:
        if len(chosen) >= budget:
            break
        if target == "min":
            s = sizes[0]
        elif target == "max":
            s = sizes[-1]
        else:
            if target < sizes[0] or target > sizes[-1]:
                continue
            s = min(sizes, key=lambda x: abs(math.log2(max(x, 0.5)) - math.log2(target)))
        if s not in chosen:
            chosen.append(s)
    def lg(x):
        return math.log2(max(x, 0.5))

    while len(chosen) < budget:  # fill with the sizes farthest (in log scale) from those chosen
        rest = [x for x in sizes if x not in chosen]
        chosen.append(max(rest, key=lambda x: min(abs(lg(x) - lg(c)) for c in chosen)))
    return sorted(chosen)


def _worst_size(entries, pl):
    """The message size with the largest overhead among 'slower' verdicts at placement pl."""
    worst = None
    for p in entries:
        c = PT.comparison(p)
        if (p.get("ranks"), p.get("threads")) == pl and c and c.get("verdict") == "slower" \
                and F.is_num(c.get("overhead_pct")) and F.is_num((p.get("point") or {}).get("size")):
            if worst is None or c["overhead_pct"] > worst[0]:
                worst = (c["overhead_pct"], p["point"]["size"])
    return worst[1] if worst else None


def select_rows(entries, max_keys=TERMINAL_MAX_KEYS):
    """The row keys (see row_key) to show when a table must stay short, and a note saying
    what was left out ('' when nothing was). Size sweeps keep representative sizes plus the
    size with the largest 'slower' overhead, at the smallest and largest placement; other
    tables keep aggregate ranks where they exist, then the points with the largest
    overhead."""
    keys = PT.ordered_row_keys(entries)
    if len(keys) <= max_keys:
        return keys, ""
    total = len(keys)
    notes = []
    if PT.is_size_swept(entries):
        pls = PT.placements(entries)
        if len(pls) > 2:
            pls = [pls[0], pls[-1]]
            notes.append(f"placements {F.fmt_placement(*pls[0])} and {F.fmt_placement(*pls[1])} of "
                         f"{len(PT.placements(entries))}")
        per = max(2, max_keys // len(pls))
        out, worst_added = [], False
        for pl in pls:
            sub = [k for k in keys if (k[1], k[2]) == pl]
            sizes = [s for s in (json.loads(k[0]).get("size") for k in sub) if F.is_num(s)]
            worst = _worst_size(entries, pl)
            keep = representative_sizes(sizes, per)
            if worst is not None and worst not in keep:
                keep = representative_sizes(sizes, per - 1) + [worst]
                worst_added = True
            keep = set(keep)
            out += [k for k in sub if json.loads(k[0]).get("size") in keep or not F.is_num(json.loads(k[0]).get("size"))]
        nsizes = len({json.loads(k[0]).get("size") for k in out})
        notes.insert(0, f"{nsizes} representative sizes" + (" incl. the slowest" if worst_added else ""))
        return out, f"showing {len(out)} of {total} rows ({', '.join(notes)})"
    # prefer aggregate ranks
    agg = [k for k in keys if json.loads(k[0]).get("rank") in PT.AGGREGATE_RANKS]
    if agg and len(agg) < len(keys):
        keys = agg
        notes.append("aggregate ranks only")
    if len(keys) > max_keys:
        worst = defaultdict(float)
        for p in entries:
            c = PT.comparison(p)
            if c and F.is_num(c.get("overhead_pct")):
                k = PT.row_key(p)
                worst[k] = max(worst[k], abs(c["overhead_pct"]) + (1000 if c.get("verdict") == "slower" else 0))
        keep = set(sorted(keys, key=lambda k: -worst.get(k, 0))[:max_keys])
        keys = [k for k in keys if k in keep]
        notes.append("largest overheads")
    return keys, f"showing {len(keys)} of {total} rows ({', '.join(notes)})"
