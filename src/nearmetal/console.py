"""The one rich Console class nearmetal prints through: a reader that closes the pipe early
(`nearmetal report | head`) ends the command quietly with BROKEN_PIPE_STATUS, 128 + SIGPIPE,
as a Unix tool killed by SIGPIPE does. rich's own default exits 1, which reads as an error.
The exit goes up as SystemExit, so every `finally` still runs: a study stops its ranks and
keeps every finished run, and a later `--resume` goes on."""

import os
import signal
import sys

from rich.console import Console as _RichConsole

BROKEN_PIPE_STATUS = 128 + signal.SIGPIPE


def quiet_stdout():
    """Point stdout at /dev/null: Python's flush at exit must not fail on the closed pipe again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


class Console(_RichConsole):
    def on_broken_pipe(self):
        self.quiet = True
        quiet_stdout()
        raise SystemExit(BROKEN_PIPE_STATUS)
