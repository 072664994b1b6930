"""Reports of a study's analysis (nearmetal.study.analysis.analyze, docs/analysis.md):
terminal tables (terminal.py), one self-contained HTML file (html.py), markdown, CSV and
JSON (tables.py). docs/reports.md explains every section.

    write_report(analysis, out_dir, "html")  -> out_dir/report.html
"""

from pathlib import Path

from .terminal import render_terminal  # noqa: F401  (public API)

FORMATS = ("html", "md", "csv", "json")
FILENAMES = {"html": "report.html", "md": "report.md", "csv": "points.csv", "json": "analysis.json"}


def write_report(analysis, out_dir, fmt):
    """Write the report in format fmt (one of FORMATS) into out_dir (created if needed);
    returns the path written."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown report format '{fmt}' (formats: {', '.join(FORMATS)})")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / FILENAMES[fmt]
    if fmt == "html":
        from .html import render_html

        render_html(analysis, path)
    elif fmt == "md":
        from .tables import render_markdown

        path.write_text(render_markdown(analysis), encoding="utf-8")
    elif fmt == "csv":
        from .tables import write_csv

        write_csv(analysis, path)
    else:
        from .tables import render_json

        path.write_text(render_json(analysis), encoding="utf-8")
    return path
