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
rather than a few numbers overrides records() (osu.py). A preset can also be a TOML file,
`NAME.toml` in the current directory or in `$NEARMETAL_HOME/presets` (apps/preset_file.py):
get() and known() find those too; a built-in's name always means the built-in.
"""

from ...errors import NearmetalError, one_line
from ...registry import Registry
from .. import fom as _fom
from .. import linear

PRESETS = Registry(__name__, "preset")


def names():
    """The built-in presets' names."""
    return PRESETS.names()


def get(name):
    """The preset `name`: a built-in, else the file NAME.toml (apps/preset_file.py); a one-line
    NearmetalError when there is neither, or the file is not a valid preset."""
    if name in PRESETS.names():
        return PRESETS.get(name)()
    from .. import preset_file

    path = preset_file.find(name)
    if path is None:
        raise NearmetalError(unknown(name))
    return FilePreset(name, path, preset_file.load(path))


def check(name):
    """get(name), its error as a ValueError (a study file's validators raise those)."""
    try:
        return get(name)
    except NearmetalError as e:
        raise ValueError(str(e)) from None


def unknown(name):
    from .. import preset_file

    from ...closest import closest

    where = " or ".join(preset_file.places(str(name)[:64]))
    near = closest(name, [*names(), *preset_file.listed()])
    return one_line(f"unknown preset {name!r:.60}: not a built-in one ({', '.join(names())}) and no "
                    f"file {where} (docs/applications.md, 'Writing a preset'; `nearmetal presets` lists them)"
                    + (f"; the closest is '{near}'" if near else ""))


class Preset:
    name = ""          # the registry sets it: the module's name
    title = ""         # "GROMACS"
    command = ()       # a hint: how the program is usually run (`nearmetal presets` shows it)
    summary = ""       # what it reads, for a preset that overrides records() instead of listing foms
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

    def fom_summary(self):
        """Its figures of merit in words: 'ns_per_day (ns/day), mdrun_wall (s)'."""
        return self.summary or ", ".join(f"{f.name} ({f.stored_unit() or 'no unit'})" for f in self.foms)

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


class FilePreset(Preset):
    """A preset read from a TOML file (apps/preset_file.py)."""

    def __init__(self, name, path, spec):
        self.name, self.path = name, path
        self.title, self.command, self.foms = spec.title, tuple(spec.command), tuple(spec.fom)
        self.success, self.version, self._success_in = spec.success, spec.version, spec.success_in

    def success_in(self):
        return self._success_in

    def files(self):
        extra = () if self._success_in == "output" else (self._success_in,)
        return tuple(dict.fromkeys(super().files() + extra))
