"""Figures of merit: a named number found by a regular expression in a program's output or
in a file it writes, with a unit (which says whether higher is better).

Rules (docs/applications.md): the pattern's first group is the value; when the pattern
matches several times the last match counts (programs print progress, then a summary);
the text searched is stdout then stderr, or `file` (relative to the run's working
directory). A FOM not found, a value that is not a number, or a `success` pattern that does
not match is a FomError whose message says which and shows the end of what was searched.
Patterns run on RE2 (apps/linear.py): decided in time linear in the output, never a hang.
"""

import math

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, field_validator, model_validator

from ..errors import NearmetalError
from . import linear

MAX_FILE_BYTES = 64 << 20  # a FOM file is read whole: a program's log, not its data
_TAIL = 400


class FomError(NearmetalError):
    """A run's output lacks what a FOM or `success` needs: the run is failed, with this reason."""


class Fom(BaseModel):
    """One figure of merit (a [[benchmark.fom]] table)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")
    regex: StrictStr = Field(min_length=1, max_length=2000)
    unit: StrictStr = Field(default="", max_length=32, pattern=r"^[^\x00-\x1f\x7f]*$")
    lower_is_better: StrictBool | None = None   # default: from the unit (rates: higher is better)
    file: StrictStr | None = None               # searched instead of stdout+stderr
    # Another FOM of the same program this one is the reciprocal of (a rate and its time, e.g.
    # timesteps_per_s of loop_time): one quantity, answered once (analysis/quantities.py).
    inverse_of: StrictStr | None = Field(default=None, pattern=r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")
    # A pattern the run's output must hold. Accepted here too, as TOML puts a `success` key
    # written after a [[benchmark.fom]] header into that table.
    success: StrictStr | None = Field(default=None, min_length=1, max_length=2000)

    @field_validator("regex", "success")
    @classmethod
    def _compiles(cls, v):
        return pattern(v)

    @field_validator("regex")
    @classmethod
    def _has_group(cls, v):
        if linear.groups(v) < 1:
            raise ValueError("needs a group around the number, e.g. 'Time: ([0-9.eE+-]+) s'")
        return v

    @model_validator(mode="after")
    def _not_its_own_inverse(self):
        if self.inverse_of == self.name:
            raise ValueError(f"inverse_of names the figure of merit itself ({self.name!r})")
        return self

    @field_validator("file")
    @classmethod
    def _relative(cls, v):
        return relative_path(v, "file")

    def stored_unit(self):
        """The unit as stored with each value: the unit itself, plus "(higher is better)" or
        "(lower is better)" when lower_is_better overrides what the unit says."""
        from ..analysis.stats import direction_for_unit

        if self.lower_is_better is None or direction_for_unit(self.unit) == (not self.lower_is_better):
            return self.unit
        return f"{self.unit} ({'lower' if self.lower_is_better else 'higher'} is better)".strip()


def pattern(v):
    """v, when it is a pattern nearmetal can run (or None); a ValueError saying why otherwise."""
    if v is not None:
        linear.compiled(v)
    return v


def relative_path(v, what):
    """A path inside the run's working directory: relative, no '..', no NUL."""
    if v is None:
        return v
    if not v or "\x00" in v or v.startswith("/") or ".." in v.split("/"):
        raise ValueError(f"{what} must be a relative path inside the run's working directory, got {v!r:.80}")
    return v


def tail(text, n=_TAIL):
    text = (text or "").strip()
    return text if len(text) <= n else "…" + text[-n:]


def number(text, what):
    if text is None:
        raise FomError(f"{what}: the pattern's first group matched nothing")
    try:
        value = float(text.replace("D", "e").replace("d", "e"))  # Fortran's 1.0D+03
    except (TypeError, ValueError):
        raise FomError(f"{what}: {text!r:.40} is not a number") from None
    if not math.isfinite(value):
        raise FomError(f"{what}: {text!r:.40} is not a finite number")
    from ..study.records import out_of_range

    if why := out_of_range(value):
        raise FomError(f"{what}: {why}")
    return value


def decided(how, pattern, text, what):
    """how(pattern, text) (apps/linear.py), a FomError when the search took too long."""
    try:
        return how(pattern, text)
    except linear.Undecided as e:
        raise FomError(f"{what}: {e}") from None


def search(fom, texts):
    """The value of one FOM: texts maps a source name ("output" or a file) to its text."""
    source = fom.file or "output"
    text = texts.get(source)
    if text is None:
        raise FomError(f"FOM '{fom.name}': the program wrote no file {fom.file!r}")
    groups = decided(linear.last, fom.regex, text, f"FOM '{fom.name}'")
    if groups is None:
        raise FomError(f"FOM '{fom.name}' not found in the {'output' if source == 'output' else source} "
                       f"(pattern {fom.regex!r:.80}); its end: {tail(text)!r}")
    return number(groups[0], f"FOM '{fom.name}'")


def check_success(pattern, texts, source="output"):
    """FomError unless `pattern` is found in texts[source] (the output, or a file)."""
    if not pattern:
        return
    if source not in texts:
        raise FomError(f"the program wrote no file {source!r} (where a completed run says {pattern!r:.60})")
    if not decided(linear.found, pattern, texts[source], "`success`"):
        where = "print" if source == "output" else f"write in {source}"
        raise FomError(f"the run did not {where} what `success` asks for ({pattern!r:.80}); "
                       f"its end: {tail(texts[source])!r}")


def records(foms, texts):
    """[{metric, unit, value, point}] for regex FOMs; FomError for the first missing one."""
    out = []
    for fom in foms:
        check_success(fom.success, texts)
        out.append({"metric": fom.name, "unit": fom.stored_unit(), "value": search(fom, texts), "point": {}})
    return out
