"""nm-iobench: '#' lines (`# nm-iobench 1`, `# config ...`, `# fs DIR TYPE`,
`# hint KEY requested=V effective=E STATUS`, `# effective ...`, `# file PATH`), the table
`rank open_s write_s close_s read_s total_s` with one row per rank and a "max" row, then
`# bytes N files F write_MBps W read_MBps R|- verify ok|skipped|FAILED n mismatches`.

Records:
  per rank (rank=R) and rank="max", unit "s": open_s, write_s, close_s, read_s, total_s
  rank="total": write_bw and read_bw (unit "MB/s"; no read_bw with -r none), bytes (unit
  "bytes"), files (unit "count"), and per requested hint `hint.KEY` (unit "bool": 1 honoured
  or changed, 0 ignored).
Output without the table (or without its max row or summary line) raises ValueError. Empty
output gives no records: the kernel stopped before reporting (bad input, a failed I/O call)
and its exit status and stderr say why.
"""

from ...errors import NearmetalError
from . import record

from .. import KernelSpec, register

register(KernelSpec("iobench", "nm-iobench", "iobench", "FMS/MOM5-style parallel I/O: write patterns x libraries x MPI-IO hints", 1,
                    primary="total_s", shape="io"))


HEADER = "rank open_s write_s close_s read_s total_s"
TIMES = ("open_s", "write_s", "close_s", "read_s", "total_s")


class IobenchOutputError(NearmetalError, ValueError):
    """Output that is not nm-iobench's report: a ValueError for callers that parse, and a
    one-line NearmetalError for the CLI."""


def _hint(line):
    """(key, 0|1) from `# hint KEY requested=V effective=E STATUS`, else None."""
    parts = line.split()
    if len(parts) < 6 or not parts[3].startswith("requested=") or not parts[4].startswith("effective="):
        return None
    status = parts[5].rstrip(":")
    if status in ("honoured", "changed"):
        return parts[2], 1
    if status == "ignored":
        return parts[2], 0
    return None


def _summary(line):
    """{word: value} from `# bytes N files F write_MBps W read_MBps R verify ...`."""
    words = line[1:].split()
    return {words[k]: words[k + 1] for k in range(0, len(words) - 1, 2) if words[k] != "verify"}


def parse(text, kernel, params):
    if not text.strip():
        return []
    out, hints, summary, in_table, have_max, ranks = [], [], None, False, False, 0
    for line in text.splitlines():
        s = line.strip()
        if s == HEADER:
            in_table = True
            continue
        if s.startswith("# hint "):
            h = _hint(s)
            if h:
                hints.append(h)
            continue
        if s.startswith("# bytes "):
            summary = _summary(s)
            continue
        if not in_table or not s or s.startswith("#"):
            continue
        parts = s.split()
        if len(parts) != 6 or not (parts[0].isdigit() or parts[0] == "max"):
            continue
        try:
            values = [float(v) for v in parts[1:]]
        except ValueError:
            continue
        rank = int(parts[0]) if parts[0].isdigit() else "max"
        have_max |= rank == "max"
        ranks += rank != "max"
        for metric, value in zip(TIMES, values):
            out.append(record(kernel, params, metric, value, "s", rank=rank))
    if not in_table or not ranks or not have_max:
        raise IobenchOutputError("nm-iobench printed no rank table (with a max row)")
    if summary is None:
        raise IobenchOutputError("nm-iobench printed no '# bytes ...' summary line")
    try:
        out.append(record(kernel, params, "bytes", float(summary["bytes"]), "bytes", rank="total"))
        out.append(record(kernel, params, "files", float(summary["files"]), "count", rank="total"))
        out.append(record(kernel, params, "write_bw", float(summary["write_MBps"]), "MB/s", rank="total"))
        if summary.get("read_MBps", "-") != "-":
            out.append(record(kernel, params, "read_bw", float(summary["read_MBps"]), "MB/s", rank="total"))
    except (KeyError, ValueError) as e:
        raise IobenchOutputError(f"nm-iobench summary line is malformed: {e}") from None
    for key, value in hints:
        out.append(record(kernel, params, f"hint.{key}", value, "bool", rank="total"))
    return out
