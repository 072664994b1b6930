"""bubblewrap: a mount namespace over a rootfs directory; shares the host's IPC and network."""

from . import RUNTIMES
from .base import Runtime


@RUNTIMES.register
class Bubblewrap(Runtime):
    binary = "bwrap"
    setup_in_rank_process = True  # it execs the program in place (docs/kernels-probes.md)
    # Unprivileged (Debian's bwrap is not setuid) every rank gets a user namespace of its own.
    formats = {"dir": ("userns",)}

    def separates_ranks(self, runtime_args):
        return self.account is not None

    def gpu_args(self, gpu, component):
        """The GPUs' device nodes (--dev-bind: the host's /dev is bound already; named anyway so
        a narrower /dev keeps them) and the driver libraries over their placeholders."""
        from ..gpu.plan import GpuArgs, bind_pairs, need_mount_point

        need_mount_point(component, "bwrap")
        args = [a for d in gpu.devices for a in ("--dev-bind", d, d)]
        args += [a for src, dst in bind_pairs(gpu) for a in ("--ro-bind", src, dst)]
        return GpuArgs(args, {"LD_LIBRARY_PATH": "/nm/host-gpu/lib"},
                       notes=[f"gpu: bwrap: {len(gpu.devices)} device nodes, {len(gpu.libraries)} driver libraries "
                              "bound read-only at /nm/host-gpu/lib"])

    def refusal(self, fmt):
        from ..image import formats

        return f"bwrap runs directory images only; use the image directory or charliecloud for {formats.get(fmt).suffix}"

    def wrap(self, spec):
        source = self.image_source(spec)
        argv = [self.path() or self.binary,
                "--ro-bind", str(source), "/",
                "--dev-bind", "/dev", "/dev",
                "--proc", "/proc",
                "--ro-bind", "/sys", "/sys",
                # MPI session directories and shared-memory segments live here: a write is needed.
                "--bind", "/tmp", "/tmp",
                # The host's network is shared, so are its names: MPICH 3 (bullseye) resolves
                # its own hostname at MPI_Init. Every nearmetal image has an /etc/hosts to cover.
                "--ro-bind-try", "/etc/hosts", "/etc/hosts",
                "--die-with-parent"]
        for m in spec.mounts:
            argv += ["--ro-bind" if m.readonly else "--bind", m.source, m.target]
        for key, value in spec.env.items():
            argv += ["--setenv", key, value]
        if spec.workdir:
            argv += ["--chdir", spec.workdir]
        return argv + spec.runtime_args + ["--"] + spec.argv
