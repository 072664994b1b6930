"""A point's parameters in words ('64 KiB', '0→3', 'rank total'): what the analysis' own
sentences (mode_compare.answer_words) and every report format call a point. Here, below the
report, because the analysis must not import what renders it."""

import math


def is_num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def fmt_ratio(x):
    """A cost ratio in as many digits as tell a 3% margin apart, each number on its own (an
    interval of 6.28e-05–1066 must not print its 0.259 as 0): 1.004, 0.969, 6.40, 12.3."""
    if not is_num(x):
        return "—"
    ax = abs(x)
    if ax < 0.1:
        return f"{x:.3g}"
    if ax < 2:
        return f"{x:.3f}"
    if ax < 10:
        return f"{x:.2f}"
    return f"{x:.1f}" if ax < 100 else f"{x:.0f}"


def fmt_ratios(*xs):
    """A ratio and its interval's ends, written alike where they can be (1.950 [1.900–2.050]:
    the most decimals any of them needs), each on its own where one is below 0.1 (0.259
    [6.28e-05–1066])."""
    nums = [x for x in xs if is_num(x)]
    if not nums or min(abs(x) for x in nums) < 0.1:
        return tuple(fmt_ratio(x) for x in xs)
    digits = max(3 if abs(x) < 2 else 2 if abs(x) < 10 else 1 if abs(x) < 100 else 0 for x in nums)
    return tuple(f"{x:.{digits}f}" if is_num(x) else "—" for x in xs)


def fmt_size(n):
    """Bytes in binary units: 8 B, 1 KiB, 64 KiB, 1 MiB, 1.5 MiB."""
    if not is_num(n):
        return str(n)
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= scale:
            q = n / scale
            return f"{q:.0f} {unit}" if q == int(q) else f"{q:.3g} {unit}"
    return f"{n:.0f} B" if n == int(n) else f"{n:g} B"


def point_label(point):
    """Human label of a point's parameters: '64 KiB', '0→3', 'rank total', 'phase halo'."""
    if not point:
        return "—"
    parts = []
    rest = dict(point)
    if "size" in rest:
        parts.append(fmt_size(rest.pop("size")))
    if "src" in rest and "dst" in rest:
        parts.append(f"{rest.pop('src')}→{rest.pop('dst')}")
    if "rank" in rest:
        parts.append(f"rank {rest.pop('rank')}")
    for k, v in rest.items():
        parts.append(f"{k} {v}")
    return ", ".join(parts)
