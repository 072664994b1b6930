"""The terminal report: one compact rich table per benchmark and metric, then the verdicts
in words per variant and the failures.

Rows are point (message size, rank pair, ...) x variant; long tables keep representative
points only (row_selection.select_rows) and say so: the full table is in the HTML report.

iobench benchmarks (one per I/O configuration; an I/O sweep has hundreds) get one compact
table instead: configuration x variant with the slowest rank's write and total time and the
write bandwidth, fastest first; per-rank values are in the HTML report.
"""

import textwrap

from rich import box
from rich.table import Table
from rich.text import Text

from . import formatting as F
from . import matrix as M
from . import kernel_semantics as K
from . import method_words as MW
from . import points as PT
from . import row_selection as RS
from . import summaries as S

VERDICT_STYLE = {"equivalent": "green", "slower": "bold red", "faster": "cyan", "inconclusive": "yellow",
                 "baseline": "dim"}


RIGHT = ("n", "median", "ratio", "overhead", "noise")


def _width(cols, body, headers=None):
    """Width of a SIMPLE_HEAD table without edge padding: the cells and their headers as
    shown (headers: {column: header} where it differs from the column's name), 3 characters
    between columns (padding, the box's blank divider, padding) and its blank edge on either side."""
    headers = headers or {}
    return sum(max([len(headers.get(col, col))] + [len(str(r[col])) for r in body]) + 3 for col in cols) - 1


def _verdict_text(p, is_baseline):
    v = PT.count_verdict(p) or PT.verdict_of(p)  # a count: "same" or "differs", no verdict
    if v is None:
        return Text("baseline" if is_baseline else "—", style=VERDICT_STYLE["baseline"])
    return Text(v, style=VERDICT_STYLE.get(v, ""))


