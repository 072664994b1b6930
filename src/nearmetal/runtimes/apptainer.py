"""Apptainer (Singularity): the HPC centres' runtime; one `apptainer exec` per rank, from a
directory ("sandbox") image or a SIF file.

What MPI needs, and why:
- the launcher's environment reaches the ranks (Apptainer passes the host environment
  unless --cleanenv/--containall; then nm-envfwd forwards the launcher's wire-up variables
  as APPTAINERENV_*, which Apptainer always honours);
- /tmp and /dev/shm are bound explicitly: Open MPI's session directory (where ranks find
  the launcher's PMIx server) is in /tmp, shared-memory segments are in /dev/shm, and
  --contain would otherwise give every rank a private, empty one of each;
- variables for the ranks go in as APPTAINERENV_K=V set by the launcher per rank (an
  `--env A=B,C` value would be split at its commas);
- as root without CAP_SYS_RESOURCE (inside another container, as on these machines)
  `apptainer exec` refuses to start unless that capability is dropped from its request:
  nearmetal detects it from /proc/self/status and sets APPTAINER_DROP_CAPS, with a note;
- with --userns (or unprivileged, where there is no setuid starter) each rank is in its own
  user namespace: no CMA single-copy, no /proc/PID/fd shared memory between ranks, so the
  family's cross-namespace settings apply (separates_ranks()).
"""

import os
import shutil

from ..errors import NearmetalError
from . import RUNTIMES
from .base import Runtime

CAP_SYS_RESOURCE = 24
CONTAIN_FLAGS = ("--contain", "-c", "--containall", "-C")
CLEANENV_FLAGS = ("--cleanenv", "-e", "--containall", "-C")
# Flags that put each rank in namespaces of its own (user, PID or IPC): no CMA single-copy,
# no /proc/PID/fd links between ranks.
SEPARATING_FLAGS = ("--userns", "-u", "--containall", "-C", "--pid", "-p", "--ipc", "-i")
# Besides the MPI families' own (families.wireup_prefixes): what a resource manager hands
# each rank, and nearmetal's (NM_LAUNCH_NS): forwarded into --cleanenv containers by nm-envfwd.
OTHER_PREFIXES = ("SLURM_", "NM_")


def wireup_prefixes():
    from ..families import wireup_prefixes as of_families

    return of_families() + OTHER_PREFIXES


def needs_drop_caps(status_path="/proc/self/status", euid=None):
    """True as root when CAP_SYS_RESOURCE is not in the permitted set (a container here)."""
    if (os.geteuid() if euid is None else euid) != 0:
        return False
    try:
        with open(status_path) as f:
            for line in f:
                if line.startswith("CapPrm:"):
                    return not (int(line.split()[1], 16) >> CAP_SYS_RESOURCE) & 1
    except (OSError, ValueError, IndexError):
        pass
    return False


def home_install():
    """Where scripts/apptainer.sh installs a source build: home()/apptainer/current/bin."""
    from ..home import home_str

    return os.path.join(home_str(), "apptainer", "current", "bin", "apptainer")


