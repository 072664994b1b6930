"""No process outlives nearmetal: every job starts under `nm-supervise` (C, beside this file).

nm-supervise keeps the job's whole process tree below a child subreaper that terminates
it when nearmetal dies, whatever killed it (SIGKILL included), when the launcher exits
leaving processes behind, or when asked (SIGTERM/SIGINT): the launcher first, SIGKILL
for what is left after a grace period. See nm-supervise.c for the mechanism.

The binary is built with the host's C compiler on first use, into the nearmetal home,
named by its sources' sizes and times (a new build when one changes). Only os/stat on the hot
path (`nearmetal run`).
"""

import os

from ..errors import NearmetalError
from ..home import home_str

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nm-supervise.c")
# SOURCE #includes these: one translation unit, one binary
INCLUDED = tuple(os.path.join(os.path.dirname(SOURCE), f"nm-supervise-{part}.c") for part in ("tree", "view", "shm"))
GRACE_S = 1.0  # nm-supervise's default --grace-ms, in seconds


def binary():
    """The path of nm-supervise built from its sources (built when needed). Named by the
    sources' sizes and times: checkouts of different versions sharing one nearmetal home (a
    CI clone beside a working tree) each run their own build, never one another's."""
    stamps = "-".join(f"{st.st_size}-{st.st_mtime_ns}" for st in map(os.stat, (SOURCE, *INCLUDED)))
    path = os.path.join(home_str(), "tools", f"nm-supervise-{stamps}")
    return path if os.path.exists(path) else build(path, SOURCE)


def build_tool(path, source, flags=("-O2", "-Wall")):
    """A small C helper of nearmetal's at `path`, (re)built from `source` when older."""
    try:
        if os.stat(path).st_mtime >= os.stat(source).st_mtime:
            return path
    except OSError:
        pass
    return build(path, source, flags)


def build(path, source=SOURCE, flags=("-O2", "-Wall"), libs=()):
    """Compile `source` (one path, or a list of them) with the host's cc into `path`."""
    import subprocess
    import tempfile

    os.makedirs(os.path.dirname(path), exist_ok=True)
    name = os.path.basename(path)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=f".{name}.")
    os.close(fd)
    sources = [source] if isinstance(source, str) else list(source)
    try:
        out = subprocess.run(["cc", *flags, "-o", tmp, *sources, *libs], capture_output=True, text=True)
    except OSError as e:
        os.unlink(tmp)
        raise NearmetalError(f"cannot build {name} (a C compiler is needed: Debian's gcc): {e.strerror}")
    if out.returncode != 0:
        os.unlink(tmp)
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise NearmetalError(f"building {name} failed: {last}")
    os.replace(tmp, path)  # atomic: concurrent first uses each install a complete binary
    return path


def wrap(argv, die_with_parent=True, options=()):
    """argv run under nm-supervise; die_with_parent: the job ends when this process does;
    options: nm-supervise's own (--as, --mask, --show: privilege.supervise_options;
    --launcher: argv is an MPI launcher, whose run ends with its ranks, daemons or not)."""
    return [binary()] + (["--die-with-parent"] if die_with_parent else []) + list(options) + ["--"] + list(argv)


def stop(proc, grace=GRACE_S):
    """Ask a supervised job (a Popen of wrap(...)) to end; SIGKILL its process group if it
    has not within the grace period plus a margin. Returns nothing; the caller reaps."""
    import signal  # not at the top: it imports enum, ~6 ms on `nearmetal run`'s path

    try:
        proc.send_signal(signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=grace + 3)
    except Exception:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def place_shared(built, stem, suffix=".so"):
    """A copy of a built library under /tmp/nearmetal-<uid>/, named by its build time, read-only:
    /tmp is the path every runtime shows unchanged inside a container, so the ranks preload
    the same file natively and in any image (the witness, the I/O tracer). The directory is
    0711: not listable, but ranks run as another account (run --user) can load a file of it
    by its name (copies of nearmetal's own libraries, 0555)."""
    shared = os.path.join("/tmp", f"nearmetal-{os.getuid()}")
    os.makedirs(shared, mode=0o711, exist_ok=True)
    st = os.lstat(shared)
    if not os.path.isdir(shared) or os.path.islink(shared) or st.st_uid != os.getuid():
        raise NearmetalError(f"{shared} is not a directory of this user's: refusing to place {stem} there")
    if st.st_mode & 0o777 != 0o711:
        os.chmod(shared, 0o711)  # made 0700 by an earlier version (or the umask)
    # nanoseconds: two builds within one second must not share a name
    target = os.path.join(shared, f"{stem}-{os.stat(built).st_mtime_ns}{suffix}")
    if not os.path.exists(target):
        import shutil

        tmp = f"{target}.{os.getpid()}"
        shutil.copyfile(built, tmp)
        os.chmod(tmp, 0o555)
        os.replace(tmp, target)
    return target


def stage_dir(kind, shared):
    """A fresh directory KIND-PID.PIDNS-XXXXXXXX for the ranks' files under the shared directory
    (place_shared's). Those a process of this user left there when it died without cleaning
    up (SIGKILL: a walk-through found 400 empty evidence directories) are removed first: their
    PID is gone from their PID namespace, which is this process's (a nearmetal in a container
    sharing /tmp sees other PIDs: its directories are left alone, as a live owner's are)."""
    import shutil
    import tempfile

    from ..proc import pid_exists

    prefix = f"{kind}-"
    try:
        pidns = str(os.stat("/proc/self/ns/pid").st_ino)
        names = os.listdir(shared)
    except OSError:  # no namespace to judge in (nothing is removed), or nothing to remove
        pidns, names = "unknown", []
    for name in names:
        owner = name[len(prefix):].split("-", 1)[0] if name.startswith(prefix) else ""
        pid, _, ns = owner.partition(".")
        if pid.isdecimal() and ns == pidns and int(pid) != os.getpid() and not pid_exists(int(pid)):
            shutil.rmtree(os.path.join(shared, name), ignore_errors=True)
    return tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}.{pidns}-", dir=shared)


# One-source libraries the ranks load (the witness, the auditor): no stack protector or
# fortified calls, whose newer glibc symbol versions older images lack.
PRELOAD_FLAGS = ("-O2", "-Wall", "-shared", "-fPIC", "-fno-stack-protector", "-U_FORTIFY_SOURCE")


def preloaded_library(stem, source):
    """The path under /tmp of tools/STEM.so built from `source` (rebuilt when older), placed
    where every runtime shows it at the same path (place_shared)."""
    return place_shared(build_tool(os.path.join(home_str(), "tools", f"{stem}.so"), source, flags=PRELOAD_FLAGS), stem)
