"""A copy of the rootfs imported into nearmetal's private podman storage, which is where
the podman runtime starts containers from (runtimes/_podman_storage.py: the storage both
use)."""

from __future__ import annotations

import os
import shutil
import subprocess

from ...errors import NearmetalError
from ...runtimes._podman_storage import podman_argv, podman_env
from . import FORMATS
from .base import ImageFormat


def reference(name: str) -> str:
    return f"localhost/nearmetal-{name}:latest"


def _env():
    return {**os.environ, **podman_env()}


def _image_id(ref) -> str:
    return subprocess.run([*podman_argv(), "image", "inspect", "--format", "{{.Id}}", ref], capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, env=_env()).stdout.strip()


@FORMATS.register
class Podman(ImageFormat):
    title = "podman"
    layout = "storage"  # located by a reference into that storage, not a host path
    image_attr = "podman_ref"
    # It lives in podman's storage, outside the image directory: imported from the new
    # image once that is in place, replacing the old image's copy.
    in_build_tree = False

    def available(self):
        return bool(shutil.which("podman"))

    def present(self, image_dir, meta):
        if not self.recorded(image_dir, meta) or not self.available():
            return False
        done = subprocess.run([*podman_argv(), "image", "exists", reference(meta["name"])], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env())
        return done.returncode == 0

    def locate(self, image_dir, meta):
        return reference(meta["name"]) if self.recorded(image_dir, meta) else None

    def record(self, meta):
        meta["podman_ref"] = reference(meta["name"]) if self.name in meta["formats"] else None

    def make(self, image_dir, name, log, report, meta):
        from ..chroot import run, supervised

        if not self.available():
            raise NearmetalError("podman is not installed: cannot build --format podman")
        ref = reference(name)
        previous = _image_id(ref)
        with report.step("importing into nearmetal's podman storage", meta.setdefault("timings", {}), "podman_import"):
            log.write(f"$ tar -C {image_dir / 'rootfs'} -c . | {' '.join(podman_argv())} import - {ref}\n")
            log.flush()
            start = log.tell()
            # both under nm-supervise: killed, nearmetal leaves neither tar nor podman running
            tar = subprocess.Popen(supervised(["tar", "-C", str(image_dir / "rootfs"), "-c", "."]),
                                   stdout=subprocess.PIPE, stderr=log.fh, stdin=subprocess.DEVNULL)
            try:
                imp = subprocess.Popen(supervised([*podman_argv(), "import", "-", ref]), stdin=tar.stdout,
                                       stdout=log.fh, stderr=log.fh, env=_env())
                tar.stdout.close()
                imp_rc = imp.wait()
            finally:
                tar_rc = tar.wait()
            if tar_rc != 0 or imp_rc != 0:
                raise NearmetalError(f"podman import of image '{name}' failed: {log.last_line(start)} (log: {log.path})")
        with report.step("smoke test: podman run /bin/true"):
            run([*podman_argv(), "run", "--rm", ref, "/bin/true"], log, "podman run (smoke test)", env=_env())
        if previous and previous != _image_id(ref):
            # The re-tagged old image would stay behind untagged (~800 MB each rebuild). A run
            # still using it keeps it: then rmi fails and it is left for `podman image prune`.
            subprocess.run([*podman_argv(), "rmi", previous], stdout=log.fh, stderr=log.fh, stdin=subprocess.DEVNULL,
                           env=_env())

    def discard(self, name, log):
        if self.available():
            subprocess.run([*podman_argv(), "rmi", "-f", reference(name)], stdout=log.fh, stderr=log.fh,
                           stdin=subprocess.DEVNULL, env=_env())