def render_terminal(analysis, console, max_rows=RS.TERMINAL_MAX_KEYS):
    """Print the report of an analysis dict (docs/analysis.md) on a rich Console."""
    _render_findings(analysis, console)
    _render_answer(analysis, console)
    from .why import render_why

    render_why(analysis.get("why"), console)
    study = analysis.get("study") or {}
    points = analysis.get("points") or []
    labels, dropped = PT.short_variant_labels(analysis)
    bases = PT.baseline_ids(analysis)
    title = f"Study {study.get('name', '?')}"
    if study.get("description"):
        title += f": {study['description']}"
    console.print(Text(title, style="bold"))
    margin = study.get("margin")
    bits = []
    if F.is_num(margin):
        bits.append(f"equivalence margin ±{margin * 100:g}%")
    bits.append(MW.ratio_note(analysis))
    bits.append(MW.NOISE)
    if dropped:
        bits.append(f"variant names leave out what every variant has: {dropped}")
    console.print(Text("; ".join(bits) + ".", style="dim"))
    if (analysis.get("contention") or {}).get("text"):  # runs taken on a busy machine (study/execute/contention.py)
        console.print(Text("⚠ " + analysis["contention"]["text"], style="bold yellow"))
    if (analysis.get("machine_check") or {}).get("text"):  # busy at the start, or stopped early (study/execute/machine_check.py)
        console.print(Text("⚠ " + analysis["machine_check"]["text"], style="bold yellow"))

    noise_index = PT.noise_by_row(points)
    vorder = PT.variant_order(analysis)
    any_cut = False
    io_points = [p for p in points if K.is_io(p)]
    if io_points:
        any_cut = _render_io(io_points, labels, bases, vorder, console) or any_cut
    for (bench, metric), entries in PT.group_points([p for p in points if not K.is_io(p)]).items():
        first = entries[0]
        keys, note = RS.select_rows(entries, max_rows)
        any_cut = any_cut or bool(note)
        keyset = set(keys)
        multi_pl = len(PT.placements(entries)) > 1
        unit = first.get("unit") or ""
        head = f"{bench}" + (f" · {metric}" if metric != bench else "") + (f" ({unit})" if unit else "")
        kern = K.kernel_shown(first.get("kernel"))
        sub = PT.direction_words(first)
        if kern and kern != bench:
            sub = f"kernel {kern}, " + sub
        if not multi_pl and first.get("ranks"):
            sub += ", " + F.placement_words(first.get("ranks"), first.get("threads"))
        rows = [p for p in entries if PT.row_key(p) in keyset]
        order = {k: i for i, k in enumerate(keys)}
        rows.sort(key=lambda p: (order[PT.row_key(p)], vorder.get(p.get("variant"), 1e9)))
        cols = ["point"] + (["r×t"] if multi_pl else []) + ["variant", "n", "median", "ratio", "overhead",
                                                            "verdict", "noise"]
        body, sections, prev = [], [], None
        for p in rows:
            k = PT.row_key(p)
            newkey = k != prev
            sections.append(newkey and prev is not None)
            prev = k
            s = p.get("stats") or {}
            c = PT.comparison(p)
            med = PT.median_of(p)
            vid = p.get("variant")
            cells = {"point": F.point_label(p.get("point")) if newkey else "",
                     "r×t": F.fmt_placement(p.get("ranks"), p.get("threads")) if newkey else "",
                     "variant": labels.get(vid, vid) + (" ⚠" if p.get("disturbed") else ""),
                     "n": str(s.get("n", len(p.get("values") or []))),
                     "median": f"{F.fmt_num(med)} {unit}".strip() if med is not None else "—",
                     "ratio": F.fmt_ratio(c), "overhead": F.fmt_pct(c.get("overhead_pct")) if c else "—",
                     "verdict": _verdict_text(p, vid in bases), "noise": PT.row_noise(p, noise_index)}
            body.append(cells)
        # narrow consoles: leave out a point column that names no point, then n, noise and
        # overhead, rather than cutting cells short; a variant's label is never folded
        empty_point = all(c["point"] in ("", "—") for c in body)
        headers = {"ratio": MW.ratio_column(analysis)}  # 'var/base [90%]': measured as shown
        for drop in (["point"] if empty_point else []) + ["n", "noise", "overhead"]:
            if _width(cols, body, headers) <= console.width:
                break
            cols.remove(drop)
        fits = _width(cols, body, headers) <= console.width
        table = Table(title=f"{head} — {sub}", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                      caption=(note + "; full table in the HTML report") if note else None, caption_justify="left")
        for col in cols:
            table.add_column(headers.get(col, col),
                             justify="right" if col in RIGHT else "left", no_wrap=fits or col == "variant",
                             overflow="fold")
        for cells, new_section in zip(body, sections):
            if new_section:
                table.add_section()
            table.add_row(*(cells[col] for col in cols))
        console.print(table)

    console.print(Text("Summary", style="bold"))
    for s in S.variant_summaries(analysis):
        style = "red" if s["counts"]["slower"] else ("green" if s["compared"] else "dim")
        console.print(Text(s["text"], style=style))
    head, first = S.failures_summary(analysis)
    console.print(Text(head, style="bold red" if first else "dim"))
    if first:
        code = first.get("exit_status")
        console.print(Text(f"first: {first.get('run_key')} ({first.get('status')}"
                           + (f", exit status {code}" if code is not None else "") + ")"
                           + (f": {first['why']}" if first.get("why") else "") + "; stderr tail:", style="red"))
        console.print(Text(F.tail_lines(first.get("stderr_tail")), style="dim", overflow="fold"))
    if any_cut:
        console.print(Text("Long tables show representative points only: the full table is in the HTML report "
                           "(report.html).", style="dim"))


def _render_findings(analysis, console):
    """The published findings the study checks, and whether this machine reproduces each."""
    rows = S.findings(analysis)
    if not rows:
        return
    console.print(Text("Findings", style="bold"))
    for f in rows:
        console.print(Text(S.finding_line(f), style=VERDICT_STYLE.get(f["tone"], "")))
    console.print()


