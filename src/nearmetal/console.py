"""The one rich Console class nearmetal prints through. A reader that closes the pipe early
(`nearmetal report | head`) silences the console, and the command goes on with what it does
besides printing (writing the HTML report, storing runs) and then exits with
BROKEN_PIPE_STATUS, 128 + SIGPIPE, as a Unix tool killed by SIGPIPE does, nothing on stderr.
rich's own default exits 1 at once, which reads as an error and loses what was still to do."""

import os
import signal

from rich.console import Console as _RichConsole

BROKEN_PIPE_STATUS = 128 + signal.SIGPIPE
_closed = []  # the consoles whose reader went away (cli.main's exit status)


def quiet(stream):
    """Point a closed stream at /dev/null: Python's flush at exit must not fail on it again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, stream.fileno())
    os.close(devnull)


def reader_went_away():
    """Whether a console's reader went away since the last ask (main() runs in-process in tests)."""
    went = bool(_closed)
    _closed.clear()
    return went


class Console(_RichConsole):
    def on_broken_pipe(self):
        self.quiet = True  # prints nothing from now on; the command goes on
        try:
            quiet(self.file)
        except (AttributeError, OSError, ValueError):  # a file without a descriptor: nothing to redirect
            pass
        _closed.append(self)
