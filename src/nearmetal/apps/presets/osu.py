"""OSU Micro-Benchmarks format: any osu_* program (or nearmetal's OSU-format kernels run as
plain commands). Its table is read by the kernels' own OSU reader: latency (us) or
bandwidth (MB/s) per message size, each size a point."""

from .. import fom as _fom
from . import PRESETS, Preset


@PRESETS.register
class Osu(Preset):
    title = "OSU Micro-Benchmarks"
    command = ("osu_latency",)
    summary = "latency (us) or bandwidth (MB/s) per message size"
    version = r"^# OSU MPI[^\n]*?(v?\d+\.\d+[\w.]*)"

    def records(self, texts):
        from ...kernels.parsers.osu import parse

        out = [{"metric": r["metric"], "unit": r["unit"], "value": r["value"], "point": r["params"]}
               for r in parse(texts.get("output", ""), kernel="osu", params={})]
        if not out:
            raise _fom.FomError(f"no OSU result table in the output; its end: {_fom.tail(texts.get('output'))!r}")
        return out
