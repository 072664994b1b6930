"""Running build commands (on the host and chrooted into the rootfs) with their output in
the build log. Each runs under nm-supervise, so it ends when nearmetal does (SIGKILL
included); a chrooted one gets /proc and /dev in a mount namespace of its own (nm-supervise
--chroot), and debootstrap mounts in one of its own (--private-mounts): the host never sees
these mounts, and they vanish with the command however the build ends. Removing a build
tree still unmounts first and never follows a mount (trees left by older versions)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
from pathlib import Path

from ..errors import NearmetalError, one_line

CHROOT_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "DEBIAN_FRONTEND": "noninteractive",
    "LC_ALL": "C",
    "HOME": "/root",
}


class BuildLog:
    """The full log of one build (NAME.build.log); errors quote its last line."""

    def __init__(self, path: Path, truncate: bool):
        self.path = path
        self.fh = open(path, "w" if truncate else "a")

    def write(self, text):
        self.fh.write(text)
        self.fh.flush()

    def note(self, text):
        """nearmetal's own `# ...` line: what it quotes (a mirror from the environment, a file
        name from the image) cannot start another line."""
        from ..errors import one_line

        self.write(f"# {one_line(text)}\n")

    def flush(self):
        self.fh.flush()

    def tell(self):
        self.fh.flush()
        return os.path.getsize(self.path)

    def last_line(self, start: int) -> str:
        self.fh.flush()
        with open(self.path, "rb") as fh:
            fh.seek(start)
            lines = [line.strip() for line in fh.read().decode(errors="replace").splitlines() if line.strip()]
        return lines[-1] if lines else "no output"

    def __del__(self):
        with contextlib.suppress(Exception):
            self.fh.close()


def supervised(argv, root: Path | None = None, private_mounts=False):
    """argv under nm-supervise, ending with this process; root: chrooted there with /proc and
    /dev mounted in the command's own mount namespace; private_mounts: what it mounts stays
    in a namespace of its own."""
    from .. import supervise

    options = ["--chroot", str(Path(root).absolute())] if root is not None else []
    if private_mounts and root is None:
        options.append("--private-mounts")
    return supervise.wrap(list(argv), options=options)


def run(argv, log: BuildLog, what: str, env=None, root: Path | None = None, private_mounts=False):
    """Run argv (chrooted into root) with its output in the log; a failure is a one-line error
    quoting the log."""
    shown = (["chroot", str(root)] if root is not None else []) + [str(a) for a in argv]
    log.write(f"$ {one_line(' '.join(shown))}\n")  # an argument (a package, a path) never starts a line
    start = log.tell()
    if root is None and not shutil.which(argv[0], path=(env or os.environ).get("PATH")):
        raise NearmetalError(f"{what} failed: {argv[0]} is not installed")
    try:
        done = subprocess.run(supervised(argv, root, private_mounts), stdin=subprocess.DEVNULL, stdout=log.fh,
                              stderr=subprocess.STDOUT, env=env)
    except FileNotFoundError:
        raise NearmetalError(f"{what} failed: {argv[0]} is not installed") from None
    if done.returncode != 0:
        raise NearmetalError(f"{what} failed: {log.last_line(start)} (log: {log.path})")


def in_chroot(rootfs: Path, argv, log: BuildLog, what: str):
    run(argv, log, what, env=CHROOT_ENV, root=rootfs)


def chroot_capture(rootfs: Path, argv) -> subprocess.CompletedProcess:
    """argv run chrooted into rootfs (its /proc and /dev in its own mount namespace), output captured."""
    return subprocess.run(supervised(argv, rootfs), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          env=CHROOT_ENV)


def chroot_output(rootfs: Path, argv, log: BuildLog) -> str:
    """stdout of a query inside the rootfs; "" (and a line in the log) when it fails."""
    done = chroot_capture(rootfs, argv)
    if done.returncode != 0:
        log.write(f"$ chroot {rootfs} {' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()}\n")
        return ""
    return done.stdout


def mounts_under(path: Path) -> list[str]:
    prefix = str(path.resolve())
    points = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            fields = line.split()
            if len(fields) > 4:
                point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
                if point == prefix or point.startswith(prefix + "/"):
                    points.append(point)
    return points


def unmount_under(path: Path, log: BuildLog | None = None):
    """Unmount everything mounted under path, deepest first; lazily when busy."""
    for _ in range(3):
        points = mounts_under(path)
        if not points:
            return
        for point in sorted(points, key=len, reverse=True):
            done = subprocess.run(["umount", point], stdin=subprocess.DEVNULL, capture_output=True, text=True)
            if done.returncode != 0:
                subprocess.run(["umount", "-l", point], stdin=subprocess.DEVNULL, capture_output=True)
            if log:
                log.write(f"# unmounted {point}\n")


def remove_tree(path: Path):
    """Remove a build tree, never following a bind mount (of /dev!) into the host."""
    unmount_under(path)
    if mounts_under(path):
        raise NearmetalError(f"cannot remove {path}: still has mounts ({', '.join(mounts_under(path))}); "
                             "unmount them and remove it by hand")
    from .beneath import rmtree_at

    try:  # iterative (a crafted image thousands of directories deep), errors ignored as before
        parent = os.open(Path(path).parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            rmtree_at(parent, Path(path).name)
        finally:
            os.close(parent)
    except OSError:
        pass


@contextlib.contextmanager
def chroot_mounts(rootfs: Path, log: BuildLog):
    """The mount points every chrooted command gets /proc and /dev on (in its own mount
    namespace: nothing is mounted here on the host); whatever is found mounted under the
    rootfs afterwards is unmounted."""
    try:
        for point in ("proc", "dev"):
            if (rootfs / point).is_symlink():
                raise NearmetalError(f"the image's /{point} is a symbolic link: refusing to mount over it")
            (rootfs / point).mkdir(exist_ok=True)
        yield
    finally:
        unmount_under(rootfs, log)
