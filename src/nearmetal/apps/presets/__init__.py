"""Presets: the figures of merit of known applications, one module each.

A preset says where a program reports its figures of merit (patterns over its output, or
over a file it writes), what a completed run prints, and how to read the program's
version for the run's provenance. A new one is one module here:

    @PRESETS.register
    class Lammps(Preset):
        title = "LAMMPS"
        foms = (Fom(name="timesteps_per_s", regex=r"([0-9.]+) timesteps/s", unit="steps/s"),)
        success = r"^Total wall time:"
        version = r"LAMMPS \\((.+?)\\)"

and `preset = "lammps"` in a study's [[benchmark]]. A preset whose output is a table
rather than a few numbers overrides records() (osu.py).
"""

from ...registry import Registry
from .. import fom as _fom
from .. import linear

PRESETS = Registry(__name__, "preset")


def names():
    return PRESETS.names()


def get(name):
    return PRESETS.get(name)()


class Preset:
    name = ""          # the registry sets it: the module's name
    title = ""         # "GROMACS"
    foms = ()          # apps.fom.Fom entries
    success = None     # a pattern every completed run's output holds
    version = None     # a pattern whose first group is the program's version (output or files)

    def files(self):
        """The files (relative to the run's working directory) this preset reads."""
        return tuple(dict.fromkeys(f.file for f in self.foms if f.file))

    def records(self, texts):
        """[{metric, unit, value, point}] from texts ({"output": ..., file: ...}); FomError
        when something is missing."""
        _fom.check_success(self.success, texts, self.success_in())
        return _fom.records(self.foms, texts)

    def success_in(self):
        return "output"

    def program_version(self, texts):
        """The program's version as it reports it, or None."""
        if not self.version:
            return None
        for text in texts.values():
            try:
                groups = linear.first(self.version, text)
            except linear.Undecided:  # provenance only: not worth failing the run for
                continue
            if groups and groups[0]:
                return groups[0].strip()[:100]
        return None
