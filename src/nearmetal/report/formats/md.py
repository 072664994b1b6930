"""Markdown: the summary and one table per benchmark and metric."""

from . import FORMATS


@FORMATS.register
class Markdown:
    filename = "report.md"

    def write(self, analysis, path):
        from ..tables import render_markdown

        path.write_text(render_markdown(analysis), encoding="utf-8")
