"""`nearmetal run --evidence DIR` (and `bench`): the ranks write their evidence files into a
directory the user names. `run` replaces itself with the launcher (the program's exit status
and signals are the launch's own), so nothing is left to collect the files afterwards, as a
study's executor does: they stay in DIR, one ev-HOST-PID.json per process (csrc/nm-evidence.c).
"""

import os

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
