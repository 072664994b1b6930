"""One self-contained HTML file: tables, verdicts and inline SVG figures (report/html.py)."""

from . import FORMATS


@FORMATS.register
class Html:
    filename = "report.html"

    def write(self, analysis, path):
        from ..html import render_html

        render_html(analysis, path)
