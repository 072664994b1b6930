"""Presets written as TOML files: `NAME.toml` in the current directory, else in
`$NEARMETAL_HOME/presets`, used as `preset = "NAME"` (a study) or `--preset NAME` (`bench`).

A file holds what a preset module's class attributes hold (docs/applications.md):

    title = "LAMMPS"
    command = ["lmp", "-in", "in.lj"]       # a hint: how the program is usually run
    success = '^Total wall time:'
    version = 'LAMMPS \\((.+?)\\)'

    [[fom]]
    name = "timesteps_per_s"
    regex = '([0-9.]+) timesteps/s'
    unit = "steps/s"

Each [[fom]] is validated as a study's [[benchmark.fom]] is (apps/fom.py: RE2 patterns, a
group, a relative `file`, `lower_is_better`); every problem is one line naming the file and
the key. A built-in preset's name is never looked up as a file: `preset = "gromacs"` means
the module whatever the current directory holds (a study file may well be `gromacs.toml`).
"""

import os

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError, field_validator

from ..errors import NearmetalError, one_line
from .fom import Fom, pattern, relative_path

NAME = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$"   # a file name's stem: no '/', no '..', no dot files
MAX_BYTES = 1 << 20                      # a preset is a few dozen lines


class PresetFile(BaseModel):
    """The keys of a preset file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    title: StrictStr = Field(default="", max_length=100, pattern=r"^[^\x00-\x1f\x7f]*$")
    command: list[StrictStr] = Field(default=[], max_length=64)   # shown by `nearmetal presets`
    fom: list[Fom] = Field(min_length=1, max_length=100)
    success: StrictStr | None = Field(default=None, min_length=1, max_length=2000)
    success_in: StrictStr = "output"     # "output" (stdout then stderr) or a file the program writes
    version: StrictStr | None = Field(default=None, min_length=1, max_length=2000)

    @field_validator("success", "version")
    @classmethod
    def _compiles(cls, v):
        return pattern(v)

    @field_validator("version")
    @classmethod
    def _has_group(cls, v):
        from . import linear

        if v is not None and linear.groups(v) < 1:
            raise ValueError("needs a group around the version, e.g. 'Version: (\\S+)'")
        return v

    @field_validator("success_in")
    @classmethod
    def _where(cls, v):
        return v if v == "output" else relative_path(v, "success_in")

    @field_validator("fom")
    @classmethod
    def _distinct(cls, v):
        seen = [f.name for f in v]
        twice = sorted({n for n in seen if seen.count(n) > 1})
        if twice:
            raise ValueError(f"figure of merit {twice[0]!r} is named twice")
        return v


def places(name, cwd=None):
    """Where a preset file named `name` may be, in the order looked at."""
    from ..home import home_str

    return [os.path.join(cwd or os.getcwd(), f"{name}.toml"),
            os.path.join(home_str(), "presets", f"{name}.toml")]


def find(name, cwd=None):
    """The path of the preset file `name` (the first of places() that exists), or None."""
    import re

    if not re.fullmatch(NAME, name or ""):
        return None
    for path in places(name, cwd):
        if os.path.lexists(path):
            return path
    return None


def load(path):
    """The validated PresetFile at `path`; a one-line NearmetalError naming the file (and the
    key) otherwise."""
    from ..safe_read import read_regular
    from ..study.config.inputs import parse_toml, validation_error

    raw = read_regular(path, MAX_BYTES, "preset file")
    try:
        text = bytes(raw).decode()
    except UnicodeDecodeError:
        raise NearmetalError(one_line(f"preset file {path}: not UTF-8 text")) from None
    data = parse_toml(text, f"preset file {path}")
    try:
        return PresetFile.model_validate(data)
    except ValidationError as e:
        raise validation_error(e, f"preset file {path}", model=PresetFile) from None


def listed(cwd=None):
    """{name: path} of every preset file in the places looked at (the current directory's
    first), whatever their content: `nearmetal presets` reads each."""
    import re

    from ..home import home_str

    found = {}
    for folder in (cwd or os.getcwd(), os.path.join(home_str(), "presets")):
        try:
            entries = sorted(os.listdir(folder))
        except OSError:
            continue
        for entry in entries:
            stem = entry[:-5]
            if entry.endswith(".toml") and re.fullmatch(NAME, stem) and stem not in found:
                found[stem] = os.path.join(folder, entry)
    return found
