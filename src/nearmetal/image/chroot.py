"""Running build commands (on the host and chrooted into the rootfs) with their output in
the build log, and the mounts a chroot needs: always undone, never followed on removal."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
from pathlib import Path

from ..errors import NearmetalError

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


def run(argv, log: BuildLog, what: str, env=None):
    """Run argv with its output in the log; a failure is a one-line error quoting the log."""
    log.write(f"$ {' '.join(argv)}\n")
    start = log.tell()
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=log.fh, stderr=subprocess.STDOUT, env=env)
    except FileNotFoundError:
        raise NearmetalError(f"{what} failed: {argv[0]} is not installed") from None
    if done.returncode != 0:
        raise NearmetalError(f"{what} failed: {log.last_line(start)} (log: {log.path})")


def in_chroot(rootfs: Path, argv, log: BuildLog, what: str):
    run(["chroot", str(rootfs), *argv], log, what, env=CHROOT_ENV)


def chroot_output(rootfs: Path, argv, log: BuildLog) -> str:
    """stdout of a query inside the rootfs; "" (and a line in the log) when it fails."""
    done = subprocess.run(["chroot", str(rootfs), *argv], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, env=CHROOT_ENV)
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
    shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def chroot_mounts(rootfs: Path, log: BuildLog):
    """/proc and /dev inside the rootfs for the duration of the block; always unmounted."""
    try:
        (rootfs / "proc").mkdir(exist_ok=True)
        (rootfs / "dev").mkdir(exist_ok=True)
        run(["mount", "-t", "proc", "proc", str(rootfs / "proc")], log, "mounting /proc in the image")
        run(["mount", "--bind", "/dev", str(rootfs / "dev")], log, "bind-mounting /dev in the image")
        yield
    finally:
        unmount_under(rootfs, log)
