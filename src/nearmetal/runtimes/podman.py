"""Podman: OCI containers from a private storage root, sharing host network, IPC and PIDs for MPI."""

import os

from ..errors import NearmetalError
from .base import Runtime


class Podman(Runtime):
    name = "podman"
    binary = "podman"
    # podman does not forward hydra's PMI file descriptor into the container.
    needs_pmi_port = True

    def _base(self):
        from .podman_storage import podman_argv

        argv = podman_argv()
        argv[0] = self.path() or argv[0]
        return argv

    def env_for_tools(self):
        from .podman_storage import podman_env

        env = super().env_for_tools()
        env.update(podman_env())
        return env

    def launch_env(self):
        from .podman_storage import podman_env

        return podman_env()

    def wrap(self, spec):
        image = spec.image
        ref = getattr(image, "podman_ref", None)
        if not ref:
            if getattr(image, "name", "") == "smoke":
                ref = "nearmetal-smoke"
            else:
                raise NearmetalError(f"image '{image.name}' is not in nearmetal's podman storage: "
                                     f"run `nearmetal image build --format podman --name {image.name}`")
        if spec.use_sqfs:
            raise NearmetalError("podman runs images from its own storage, not .sqfs files")
        argv = self._base() + ["run", "--rm", "--net=host", "--ipc=host", "--pid=host", "--userns=host",
                               "--env-host", "--security-opt", "label=disable",
                               "-v", "/tmp:/tmp", "--log-driver=none"]
        for m in spec.mounts:
            argv += ["-v", f"{m.source}:{m.target}:{'ro' if m.readonly else 'rw'}"]
        for key, value in spec.env.items():
            argv += ["-e", f"{key}={value}"]
        if spec.workdir:
            argv += ["--workdir", spec.workdir]
        return argv + [ref] + spec.argv
