"""What a build shows while it works: a rich spinner with elapsed time per step on a
terminal, plain lines on stderr otherwise (logs, CI, tests)."""

from __future__ import annotations

import contextlib
import sys
import time


class Reporter:
    def __init__(self, name: str, progress: bool, quiet: bool = False):
        """quiet: no plain lines (off a terminal), so that a refusal's stderr is its one error line."""
        self.name = name
        self.rich = bool(progress) and sys.stdout.isatty()
        self.quiet = quiet and not self.rich
        self._progress = None

    def note(self, text: str):
        if self.quiet:
            return
        if self.rich:
            from ..console import Console

            (self._progress.console if self._progress else Console()).print(f"[bold]nearmetal:[/bold] {text}")
        else:
            print(f"nearmetal: {text}", file=sys.stderr, flush=True)

    @contextlib.contextmanager
    def session(self, title: str):
        t0 = time.monotonic()
        if not self.rich:
            self.note(title)
            yield
            self.note(f"image '{self.name}' ready ({time.monotonic() - t0:.1f}s)")
            return
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        from ..console import Console

        with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), transient=False,
                      console=Console()) as p:
            self._progress = p
            p.console.print(f"[bold]nearmetal:[/bold] {title}")
            try:
                yield
            finally:
                self._progress = None
        self.note(f"image '{self.name}' ready ({time.monotonic() - t0:.1f}s)")

    @contextlib.contextmanager
    def step(self, text: str, timings: dict | None = None, key: str | None = None):
        """One step; its seconds go into timings[key] (image.json's "timings")."""
        t0 = time.monotonic()
        task = None
        if self._progress is not None:
            task = self._progress.add_task(text, total=None)
        elif not self.quiet:
            print(f"nearmetal: [{self.name}] {text} ...", file=sys.stderr, flush=True)
        failed = True
        try:
            yield
            failed = False
        finally:
            elapsed = time.monotonic() - t0
            if timings is not None and key:
                timings[key] = round(elapsed, 2)
            if task is not None:
                mark = "[red]✗[/red]" if failed else "[green]✓[/green]"
                self._progress.update(task, description=f"{mark} {text}", total=1, completed=1)
                self._progress.stop_task(task)
            elif not self.quiet:
                status = "failed" if failed else "done"
                print(f"nearmetal: [{self.name}] {text}: {status} ({elapsed:.1f}s)", file=sys.stderr, flush=True)
