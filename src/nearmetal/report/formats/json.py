"""JSON: the whole analysis (docs/analysis.md)."""

from . import FORMATS


@FORMATS.register
class Json:
    filename = "analysis.json"

    def write(self, analysis, path):
        from ...safe_write import write_text
        from ..tables import render_json

        write_text(path, render_json(analysis), "report")
