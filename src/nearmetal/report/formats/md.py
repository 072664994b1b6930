"""Markdown: the summary and one table per benchmark and metric."""

from . import FORMATS


@FORMATS.register
class Markdown:
    filename = "report.md"

    def write(self, analysis, path):
        from ...safe_write import write_text
        from ..tables import render_markdown

        write_text(path, render_markdown(analysis), "report")
