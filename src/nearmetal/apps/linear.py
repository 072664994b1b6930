"""Patterns over a program's output, decided in bounded time: RE2.

A figure-of-merit or `success` pattern is the user's, and so is the output it searches (a
program's log, up to 64 MiB of a file). Python's `re` backtracks: `(a+)+$` over a line of
40 a's never ends. RE2 (the google-re2 bindings) never backtracks; it refuses what needs
backtracking (backreferences, lookaround), with a one-line reason when the pattern is
checked, and its program size is capped (MAX_PROGRAM).

RE2 runs a DFA, linear in the output; for a few patterns the DFA's states explode and RE2
falls back to an NFA whose work is the output's length times the program's size (about
9 ns per byte and instruction measured: `[ab]*a[ab]{580}c` takes ~5 s per MiB). So a search
whose worst case is small (IN_PROCESS_WORK) runs here, and a larger one in a worker process
that is ended after MATCH_SECONDS: the pattern is then refused for that output, in one line.
Ordinary patterns over ordinary output (a few dozen instructions, a few MiB) never start a
worker.

Texts are searched as UTF-8 bytes (surrogateescape: undecodable output is still searched),
with `^` and `$` matching at line ends, as the rules in docs/applications.md say.
"""

import functools
import json
import os
import subprocess
import sys

import re2

from ..errors import NearmetalError

MAX_PROGRAM = 600             # RE2 instructions; "[ab]*a[ab]{200}c" is 207, a FOM pattern a few dozen
IN_PROCESS_WORK = 100_000_000  # bytes x instructions: under ~1 s even where the DFA gives up
MATCH_SECONDS = 10
# "last" walks every match in Python, about 3 us each: a pattern that matches at every byte
# (`(\d*)`) over 14 MiB took 40 s here. Past this many matches the search goes to the worker.
MAX_MATCHES_HERE = 100_000


class Undecided(NearmetalError):
    """The search did not end within MATCH_SECONDS."""


class _ManyMatches(Exception):
    """More than MAX_MATCHES_HERE matches met in this process."""


def _reason(e):
    msg = e.args[0] if e.args else e
    msg = msg.decode("utf-8", "replace") if isinstance(msg, bytes) else str(msg)
    return msg.replace("(?m)", "", 1)  # RE2 quotes the pattern with the multi-line flag nearmetal adds


def _options():
    options = re2.Options()
    options.log_errors = False  # RE2 would log the reason to stderr as well
    return options


@functools.lru_cache(maxsize=256)
def compiled(pattern):
    """The RE2 program of pattern (multi-line), or a ValueError saying why not."""
    try:
        program = re2.compile(b"(?m)" + pattern.encode("utf-8", "surrogateescape"), options=_options())
    except re2.error as e:
        raise ValueError(f"not a regular expression nearmetal can run in linear time ({_reason(e)}; "
                         f"RE2 syntax: no backreferences or lookaround)") from None
    if program.programsize > MAX_PROGRAM:
        raise ValueError(f"pattern too complex ({program.programsize} RE2 instructions, at most {MAX_PROGRAM}): "
                         f"match the line with the number, not the whole output")
    return program


def groups(pattern):
    return compiled(pattern).groups


def _run(program, op, data, max_matches=None):
    """op on bytes: "found" (bool), "first" or "last" (the match's groups as bytes, or None);
    _ManyMatches when "last" meets more than max_matches matches."""
    if op == "found":
        return program.search(data) is not None
    if op != "last":
        m = program.search(data)
        return None if m is None else m.groups()
    m = None
    for count, m in enumerate(program.finditer(data), 1):
        if max_matches is not None and count > max_matches:
            raise _ManyMatches
    return None if m is None else m.groups()


def _search(pattern, text, op):
    program = compiled(pattern)
    data = (text or "").encode("utf-8", "surrogateescape")
    if len(data) * program.programsize <= IN_PROCESS_WORK:
        try:
            return _run(program, op, data, MAX_MATCHES_HERE)
        except _ManyMatches:
            pass  # where it can be ended
    return _in_worker(pattern, op, data)


def _in_worker(pattern, op, data):
    """_run in a child process ended after MATCH_SECONDS; it ends itself too when nearmetal
    dies (parent-death signal, and a CPU-time limit)."""
    head = json.dumps({"pattern": pattern, "op": op}).encode() + b"\n"
    try:
        out = subprocess.run([sys.executable, "-I", "-c", _WORKER, _PACKAGE_ROOT, str(MATCH_SECONDS)],
                             input=head + data, capture_output=True, timeout=MATCH_SECONDS)
    except subprocess.TimeoutExpired:
        raise Undecided(f"pattern {pattern!r:.80} not decided within {MATCH_SECONDS} s over "
                        f"{len(data) / (1 << 20):.1f} MiB (RE2's slow case: simplify it, or match one line)") from None
    if out.returncode != 0:
        raise Undecided(f"pattern {pattern!r:.80}: its search over {len(data) / (1 << 20):.1f} MiB failed "
                        f"({out.stderr.decode(errors='replace').strip()[-200:] or out.returncode})")
    got = json.loads(out.stdout)
    return got if not isinstance(got, list) else tuple(None if g is None else bytes.fromhex(g) for g in got)


# -I: no PYTHON* variables or user site; nearmetal imported from where this process has it
_WORKER = ("import sys; sys.path.insert(0, sys.argv[1]); "
           "from nearmetal.apps.linear import _worker; _worker(sys.argv[2])")
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _worker(seconds):
    import ctypes
    import resource
    import signal

    parent = os.getppid()
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # nearmetal died before the line above
        sys.exit(1)
    seconds = int(seconds)
    resource.setrlimit(resource.RLIMIT_CPU, (seconds + 1, seconds + 2))
    head, _, data = sys.stdin.buffer.read().partition(b"\n")
    ask = json.loads(head)
    got = _run(compiled(ask["pattern"]), ask["op"], data)
    json.dump(got if not isinstance(got, tuple) else [None if g is None else g.hex() for g in got], sys.stdout)


def _text(value):
    return None if value is None else value.decode("utf-8", "replace")


def found(pattern, text):
    """Whether pattern occurs in text; Undecided when that takes too long."""
    return _search(pattern, text, "found")


def first(pattern, text):
    """The groups (str or None) of the first match, or None when there is none."""
    m = _search(pattern, text, "first")
    return None if m is None else tuple(_text(g) for g in m)


def last(pattern, text):
    """The groups (str or None) of the last match, or None when there is none."""
    m = _search(pattern, text, "last")
    return None if m is None else tuple(_text(g) for g in m)
