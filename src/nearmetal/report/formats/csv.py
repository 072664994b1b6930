"""CSV: one row per point and variant, with its statistics and verdict."""

from . import FORMATS


@FORMATS.register
class Csv:
    filename = "points.csv"

    def write(self, analysis, path):
        from ..tables import write_csv

        write_csv(analysis, path)
