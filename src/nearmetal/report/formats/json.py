"""JSON: the whole analysis (docs/analysis.md)."""

from . import FORMATS


@FORMATS.register
class Json:
    filename = "analysis.json"

    def write(self, analysis, path):
        from ..tables import render_json

        path.write_text(render_json(analysis), encoding="utf-8")
