"""Podman: OCI containers from a private storage root, sharing host network, IPC and PIDs for MPI."""

import os

from ..errors import NearmetalError
from . import RUNTIMES
from .base import Runtime


SMOKE_REF = "nearmetal-smoke"


@RUNTIMES.register
class Podman(Runtime):
    binary = "podman"
    image_format = "podman"  # image/formats/podman.py imports images into its storage
    # podman does not forward hydra's PMI file descriptor into the container.
    needs_pmi_port = True

    def _base(self):
        from ._podman_storage import podman_argv

        argv = podman_argv()
        argv[0] = self.path() or argv[0]
        return argv

    def env_for_tools(self):
        from ._podman_storage import podman_env

        env = super().env_for_tools()
        env.update(podman_env())
        return env

    def launch_env(self):
        from ._podman_storage import podman_env

        return podman_env()

    def prepare_smoke(self, rootfs):
        """doctor's smoke rootfs imported into nearmetal's podman storage (once)."""
        import subprocess

        from ._podman_storage import podman_argv, podman_env

        env = dict(os.environ, **podman_env())
        base = podman_argv()
        if subprocess.run(base + ["image", "exists", SMOKE_REF], env=env, capture_output=True).returncode == 0:
            return
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        imp = subprocess.run(base + ["import", "-", SMOKE_REF], stdin=tar.stdout, env=env,
                             capture_output=True, text=True, timeout=120)
        tar.stdout.close()
        tar.wait()
        if imp.returncode != 0:
            raise NearmetalError(f"podman import failed: {imp.stderr.strip().splitlines()[-1:]}")

    def wrap(self, spec):
        image = spec.image
        ref = getattr(image, "podman_ref", None)
        if not ref:
            if getattr(image, "name", "") == "smoke":
                ref = SMOKE_REF
            else:
                raise NearmetalError(f"image '{image.name}' is not in nearmetal's podman storage: "
                                     f"run `nearmetal image build --format {self.image_format} --name {image.name}`")
        if spec.use_sqfs:
            raise NearmetalError("podman runs images from its own storage, not .sqfs files")
        argv = self._base() + ["run", "--rm", "--net=host", "--ipc=host", "--pid=host", "--userns=host",
                               "--env-host", "--security-opt", "label=disable",
                               "-v", "/tmp:/tmp", "--log-driver=none"]
        for m in spec.mounts:
            argv += ["-v", f"{m.source}:{m.target}:{'ro' if m.readonly else 'rw'}"]
        for device in spec.devices:  # the cgroup must allow a device: a bind would not
            argv += ["--device", device]
        for key, value in spec.env.items():
            argv += ["-e", f"{key}={value}"]
        if spec.workdir:
            argv += ["--workdir", spec.workdir]
        return argv + spec.runtime_args + [ref] + spec.argv
