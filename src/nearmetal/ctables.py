"""The C backend tables (*.def): one X-macro line per trace layer or iobench backend.

The C sources include a table with the macro defined as they need it (an enum, a name
list, an array of vtables), the Makefile reads the first argument of each line with sed,
and the Python side reads the same file here instead of keeping its own copy of the list.
A line is `MACRO(arg, arg, ...)` at the start of a line; arguments are C identifiers,
integers or string literals (no commas or escapes inside them). Comments are ignored.
"""

import re
from functools import cache

from .errors import NearmetalError

_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_ARG = re.compile(r'\s*("[^"\\]*"|[A-Za-z_][A-Za-z0-9_]*|-?\d+)\s*(?:,|$)')


def _value(token):
    if token.startswith('"'):
        return token[1:-1]
    return int(token) if token.lstrip("-").isdigit() else token


def parse(text, macro, source="table"):
    """The argument tuples of every `macro(...)` line of a table's text, in order."""
    rows = []
    line_re = re.compile(rf"^[ \t]*{re.escape(macro)}\((.*)\)[ \t]*$", re.M)
    body = _COMMENT.sub(lambda m: "\n" * m.group().count("\n"), text)
    for match in line_re.finditer(body):
        args, pos, inner = [], 0, match.group(1)
        while pos < len(inner):
            arg = _ARG.match(inner, pos)
            if not arg:
                line = body.count("\n", 0, match.start()) + 1
                raise NearmetalError(f"{source}:{line}: cannot read {macro}({inner}): arguments must be names, "
                                     "integers or plain string literals")
            args.append(_value(arg.group(1)))
            pos = arg.end()
        rows.append(tuple(args))
    return rows


@cache
def read(path, macro):
    """The rows of the table file at `path` (read once per process)."""
    with open(path, encoding="utf-8") as f:
        return tuple(parse(f.read(), macro, path))
