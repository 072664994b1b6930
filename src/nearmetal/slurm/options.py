"""Slurm option values that reach a generated batch script, checked against what Slurm
accepts before anything is written.

sbatch reads the `#SBATCH --KEY=VALUE` lines and bash reads the rest of the script, so a
value holding a newline would end the directive and start a shell command on the cluster.
Every check below accepts ASCII only, with no blanks, quotes, backslashes, `#`, `$`,
backticks, `;`, `&`, `|`, `<`, `>`, parentheses, newlines or other control characters:

    partition  NAME[,NAME...]         NAME: letters, digits and _ . - (first: letter, digit or _)
    account    NAME
    time       M | M:S | H:M:S | D-H | D-H:M | D-H:M:S (digits) | UNLIMITED | INFINITE
    export     ALL | NONE | NIL | [ALL,]VAR[=VALUE][,VAR[=VALUE]...]
               VAR: an environment variable name ([A-Za-z_][A-Za-z0-9_]*)
               VALUE: letters, digits and _ . : / @ + - (may be empty; no comma: sbatch's separator)
    nodes      a whole number >= 1
    paths      (the job's output directory) letters, digits and _ . / : @ + , = ~ -

Each check returns the value or raises NearmetalError with one line naming the option
(`what`; without it, only what is expected: the study-file formatter adds the key path).
"""

import re

from ..errors import NearmetalError

_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.-]*"
_PARTITIONS = re.compile(rf"{_NAME}(,{_NAME})*")
_ACCOUNT = re.compile(_NAME)
_TIME = re.compile(r"[0-9]+(:[0-9]+){0,2}|[0-9]+-[0-9]+(:[0-9]+){0,2}")
_TIME_WORDS = ("UNLIMITED", "INFINITE")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_EXPORT_VALUE = re.compile(r"[A-Za-z0-9_.:/@+-]*")
_EXPORT_WORDS = ("ALL", "NONE", "NIL")
_PATH = re.compile(r"[A-Za-z0-9_./:@+,=~-]+")

RULES = {
    "partition": "partition names separated by commas (letters, digits, _ . -)",
    "account": "an account name (letters, digits, _ . -)",
    "time": "a Slurm time limit: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S, UNLIMITED or INFINITE",
    "export": ("ALL, NONE, NIL or [ALL,]VAR[=VALUE],... (VAR a variable name; VALUE letters, digits "
               "and _ . : / @ + -)"),
    "nodes": "a whole number >= 1",
}


def _refuse(key, value, what):
    if what:
        raise NearmetalError(f"{what}: expected {RULES[key]}, got {value!r}")
    raise NearmetalError(f"expected {RULES[key]}")


def _matching(key, pattern, value, what):
    if not isinstance(value, str) or not pattern.fullmatch(value):
        _refuse(key, value, what)
    return value


def partition(value, what="--partition"):
    return _matching("partition", _PARTITIONS, value, what)


def account(value, what="--account"):
    return _matching("account", _ACCOUNT, value, what)


def _word(value, words):
    """Case-insensitive, ASCII only (Python upper-cases "ı" to "I")."""
    return isinstance(value, str) and value.isascii() and value.upper() in words


def time_limit(value, what="--time"):
    if _word(value, _TIME_WORDS):
        return value
    return _matching("time", _TIME, value, what)


def export(value, what="--export"):
    if not isinstance(value, str) or not value:
        _refuse("export", value, what)
    if _word(value, _EXPORT_WORDS):
        return value
    items = value.split(",")
    if _word(items[0], ("ALL",)):
        items = items[1:]
    for item in items or [""]:
        name, _, val = item.partition("=")
        if not ENV_NAME.fullmatch(name) or not _EXPORT_VALUE.fullmatch(val):
            _refuse("export", value, what)
    return value


def nodes(value, what="--nodes"):
    if isinstance(value, str) and value.isascii() and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        _refuse("nodes", value, what)
    return value


CHECKS = {"partition": partition, "nodes": nodes, "time": time_limit, "account": account, "export": export}


def check_slurm(options, prefix="--"):
    """A RunRequest's scheduler options for Slurm ({partition, nodes, time, account, export}: set
    ones only), every value checked; `prefix` + key names the option in errors."""
    out = {}
    for key, value in (options or {}).items():
        if key not in CHECKS:
            raise NearmetalError(f"unknown Slurm option '{key}' (options: {', '.join(CHECKS)})")
        if value is not None and value != "":
            out[key] = CHECKS[key](value, what=f"{prefix}{key}")
    return out


def script_path(value, what):
    """A path written into a `#SBATCH` line (sbatch splits at blanks, expands %-patterns)."""
    if not _PATH.fullmatch(str(value)):
        raise NearmetalError(f"{what} {str(value)!r} cannot be written into a batch script: "
                             f"a path may hold only letters, digits and _ . / : @ + , = ~ -")
    return str(value)
