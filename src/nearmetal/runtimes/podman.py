"""Podman: OCI containers from a private storage root, sharing host network, IPC and PIDs for MPI."""

import os

from ..errors import NearmetalError
from . import RUNTIMES
from .base import Runtime


SMOKE_REF = "nearmetal-smoke"


@RUNTIMES.register
class Podman(Runtime):
    binary = "podman"
    # image/formats/podman.py imports images into its storage. Rootless: the account's own
    # storage (the image imported on first use), its user namespace mapped through its
    # /etc/subuid and /etc/subgid ranges.
    formats = {"podman": ("userns", "subids")}
    # podman does not forward hydra's PMI file descriptor into the container.
    needs_pmi_port = True

    def _base(self):
        from ._podman_storage import podman_argv

        argv = podman_argv(self.account)
        argv[0] = self.path() or argv[0]
        return argv

    def separates_ranks(self, runtime_args):
        # rootless, --userns=keep-id gives every container a user namespace of its own
        return self.account is not None

    def notes(self, runtime_args):
        if self.account is None:
            return []
        from ._podman_storage import account_storage_paths

        return [f"podman rootless as {self.account.name}: its own storage {account_storage_paths(self.account)[0]}, "
                f"--userns=keep-id (uid {self.account.uid} inside too); its 'podman pause' process is ended with the job"]

    def prepare_account(self, image):
        """The image imported into the account's own storage, once per image build (rootless
        podman cannot start images from root's storage): tar of the rootfs, read as root,
        into `podman import` run as the account under nm-supervise (which ends the pause
        process podman leaves behind)."""
        import subprocess
        import time

        from .. import privilege, supervise
        from ..home import home_str
        from ._podman_storage import account_has_image, account_storage_paths, podman_argv, podman_env

        ref = account_reference(image)
        if account_has_image(self.account, ref):
            return []
        masks, shows = privilege.view(self.account, [(home_str(), False)], privilege.Facts())  # CONTAINERS_CONF
        options = ["--linger-ms", "0", *privilege.supervise_options(self.account, masks, shows)]
        argv = supervise.wrap([self.path() or "podman", *podman_argv(self.account)[1:], "import", "-", ref],
                              options=options)
        env = privilege.environ(self.account, {**os.environ, **podman_env()})
        started = time.monotonic()
        tar = subprocess.Popen(["tar", "-C", str(image.rootfs), "-c", "."], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        try:
            imp = subprocess.run(argv, stdin=tar.stdout, capture_output=True, text=True, env=env, cwd="/",
                                 timeout=1800)
        finally:
            tar.stdout.close()
            tar_rc = tar.wait()
        if imp.returncode != 0 or tar_rc != 0:
            last = ((imp.stderr or "").strip().splitlines() or [f"tar exited {tar_rc}"])[-1]
            raise NearmetalError(f"--user {self.account.name}: importing image '{image.name}' into its podman "
                                 f"storage failed: {last}")
        return [f"podman: image '{image.name}' imported into {self.account.name}'s storage "
                f"{account_storage_paths(self.account)[0]} in {time.monotonic() - started:.0f} s (once per build)"]

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
        from .. import supervise

        # both under nm-supervise: killed, doctor leaves neither tar nor podman running
        tar = subprocess.Popen(supervise.wrap(["tar", "-C", str(rootfs), "-c", "."]), stdout=subprocess.PIPE,
                               stdin=subprocess.DEVNULL)
        try:
            imp = subprocess.run(supervise.wrap(base + ["import", "-", SMOKE_REF]), stdin=tar.stdout, env=env,
                                 capture_output=True, text=True, timeout=120)
        finally:
            tar.stdout.close()
            tar.wait()
        if imp.returncode != 0:
            raise NearmetalError(f"podman import failed: {(imp.stderr.strip().splitlines() or ['no output'])[-1]}")

    def gpu_args(self, gpu, component):
        """CDI devices when a spec declares nvidia.com/gpu (the toolkit's own set-up); otherwise
        the device nodes (--device: the cgroup must allow them) and the driver libraries."""
        from ..gpu.plan import GpuArgs, bind_pairs

        if gpu.cdi:
            names = ["all"] if gpu.all else [str(g["index"]) for g in gpu.selected]
            return GpuArgs([a for n in names for a in ("--device", f"nvidia.com/gpu={n}")], renumbered=not gpu.all,
                           notes=[f"gpu: podman: CDI devices nvidia.com/gpu={','.join(names)} (spec {gpu.cdi})"])
        args = [a for d in gpu.devices for a in ("--device", d)]
        args += [a for src, dst in bind_pairs(gpu) for a in ("-v", f"{src}:{dst}:ro")]
        return GpuArgs(args, {"LD_LIBRARY_PATH": "/nm/host-gpu/lib"}, renumbered=not gpu.all,
                       notes=["gpu: podman: no CDI spec (nvidia-ctk cdi generate makes one): "
                              f"{len(gpu.devices)} device nodes and {len(gpu.libraries)} driver libraries bound"])

    def wrap(self, spec):
        image = spec.image
        fmt = self.start_format(spec.image_format)
        if fmt not in self.formats:
            raise NearmetalError(self.refusal(fmt))
        smoke = getattr(image, "name", "") == "smoke"
        if self.account is not None and not smoke:
            ref = account_reference(image)
        elif smoke and not image.location(fmt):
            ref = SMOKE_REF  # doctor's smoke rootfs, which prepare_smoke imported
        else:
            ref = self.image_source(spec)
        # Rootless, --userns=host would run the ranks as uid 0 of the account's namespace,
        # where Open MPI's ranks look for the launcher's session directory under that uid;
        # keep-id runs them as the account inside too. /dev/mqueue: what rootless --ipc=host
        # binds from the host, which may have none (this machine): an empty one instead.
        userns = ["--userns=keep-id", "--tmpfs", "/dev/mqueue"] if self.account is not None else ["--userns=host"]
        # --pull=never: an image missing from nearmetal's storage is an error at once, never a
        # registry nearmetal did not name tried three times (a copied or pruned storage)
        argv = self._base() + ["run", "--rm", "--pull=never", "--net=host", "--ipc=host", "--pid=host", *userns,
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


    def refusal(self, fmt):
        from ..image import formats

        return f"podman runs images from its own storage, not {formats.get(fmt).suffix} files"

    def missing(self, image, fmt):
        return (f"image '{image.name}' is not in nearmetal's podman storage: "
                f"run `nearmetal image build --format {fmt} --name {image.name}`")


def account_reference(image):
    """The image's name in an account's storage, tagged with the image's digest: a rebuilt
    image is imported again."""
    digest = str((getattr(image, "meta", None) or {}).get("digest") or "latest")
    return f"localhost/nearmetal-{image.name}:{digest[:16]}"