def _render_answer(analysis, console):
    """The first screen: the summary and the verdict matrix (matrix.py) within 100 columns,
    then one sentence per variant (analysis['answers'], analysis/answers.py)."""
    a = S.answer(analysis)
    if a is None:
        return
    name = (analysis.get("study") or {}).get("name")
    console.print(Text("Answer" + (f" (study {name})" if name else ""), style="bold"))
    m = M.build(analysis)
    if m is not None:
        width = min(M.TERMINAL_WIDTH, console.width)
        for text in m["summary"]:
            console.print(Text("\n".join(textwrap.wrap(text, width, break_on_hyphens=False))), overflow="fold")
        console.print()
        for line in M.terminal_lines(m, width):
            t = Text(no_wrap=True, overflow="ignore")
            for seg, verdict in line:
                t.append(seg, style=VERDICT_STYLE.get(verdict, "") if verdict else "")
            console.print(t)
        console.print(Text("\n".join(textwrap.wrap(m["legend"], width)), style="dim"))
        console.print()
    for text, tone in a["sentences"]:
        console.print(Text(text, style=VERDICT_STYLE.get(tone, "")))
    console.print(Text(a["note"], style="dim"))
    console.print()


IO_MAX_ROWS = 24


def _render_io(points, labels, bases, vorder, console):
    """One table for every iobench configuration x variant; returns True when rows were cut."""
    want = {("write_s", "max"): "write", ("total_s", "max"): "total", ("write_bw", "total"): "bw"}
    rows = {}
    for p in points:
        key = (p.get("metric"), str((p.get("point") or {}).get("rank")))
        if key in want:
            row = rows.setdefault((p.get("benchmark"), p.get("variant"), p.get("ranks"), p.get("threads")), {})
            row[want[key]] = p
    if not rows:
        return False
    order = sorted(rows, key=lambda k: (PT.median_of(rows[k]["write"]) if "write" in rows[k]
                                        and PT.median_of(rows[k]["write"]) is not None else float("inf"),
                                        vorder.get(k[1], 1e9)))
    shown = order[:IO_MAX_ROWS]
    table = Table(title="Parallel I/O (iobench) — slowest rank, fastest write first", title_justify="left",
                  box=box.SIMPLE_HEAD, pad_edge=False,
                  caption=(f"{len(shown)} of {len(order)} configurations; all of them in the HTML report and "
                           f"`nearmetal io best`") if len(shown) < len(order) else None, caption_justify="left")
    body = []
    for bench, vid, _ranks, _threads in shown:
        r = rows[(bench, vid, _ranks, _threads)]
        w = r.get("write")
        s = (w or {}).get("stats") or {}
        med = {k: PT.median_of(r[k]) if k in r else None for k in ("write", "total", "bw")}
        body.append({"configuration": str(bench), "variant": labels.get(vid, vid), "n": str(s.get("n", "—")),
                     "write": f"{F.fmt_num(med['write'])} s" if med["write"] is not None else "—",
                     "total": f"{F.fmt_num(med['total'])} s" if med["total"] is not None else "—",
                     "write MB/s": F.fmt_num(med["bw"]) if med["bw"] is not None else "—",
                     "write vs baseline": F.fmt_ratio(PT.comparison(w)) if w else "—",
                     "verdict": _verdict_text(w, vid in bases) if w else Text("—"),
                     "_compared": bool(w and PT.comparison(w))})
    cols = ["configuration", "variant", "n", "write", "total", "write MB/s", "write vs baseline", "verdict"]
    # an I/O sweep usually has one variant and nothing to compare it with: no empty columns
    if len({b["variant"] for b in body}) == 1:
        cols.remove("variant")
    if not any(b["_compared"] for b in body):
        cols = [c for c in cols if c not in ("write vs baseline", "verdict")]
    # narrow consoles: keep configuration and variant (rows are ambiguous without them)
    for drop in ("n", "verdict", "total", "write MB/s"):
        if _width(cols, body) <= console.width or drop not in cols:
            continue
        cols.remove(drop)
    for col in cols:
        table.add_column(col, justify="left" if col in ("configuration", "variant", "verdict") else "right",
                         overflow="fold", no_wrap=col != "configuration")
    for b in body:
        table.add_row(*(b[col] for col in cols))
    console.print(table)
    return len(shown) < len(order)
