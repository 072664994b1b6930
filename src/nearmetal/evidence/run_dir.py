"""`nearmetal run --evidence DIR` (and `bench`): the ranks write their evidence files into a
directory the user names. `run` replaces itself with the launcher (the program's exit status
and signals are the launch's own), so nothing is left to collect the files afterwards, as a
study's executor does: they stay in DIR, one ev-HOST-PID.json per process (csrc/nm-evidence.c).
`bench` waits for its launch, so it reads the files that launch wrote (DIR may hold earlier
runs' files too) and fails a run that was no MPI job (lone.py), as a study does.
"""

import os
import sys

from ..errors import NearmetalError
from ..models import in_container

# what every runtime shows at the same path inside a container (supervise.place_shared)
SHARED = "/tmp/"


def checked_dir(path, mode, dry=False):
    """The absolute DIR, created unless dry; a one-line error where ranks could not write into it."""
    if not path or "\n" in path:
        raise NearmetalError("--evidence: give a directory")
    full = os.path.abspath(os.path.expanduser(path))
    if in_container(mode) and not (full.rstrip("/") + "/").startswith(SHARED):
        raise NearmetalError(f"--evidence {path}: in a container mode the directory must be under /tmp "
                             "(the path every runtime shows unchanged to the ranks)")
    if dry:
        return full
    try:
        os.makedirs(full, exist_ok=True)
    except OSError as e:
        raise NearmetalError(f"--evidence {path}: cannot create it: {e.strerror}") from None
    if not os.path.isdir(full) or not os.access(full, os.W_OK | os.X_OK):
        raise NearmetalError(f"--evidence {path}: not a writable directory")
    return full


def rank_env(env, path, mode, dry=False):
    from . import rank_env as with_evidence

    return with_evidence(env, checked_dir(path, mode, dry))


def listing(path):
    """{name: (mtime_ns, inode)} of the evidence files in DIR before a launch: what it did not write."""
    try:
        with os.scandir(path) as entries:
            return {e.name: (e.stat(follow_symlinks=False).st_mtime_ns, e.inode())
                    for e in entries if e.name.startswith("ev-")}
    except OSError:
        return {}


def written(path, before):
    """The evidence files in DIR that a launch wrote: new, or changed since `before`."""
    return [name for name, stamp in listing(path).items() if before.get(name) != stamp]


def before_launch(args):
    """Under --evidence, (DIR, the evidence files it holds before the launch: listing); else None."""
    if not getattr(args, "evidence", None):
        return None
    where = checked_dir(args.evidence, args.mode)
    return where, listing(where)


def check_launch(args, before, launch_plan):
    """Under --evidence, after a launch that exited 0: one whose ranks were each an MPI job of one
    (a script starting a program of the other MPI) fails, its one-rank numbers not printed; one
    in which no process was seen initialising MPI (a program that links none) is said."""
    if before is None:
        return
    from .collect import read_files
    from .keep import lone_start as why_failed
    from .lone import COMMAND_FIX, without_mpi

    where, listed = before
    new = written(where, listed)
    raws = read_files(where, remove=False, names=new) if new else []
    why = why_failed(raws, launch_plan, COMMAND_FIX) if raws else None
    if why:
        raise NearmetalError(why.removeprefix("nearmetal: "))
    ranks = sum(c.ranks for c in launch_plan.components)
    if ranks > 1 and not new:
        print(f"nearmetal {args.command}: note: no rank wrote its evidence (a program linked statically, or ranks "
              "on nodes that do not share /tmp), so whether the launch was one MPI job was not checked",
              file=sys.stderr)
    elif without_mpi(raws, ranks):
        print(f"nearmetal {args.command}: note: no process of the launch was seen initialising MPI: a program that "
              f"links no MPI runs as {ranks} copies, each on its own, and its numbers are one copy's (one that links "
              "MPI statically is not seen)", file=sys.stderr)
