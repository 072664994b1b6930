"""What a container runtime must provide: wrap one rank's command in a container.

A runtime knows nothing about how ranks are started (that is the launcher's job), so
every runtime works under every launcher: the launcher starts N copies of the argv
that `wrap` returns.
"""

import os
import shutil
import subprocess
from abc import ABC, abstractmethod


class Mount:
    """A host path made visible in the container; read-only unless a write is needed."""

    __slots__ = ("source", "target", "readonly")

    def __init__(self, source, target, readonly=True):
        self.source, self.target, self.readonly = str(source), str(target), readonly

    def __repr__(self):
        return f"Mount({self.source}:{self.target}{':ro' if self.readonly else ''})"


class RankSpec:
    """Everything a runtime needs to wrap one rank.

    argv: the command inside the container; env: variables to set inside the container
    only; mounts: extra bind mounts; ranks_per_node: peers sharing a node (runtimes that
    join the ranks of a node into one namespace wait for that many);
    tag: unique per job; workdir: the directory inside the container the command starts in
    (None: the runtime's default); runtime_args: extra runtime arguments (a named variant's),
    placed just before the image.
    """

    __slots__ = ("image", "argv", "env", "mounts", "ranks_per_node", "tag", "use_sqfs", "use_sif", "workdir",
                 "runtime_args", "share_dev", "devices")

    def __init__(self, image, argv, env=None, mounts=(), ranks_per_node=1, tag="nm",
                 use_sqfs=False, workdir=None, runtime_args=(), use_sif=False):
        self.image, self.argv, self.env = image, list(argv), dict(env or {})
        self.mounts = list(mounts)
        self.ranks_per_node, self.tag, self.use_sqfs = ranks_per_node, tag, use_sqfs
        self.use_sif = use_sif  # start from the image's SIF file (the user named a .sif)
        # The host's /dev in the container: ranks whose MPI keeps shared memory only in /dev/shm,
        # under a runtime that would give each rank a private one (private_dev_shm).
        self.share_dev = False
        # Host device files the ranks need (bind mode's fabric, models/fabric.py): runtimes
        # that do not show the host's /dev pass each one in.
        self.devices = []
        self.workdir = workdir
        self.runtime_args = list(runtime_args)  # the user's extra runtime arguments, before the image


class Runtime(ABC):
    name = ""
    binary = ""
    install_hint = ""  # how to get it, when it is not installed (doctor)
    # Launcher needs: hydra passes PMI through an inherited fd unless told to use a port.
    needs_pmi_port = False
    # The image format (image/formats/<name>.py) its containers start from; None: the
    # image's rootfs directory or its .sqfs file, used in place.
    image_format = None
    # Running as an unprivileged account (run --user, docs/privilege.md): the image formats
    # (image/formats names) this runtime starts then, each with what the account needs of
    # the machine (privilege.NEEDS names). A format not listed is refused before launching.
    unprivileged = {}
    # The privilege.Account the ranks run as (resolve sets it); None: as the caller.
    account = None

    def unprivileged_needs(self):
        """{format: needs} this installation starts as an unprivileged account."""
        return dict(self.unprivileged)

    def prepare_account(self, image):
        """Make `image` startable by self.account before the launch (notes on what was done);
        nothing for runtimes that start the image's files in place."""
        return []

    def after_job(self, tag):
        """Remove what a finished job tagged `tag` left on this machine (nothing by default);
        called once every process of the job has ended."""

    def path(self):
        return shutil.which(self.binary)

    def version(self):
        exe = self.path()
        if not exe:
            return None
        try:
            out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30,
                                 env=self.env_for_tools())
        except (OSError, subprocess.TimeoutExpired):
            return None
        text = (out.stdout or out.stderr).strip().splitlines()
        return text[0].split()[-1] if text else None

    def env_for_tools(self):
        env = dict(os.environ)
        env.setdefault("USER", _user())
        if self.account is not None:
            env.update(self.account.env())
        return env

    def launch_env(self):
        """Variables the launcher's environment must carry for this runtime to work."""
        return {}

    def rank_env(self, spec):
        """Variables the launcher sets for each rank (outside the container) so that
        spec.env reaches the program; {}: wrap() passes spec.env itself."""
        return {}

    def separates_ranks(self, runtime_args):
        """Whether ranks of one node end up in separate namespaces (no CMA, no /proc/PID
        links between them), with these runtime arguments."""
        return False

    def host_dirs_seen(self, runtime_args, cwd):
        """Host directories the container shows at the same path besides /tmp, and whether
        the ranks start in the host's current directory (then relative paths resolve)."""
        return [], False

    def private_dev_shm(self, runtime_args):
        """Whether each rank gets a /dev/shm of its own that a bind cannot replace."""
        return False

    def notes(self, runtime_args):
        """What this runtime decided for the launch, for --dry-run and -v."""
        return []

    def context(self, runtime_args):
        """Settings worth storing with each run of this runtime (the study's run context)."""
        return {}

    def gpu_args(self, gpu, component):
        """How this runtime gives a container GPUs (gpu.plan.GpuRequest): a gpu.plan.GpuArgs."""
        from ..errors import NearmetalError

        raise NearmetalError(f"--gpus: runtime '{self.name}' has no GPU support in nearmetal")

    @abstractmethod
    def wrap(self, spec):
        """argv that runs spec.argv inside a container of spec.image."""

    def prepare_smoke(self, rootfs):
        """Make the smoke rootfs (a directory) startable by this runtime (doctor)."""

    def smoke_argv(self, rootfs):
        """A real container start of /bin/true in a rootfs directory."""
        return self.wrap(RankSpec(_RootfsOnly(rootfs), ["/bin/true"]))


class _RootfsOnly:
    """Stand-in image for smoke runs: just a directory with a filesystem."""

    def __init__(self, rootfs):
        self.rootfs, self.sqfs, self.podman_ref, self.name, self.sif = rootfs, None, None, "smoke", None


def _user():
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())
