"""The line of a failed run's output that says why it failed.

A launcher that aborts a job appends its own banner (Open MPI's "MPI_ABORT was invoked ...
Set MCA parameter", MPICH's "BAD TERMINATION ... EXIT CODE"), and a runtime may add retry
warnings: the last line of the output is that boilerplate, while the program's or the
runtime's own error ("nm-iobench: ...: No space left on device", podman's "Error: ...") came
first. The reports and `io sweep` name the run's failure by this line.
"""

import re

# what launchers and runtimes print around any failure: never the reason itself
BOILERPLATE = re.compile("|".join((
    r"^[-=*]{8,}$",                                             # banner rules
    r"MPI_ABORT was invoked on rank", r"^with errorcode \d+", r"NOTE: invoking MPI_ABORT",
    r"You may or may not see output from other processes", r"exactly when Open MPI kills them",
    r"Primary job\s+terminated normally", r"a non-zero exit code\. Per user-direction",
    r"detected that one or more processes exited with non-zero status", r"the job to be terminated\. The first",
    r"^Process name:", r"^Exit code:", r"more process(es)? ha(s|ve) sent help message",
    r"Set MCA parameter \"orte_base_help_aggregate\"",           # Open MPI (mpirun, orted)
    r"BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES", r"^PID \d+ RUNNING AT", r"^EXIT CODE: \d+",
    r"CLEANING UP REMAINING PROCESSES", r"YOU CAN IGNORE THE BELOW CLEANUP MESSAGES",
    r"YOUR APPLICATION TERMINATED WITH THE EXIT STRING", r"This typically refers to a problem with your application",
    r"Please see the FAQ page for debugging suggestions", r"^\[mpiexec@[^\]]*\]",   # MPICH's hydra
    r"\blevel=(warning|info|debug)\b",                         # podman's and runc's log lines (retries)
)))
SAYS_WHY = re.compile(r"(?i)\b(error|cannot|can't|could not|failed|no such|no space|denied|not found|refused|"
                      r"unable|invalid|killed|signal|segmentation|out of memory)\b")
MOST = 300


def failure_line(text, kept=None):
    """The first line that states an error and is not boilerplate; else the first line that is
    not boilerplate; else the last line; '' for no output. kept: the most characters the
    store keeps of an output; a text that long was cut, and its first line is a fragment."""
    lines = [l.strip() for l in (text or "").splitlines() if l.strip()]
    if kept and len(text or "") >= kept and len(lines) > 1:
        lines = lines[1:]
    own = [l for l in lines if not BOILERPLATE.search(l)]
    line = next((l for l in own if SAYS_WHY.search(l)), own[0] if own else (lines[-1] if lines else ""))
    return line if len(line) <= MOST else line[:MOST].rsplit(" ", 1)[0] + " …"
