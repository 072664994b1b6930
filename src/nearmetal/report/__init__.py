"""Reports of a study's analysis (nearmetal.analysis.analyze.analyze, docs/analysis.md):
terminal tables (terminal.py), and one module per file format in formats/ (HTML through
html.py; Markdown, CSV and JSON through tables.py). docs/reports.md explains every section.

    write_report(analysis, out_dir, "html")  -> out_dir/report.html
"""

from pathlib import Path

from .terminal import render_terminal  # noqa: F401  (public API)



def write_report(analysis, out_dir, fmt):
    """Write the report in format fmt (report/formats/) into out_dir (created if needed);
    returns the path written."""
    from ..errors import NearmetalError
    from .formats import get

    try:
        writer = get(fmt)
    except NearmetalError as e:  # a programming error here: the command line offers only known formats
        raise ValueError(str(e)) from None
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / writer.filename
    writer.write(analysis, path)
    return path


def __getattr__(name):
    # FORMATS: the report format registry's names (report/formats/).
    if name == "FORMATS":
        from .formats import names

        return names()
    raise AttributeError(name)
