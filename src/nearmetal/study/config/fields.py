"""Value types of study files (and of `nearmetal io` studies): strict integers and strings
within the limits of what can run, names checked against the registries at validation time.
"""

import re
from typing import Annotated

from pydantic import AfterValidator, Field, StrictInt, StrictStr

from ...choices import modes as _modes
from ...choices import networks as _networks
from ...choices import runtimes as _runtimes
from ...choices import schedulers as _schedulers
from .inputs import check_image_spec, check_mpi_spec

# Beyond these a value is a typo or an attack that would fail late (E2BIG, OverflowError).
MAX_RANKS, MAX_THREADS = 1_000_000, 1024
MAX_TIMEOUT = 7 * 24 * 3600          # seconds: a week
MAX_EXEC_STRING = 64 << 10           # bytes per argument or environment value (Linux allows 128 KiB)
MAX_EXEC_TOTAL = 1 << 20             # bytes of a benchmark's arguments and environment together
# [study] name, and every study name given on the command line (--study): it names a
# directory (results/NAME/), so no separator, no leading dot, no "..".
STUDY_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"


def study_name_problem(name):
    """None when `name` is a valid study name, else why it is not."""
    if re.fullmatch(STUDY_NAME[1:-1], name):
        return None
    return ("a study name is 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit "
            "(it names a directory under results/)")


def _fits_exec(v):
    n = len(v.encode())
    if n > MAX_EXEC_STRING:
        raise ValueError(f"{n} bytes; an argument or environment value is at most {MAX_EXEC_STRING} bytes")
    return v


def _nonblank(v):
    if v.strip():
        return v
    raise ValueError("expected a non-empty string")


ExecString = Annotated[StrictStr, AfterValidator(_fits_exec)]
Ranks = Annotated[StrictInt, Field(ge=1, le=MAX_RANKS)]
Threads = Annotated[StrictInt, Field(ge=1, le=MAX_THREADS)]
ImageName = Annotated[StrictStr, Field(max_length=4096), AfterValidator(check_image_spec)]


def _choices(names):
    """A string that must be one of names() — asked at validation time, so a backend
    registered after this module was imported (a plugin, a test) is accepted too."""

    def check(v):
        have = names()
        if v not in have:
            quoted = [f"'{n}'" for n in have]
            listed = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + f" or {quoted[-1]}"
            raise ValueError(f"Input should be {listed}")
        return v

    return Annotated[StrictStr, AfterValidator(check)]


Mode = _choices(_modes)
Runtime = _choices(_runtimes)
Mpi = Annotated[StrictStr, AfterValidator(check_mpi_spec)]  # FAMILY or FAMILY@/PREFIX
Scheduler = _choices(_schedulers)
Network = _choices(_networks)


def _account_name(v):
    """An account the ranks run as ("": the caller's own); whether it exists is asked when a
    cell is planned, so a study runs its other cells on a machine without it."""
    from ...privilege import name_problem

    why = name_problem(v) if v != "" else None
    if why:
        raise ValueError(why)
    return v


Account = Annotated[StrictStr, AfterValidator(_account_name)]

def _gpus(v):
    """A --gpus value (all, a count, a comma list of GPU indices/UUIDs; an integer is a count)
    in its one spelling, or "" for no GPU; checked by the code the command line uses."""
    from ...gpu.select import canonical, problem

    if isinstance(v, bool) or not isinstance(v, (str, int)):
        raise ValueError("expected all, a count, or a comma list of GPU indices/UUIDs (\"\": no GPU)")
    if v == "":
        return v
    why = problem(str(v))
    if why:
        raise ValueError(why)
    return canonical(str(v))


Gpus = Annotated[StrictStr | StrictInt, AfterValidator(_gpus)]

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _env_names(env):
    """Variable names only: a name is written into launcher and runtime arguments."""
    for key in env:
        if not _ENV_NAME.match(key):
            raise ValueError(f"{key!r:.60} is not an environment variable name")
    return env


EnvMap = Annotated[dict[str, ExecString], AfterValidator(_env_names)]
