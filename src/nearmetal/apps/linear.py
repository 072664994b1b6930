"""Patterns over a program's output, decided in time linear in the output: RE2.

A figure-of-merit or `success` pattern is the user's, and so is the output it searches (a
program's log, up to 64 MiB of a file). Python's `re` backtracks: `(a+)+$` over a line of
40 a's never ends. RE2 (the google-re2 bindings) runs a DFA, falling back to an NFA whose
work is bounded by the output's length times the pattern's program size; it refuses what
needs backtracking (backreferences, lookaround), with a one-line reason when the pattern is
checked. The program size is capped too (MAX_PROGRAM), so the worst case stays bounded:
ordinary FOM patterns ("Time per step: ([0-9.]+)") are a few dozen instructions.

Texts are searched as UTF-8 bytes (surrogateescape: undecodable output is still searched),
with `^` and `$` matching at line ends, as the rules in docs/applications.md say.
"""

import functools

import re2

MAX_PROGRAM = 600  # RE2 instructions; "[ab]*a[ab]{200}c" is 207, a FOM pattern a few dozen


def _reason(e):
    msg = e.args[0] if e.args else e
    return msg.decode("utf-8", "replace") if isinstance(msg, bytes) else str(msg)


@functools.lru_cache(maxsize=256)
def compiled(pattern):
    """The RE2 program of pattern (multi-line), or a ValueError saying why not."""
    options = re2.Options()
    options.log_errors = False  # RE2 would log the reason to stderr as well
    try:
        program = re2.compile(("(?m)" + pattern).encode("utf-8", "surrogateescape"), options=options)
    except re2.error as e:
        raise ValueError(f"not a regular expression nearmetal can run in linear time ({_reason(e)}; "
                         f"RE2 syntax: no backreferences or lookaround)") from None
    if program.programsize > MAX_PROGRAM:
        raise ValueError(f"pattern too complex ({program.programsize} RE2 instructions, at most {MAX_PROGRAM}): "
                         f"match the line with the number, not the whole output")
    return program


def groups(pattern):
    return compiled(pattern).groups


def _bytes(text):
    return (text or "").encode("utf-8", "surrogateescape")


def _text(value):
    return None if value is None else value.decode("utf-8", "replace")


def found(pattern, text):
    """Whether pattern occurs in text."""
    return compiled(pattern).search(_bytes(text)) is not None


def first(pattern, text):
    """The groups (str or None) of the first match, or None when there is none."""
    m = compiled(pattern).search(_bytes(text))
    return None if m is None else tuple(_text(g) for g in m.groups())


def last(pattern, text):
    """The groups (str or None) of the last match, or None when there is none."""
    m = None
    for m in compiled(pattern).finditer(_bytes(text)):
        pass
    return None if m is None else tuple(_text(g) for g in m.groups())
