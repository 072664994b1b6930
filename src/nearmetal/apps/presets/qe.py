"""Quantum ESPRESSO (pw.x): the PWSCF wall and CPU time from its closing timing line,
`PWSCF        :      1.23s CPU      1.45s WALL` (also in its 1m 2.34s and 1h 2m forms),
and `JOB DONE.` as the sign of a completed run."""

import re

from .. import fom as _fom
from .. import linear
from ..fom import FomError, tail
from . import PRESETS, Preset

_TIME = r"((?:[0-9]+h\s*)?(?:[0-9]+m\s*)?(?:[0-9.]+s)?)"
# Run on RE2 (apps/linear.py): with Python's re, `^\s*` over a long run of blank lines backtracks.
_LINE = rf"^\s*PWSCF\s*:\s*{_TIME}\s*CPU\s*{_TIME}\s*WALL"


def seconds(text):
    """QE's '1h 2m', '1m23.45s', '12.34s' as seconds."""
    m = re.fullmatch(r"\s*(?:([0-9]+)h)?\s*(?:([0-9]+)m)?\s*(?:([0-9.]+)s)?\s*", text or "")
    if not m or not any(m.groups()):
        raise FomError(f"Quantum ESPRESSO time {text!r:.40} is not a time")
    h, mnt, s = (float(g) if g else 0.0 for g in m.groups())
    return h * 3600 + mnt * 60 + s


@PRESETS.register
class Qe(Preset):
    title = "Quantum ESPRESSO"
    command = ("pw.x", "-in", "scf.in")
    summary = "pwscf_wall (s), pwscf_cpu (s)"
    success = r"JOB DONE\."
    version = r"Program PWSCF (v\.\S+)"

    def records(self, texts):
        _fom.check_success(self.success, texts)
        found = _fom.decided(linear.last, _LINE, texts.get("output", ""), "Quantum ESPRESSO's timing line")
        if not found:
            raise FomError(f"no 'PWSCF : ... CPU ... WALL' line in the output; its end: {tail(texts.get('output'))!r}")
        cpu, wall = found
        return [{"metric": "pwscf_wall", "unit": "s", "value": seconds(wall), "point": {}},
                {"metric": "pwscf_cpu", "unit": "s", "value": seconds(cpu), "point": {}}]
