"""What a container runtime must provide: wrap one rank's command in a container.

A runtime knows nothing about how ranks are started (that is the launcher's job), so
every runtime works under every launcher: the launcher starts N copies of the argv
that `wrap` returns.
"""

import os
import shutil
import subprocess
from abc import ABC, abstractmethod

from ..errors import NearmetalError


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
    placed just before the image; image_format: the format of the file the user named
    (image/formats names; None: a name or directory, the runtime starts its own format).
    """

    __slots__ = ("image", "argv", "env", "mounts", "ranks_per_node", "tag", "image_format", "workdir",
                 "runtime_args", "share_dev", "devices")

    def __init__(self, image, argv, env=None, mounts=(), ranks_per_node=1, tag="nm",
                 image_format=None, workdir=None, runtime_args=()):
        self.image, self.argv, self.env = image, list(argv), dict(env or {})
        self.mounts = list(mounts)
        self.ranks_per_node, self.tag, self.image_format = ranks_per_node, tag, image_format
        # The host's /dev in the container: ranks whose MPI keeps shared memory only in /dev/shm,
        # under a runtime that would give each rank a private one (private_dev_shm).
        self.share_dev = False
        # Host device files the ranks need (bind mode's fabric, models/_fabric.py): runtimes
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
    # a prefix whose variables the runtime passes into the container (Apptainer: APPTAINERENV_),
    # for a variable a per-rank wrapper sets on the host side (nm-gpuvis)
    env_prefix = None
    # The image formats (image/formats names) its containers start from, the first when the
    # user names no file, each with what an unprivileged account (run --user,
    # docs/privilege.md) needs of the machine to start it (privilege.NEEDS names; None: only
    # root starts it). A file of a format not listed is refused (or, when the format stands
    # for a whole image, the image is started in the first format).
    formats = {"dir": ("userns",)}
    # The privilege.Account the ranks run as (resolve sets it); None: as the caller.
    account = None
    # True when the runtime builds the container in the process that then execs the program
    # (its CPU time survives execve and counts as the rank's: the start-up kernel's cpu_to_main;
    # explain/explainers/runtime_setup.py)
    setup_in_rank_process = False

    def unprivileged_needs(self):
        """{format: needs} this installation starts as an unprivileged account."""
        return {fmt: needs for fmt, needs in self.formats.items() if needs is not None}

    def start_format(self, named):
        """The format it starts an image from when the user named a file of format `named`
        (None: a name or a directory)."""
        if named is None or named in self.formats:
            return named or next(iter(self.formats))
        from ..image import formats

        return next(iter(self.formats)) if formats.get(named).stands_for_image else named

    def image_source(self, spec):
        """Where the container of spec starts from: a path or a storage reference; a one-line
        error when this runtime does not start that format, or the image has no copy in it."""
        fmt = self.start_format(spec.image_format)
        if fmt not in self.formats:
            raise NearmetalError(self.refusal(fmt))
        where = spec.image.location(fmt)
        if not where:
            raise NearmetalError(self.missing(spec.image, fmt))
        return where

    def refusal(self, fmt):
        """Why this runtime cannot start a file of format `fmt` the user named."""
        from ..image import formats

        can = ", ".join(formats.get(f).words(plural=True) for f in self.formats)
        return f"{self.binary} starts {can}, not {formats.get(fmt).words(plural=True)}"

    def missing(self, image, fmt):
        """What to do when `image` has no copy in format `fmt`."""
        from ..image import formats

        return (f"image '{image.name}' has no {formats.get(fmt).words()}: build one with "
                f"`nearmetal image build --format {fmt} --name {image.name}`")

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

    # Whether wrap() can make a bind mount read-only. Where it cannot, the mounts meant
    # read-only are writable by the ranks as far as file permissions go, and the run says so.
    read_only_binds = True

    def writable_binds_note(self, mounts):
        """The note for mounts meant read-only that this runtime binds read-write; None if none."""
        meant = [m.target for m in mounts if m.readonly]
        if self.read_only_binds or not meant:
            return None
        from . import RUNTIMES

        others = [name for name in RUNTIMES.names() if RUNTIMES.get(name).read_only_binds]
        links = "; /nm/host-mpi holds hard links to the host MPI's files" if "/nm/host-mpi" in meant else ""
        return (f"{self.name}: {', '.join(meant)} bound read-write: {self.binary} has no read-only bind, so the ranks "
                f"can write there where file permissions allow (as root: always{links}); {', '.join(others)} bind "
                f"read-only")

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
        self.rootfs, self.name, self.meta = rootfs, "smoke", {}

    def location(self, fmt):
        from ..image.formats import ROOTFS

        return self.rootfs if fmt == ROOTFS else None


def _user():
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())
