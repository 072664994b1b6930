"""The trace report's HTML page is rendered by the report's template machinery
(report/templating.py, templates/trace.html): escaped, with the Markdown's content."""

import pytest

from nearmetal.trace import callpath, render
from test_trace_cli import _two_ranks

pytestmark = pytest.mark.unit


def test_the_page_is_the_trace_template_escaped(monkeypatch):
    monkeypatch.setattr(render.shutil, "which", lambda name: None)  # no Graphviz: the DOT text instead
    a = callpath.analyze(_two_ranks())
    a["nodes"][0]["function"] = "<script>alert(1)</script>"
    a["directory"] = "dir & <b>"
    page = render.page(a)
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</body></html>")
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<h1>I/O trace: dir &amp; &lt;b&gt;</h1>" in page
    node = next(n for n in a["nodes"] if n["function"] == "pwrite")
    assert (f"<td>posix</td><td>pwrite</td><td>1</td><td>1600</td><td>1</td>\n<td>60 µs</td>"
            f"<td>{render._t(node['total_s'])}</td>") in page  # the Markdown's total column too
    assert "Graphviz is not installed" in page and "digraph callpath" in page
    assert f"{len(a['ranks'])} processes; layers: {', '.join(a['layers'])};" in page
    # the files as an HTML table, cell for cell the Markdown's rows (it was the Markdown in <pre>)
    md_rows = [l for l in render.markdown(a).split("## Files", 1)[1].splitlines() if l.startswith("| /")]
    assert md_rows
    for row in md_rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert "<tr><td>" + "</td><td>".join(cells) + "</td></tr>" in page, row
    assert "<pre>" not in page.split("<h2>Files</h2>", 1)[1] and "| file |" not in page


def test_the_markdown_warning_names_the_incomplete_ranks_as_ranks_not_a_count(monkeypatch):
    """'ranks without a complete trace: 0' read as a count of none; it was rank 0; the page says it too."""
    from nearmetal.trace import render

    monkeypatch.setattr(render.shutil, "which", lambda name: None)  # no Graphviz: no process in a unit test

    a = {"directory": "d", "ranks": [0, 1], "layers": ["posix"], "omitted_edges": 0, "threshold": 0.01,
         "dropped_events": 0, "incomplete_ranks": [0], "nodes": [], "edges": [], "files": [], "hints": [],
         "write_paths": []}
    said = "Warning: rank 0 without a complete trace (ended before finishing: the last second or so of calls is missing)."
    assert said in render.markdown(a) and f"<p><b>{said}</b></p>" in render.page(a)
    assert "\n2 processes; layers seen: posix;" in render.markdown(a)  # not "2 processs"
    assert "1 process; layers seen" in render.markdown(dict(a, ranks=[0]))
    a.update(incomplete_ranks=[], dropped_events=3)
    assert "Warning: 3 events dropped (a record the tracer could not keep).\n" in render.markdown(a)
    a.update(incomplete_ranks=[2, 3], dropped_events=1)
    assert "Warning: 1 event dropped (a record the tracer could not keep); ranks 2, 3 without a complete" in render.markdown(a)
    a.update(incomplete_ranks=["pid 41"], dropped_events=0)
    assert "Warning: pid 41 without a complete trace (" in render.markdown(a)  # not a rank: not "rank pid 41"
    a["write_paths"] = [{"layer": "posix", "function": "pwrite", "calls": 1, "writing_ranks": 1, "per_rank_s": {}}]
    assert "- posix `pwrite` (1 call, 1 rank writes)" in render.markdown(a)  # not "1 calls, 1 ranks write"


def test_a_study_dry_run_preloads_the_evidence_library_once_beside_the_tracer(monkeypatch):
    """study --dry-run showed two evidence libraries for a `trace = true` benchmark: the dry
    run's placeholder and a built one the tracer's environment added."""
    from nearmetal import evidence
    from nearmetal.trace import build

    monkeypatch.setattr(build, "library", lambda: "/tmp/nearmetal-0/nm-trace-1.so")  # the seam: no compiler here
    monkeypatch.setattr(evidence, "library", lambda: (_ for _ in ()).throw(AssertionError("built in a dry run")))
    env = evidence.rank_env({}, "/tmp/stage", dry=True)
    env = build.rank_env("/tmp/trace-DIR", ["mpiio"], env)
    preload = env["LD_PRELOAD"].split()
    assert [p.rsplit("/", 1)[1] for p in preload] == ["nm-evidence-BUILT.so", "nm-trace-1.so"], preload
