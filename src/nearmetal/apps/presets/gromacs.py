"""GROMACS (gmx_mpi mdrun): performance in ns/day and the run's wall time, from md.log
(mdrun's default log name; a run with -deffnm NAME or -g FILE writes NAME.log: give your
own [[benchmark.fom]] with file = "NAME.log" then)."""

from ..fom import Fom
from . import PRESETS, Preset

_NUM = r"([0-9.]+(?:[eE][+-]?[0-9]+)?)"


@PRESETS.register
class Gromacs(Preset):
    title = "GROMACS"
    command = ("gmx_mpi", "mdrun", "-s", "topol.tpr")
    foms = (
        Fom(name="ns_per_day", regex=rf"^Performance:\s+{_NUM}", unit="ns/day", file="md.log"),
        # "       Time:   Core t (s)   Wall t (s)": the second number is the wall time, from which
        # mdrun computes ns/day (its steps are fixed): one quantity, answered once
        Fom(name="mdrun_wall", regex=rf"^\s+Time:\s+[0-9.eE+-]+\s+{_NUM}", unit="s", file="md.log",
            inverse_of="ns_per_day"),
    )
    success = r"^Finished mdrun"
    version = r"^GROMACS version:\s+(\S+)"

    def success_in(self):
        return "md.log"