@RUNTIMES.register
class Apptainer(Runtime):
    binary = "apptainer"
    install_hint = ("Debian 12 has no package: set NEARMETAL_APPTAINER_SRC to an Apptainer source release "
                    "and run scripts/setup.sh, or install it")
    # Unprivileged without a setuid starter: user namespaces; SIF and SquashFS files are
    # mounted with squashfuse, which needs /dev/fuse.
    env_prefix = "APPTAINERENV_"
    formats = {"dir": ("userns",), "sif": ("userns", "fuse"), "squashfs": ("userns", "fuse")}

    def path(self):
        for exe in ("apptainer", "singularity"):
            found = shutil.which(exe)
            if found:
                return found
        local = home_install()
        return local if os.access(local, os.X_OK) else None

    def drop_caps(self):
        """The APPTAINER_DROP_CAPS value nearmetal sets, or None (not needed, or the user's own)."""
        if "APPTAINER_DROP_CAPS" in os.environ or self.account is not None or not needs_drop_caps():
            return None
        return "CAP_SYS_RESOURCE"

    def launch_env(self):
        caps = self.drop_caps()
        return {"APPTAINER_DROP_CAPS": caps} if caps else {}

    def env_for_tools(self):
        env = super().env_for_tools()
        env.update(self.launch_env())
        return env

    def separates_ranks(self, runtime_args):
        """Ranks in separate namespaces: with --userns/--containall/--pid/--ipc, or unprivileged
        (user namespaces: this build has no setuid starter), as the caller or as --user's account."""
        return any(a in SEPARATING_FLAGS for a in runtime_args) or os.geteuid() != 0 or self.account is not None

    def private_dev_shm(self, runtime_args):
        return any(a in CONTAIN_FLAGS for a in runtime_args)

    def host_dirs_seen(self, runtime_args, cwd):
        # By default Apptainer binds $HOME and the current directory and starts there;
        # --contain (and --containall) does neither, --no-home drops $HOME.
        if self.private_dev_shm(runtime_args):
            return [], False
        home = self.account.home if self.account is not None else os.path.expanduser("~")
        dirs = [cwd] + ([] if "--no-home" in runtime_args else [home])
        return dirs, True

    def notes(self, runtime_args):
        out = []
        if self.drop_caps():
            out.append("apptainer: root without CAP_SYS_RESOURCE (this machine is itself a container): "
                       "APPTAINER_DROP_CAPS=CAP_SYS_RESOURCE set")
        if self.private_dev_shm(runtime_args):
            out.append("apptainer: --contain gives each rank a private /dev/shm (a bind of it is skipped): "
                       "shared memory goes to /tmp where the MPI can be told so, else the host's /dev is bound")
        if any(a in ("--containall", "-C", "--ipc", "-i") for a in runtime_args):
            out.append("apptainer: ranks in separate IPC namespaces: UCX finds no shared-memory path between "
                       "them; for an MPI over UCX, --env UCX_TLS=sm,self,tcp runs over TCP loopback (8 B latency "
                       "3.7 us against 0.34 us with --contain here)")
        if any(a in CLEANENV_FLAGS for a in runtime_args):
            out.append("apptainer: clean environment: nm-envfwd forwards the launcher's wire-up variables "
                       f"({', '.join(p + '*' for p in wireup_prefixes())}) as APPTAINERENV_*")
        return out

    def context(self, runtime_args):
        userns = self.separates_ranks(runtime_args)
        return {"drop_caps": self.drop_caps(), "userns": userns, "options": list(runtime_args),
                "setuid": not userns and self.has_setuid_starter()}

    def has_setuid_starter(self):
        """Whether this installation has its setuid starter (libexec/apptainer/bin/starter-suid,
        root's and setuid): without it Apptainer always runs in a user namespace."""
        import os
        import stat

        exe = self.path()
        if not exe:
            return False
        starter = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(exe))), "libexec", "apptainer",
                               "bin", "starter-suid")
        try:
            st = os.stat(starter)
        except OSError:
            return False
        return st.st_uid == 0 and bool(st.st_mode & stat.S_ISUID)

    def gpu_args(self, gpu, component):
        """--nv: Apptainer binds every GPU's node and its nvliblist.conf libraries itself;
        --nv --nvccli (NEARMETAL_APPTAINER_NVCCLI=1) lets nvidia-container-cli do it."""
        from ..gpu.plan import GpuArgs

        if os.environ.get("NEARMETAL_APPTAINER_NVCCLI") == "1":
            if not gpu.nvccli:
                raise NearmetalError("--gpus with NEARMETAL_APPTAINER_NVCCLI=1: nvidia-container-cli is not installed "
                                     "(unset it for Apptainer's own --nv)")
            return GpuArgs(["--nv", "--nvccli"], notes=["gpu: apptainer --nv --nvccli (nvidia-container-cli sets up "
                                                        "the GPUs)"])
        if any(a in ("--nv", "--nvccli") for a in component.runtime_args):
            return GpuArgs(notes=["gpu: apptainer: --nv/--nvccli given in the runtime arguments, kept as given"])
        return GpuArgs(["--nv"], notes=["gpu: apptainer --nv (its nvliblist.conf libraries and every /dev/nvidia* "
                                        "bound)"])

    def rank_env(self, spec):
        # Set by the launcher for each rank, read by apptainer inside: exact values, commas and all.
        return {f"{self.env_prefix}{k}": v for k, v in spec.env.items()}

    def wrap(self, spec):
        # The file the user named (a SIF, or a SquashFS file, which Apptainer also runs), else
        # the directory image ("sandbox").
        source = self.image_source(spec)
        exe = self.path() or self.binary
        argv = []
        if any(a in CLEANENV_FLAGS for a in spec.runtime_args):
            from ._envfwd import binary as envfwd

            argv += [envfwd(), "--prefix", self.env_prefix, *[f"--keep={p}" for p in wireup_prefixes()], "--"]
        argv += [exe, "--quiet", "exec"]  # --quiet: its INFO lines would mix with the program's output
        # /tmp: Open MPI's session directory; /dev/shm: shared-memory segments. Under
        # --contain Apptainer mounts a private /dev/shm and skips a bind of it: then the MPI
        # keeps its segments in /tmp (compose: the family's shm_in), or the host's /dev comes in.
        argv += ["--bind", "/tmp"]
        if spec.share_dev:
            argv += ["--bind", "/dev"]
        elif not self.private_dev_shm(spec.runtime_args):
            argv += ["--bind", "/dev/shm"]
        for m in spec.mounts:
            argv += ["--bind", f"{m.source}:{m.target}:{'ro' if m.readonly else 'rw'}"]
        if spec.devices and not spec.share_dev and self.private_dev_shm(spec.runtime_args):
            # --contain gives a minimal /dev: the fabric's devices come in one by one
            argv += [a for d in spec.devices for a in ("--bind", d)]
        if spec.workdir:
            argv += ["--pwd", spec.workdir]
        return argv + spec.runtime_args + [str(source)] + spec.argv
