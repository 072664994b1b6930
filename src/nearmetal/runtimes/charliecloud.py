"""Charliecloud: unprivileged user-namespace containers from a directory or a SquashFS image."""

from . import RUNTIMES
from .base import Runtime


@RUNTIMES.register
class Charliecloud(Runtime):
    binary = "ch-run"
    setup_in_rank_process = True  # it execs the program in place (docs/kernels-probes.md)
    # Unprivileged: a user namespace per node (ch-run --join); a SquashFS file is mounted
    # with squashfuse, which needs /dev/fuse.
    formats = {"dir": ("userns",), "squashfs": ("userns", "fuse")}

    # ch-run's --bind is always read-write (0.31 to 0.38 have no read-only form); the run's notes say
    # which mounts that exposes (Runtime.writable_binds_note).
    read_only_binds = False

    def launch_env(self):
        # ch-run refuses to start without $USER.
        env = self.env_for_tools()
        return {"USER": env["USER"]}

    def gpu_args(self, gpu, component):
        """ch-run shows the host's /dev (every GPU's node); the driver libraries are bound over
        their placeholders (what ch-fromhost --nvidia copies into an image, without writing it)."""
        from ..gpu.plan import GpuArgs, bind_pairs, need_mount_point

        need_mount_point(component, "charliecloud")
        return GpuArgs([f"--bind={src}:{dst}" for src, dst in bind_pairs(gpu)], {"LD_LIBRARY_PATH": "/nm/host-gpu/lib"},
                       notes=[f"gpu: charliecloud: the host's /dev is in the container; {len(gpu.libraries)} driver "
                              "libraries bound at /nm/host-gpu/lib (read-write: ch-run has no read-only bind)"])

    def missing(self, image, fmt):
        from ..image import formats

        return f"image '{image.name}' has no {formats.get(fmt).words()}: rebuild with `nearmetal image build --format {fmt}`"

    def wrap(self, spec):
        source = str(self.image_source(spec))
        argv = [self.path() or self.binary]
        # Ranks on one node share one namespace: without it Open MPI loses CMA
        # single-copy and MPICH/UCX shared memory fails between separate namespaces.
        if spec.ranks_per_node > 1:
            # The count is explicit: what a launcher tells ch-run --join (Open MPI's
            # OMPI_COMM_WORLD_LOCAL_SIZE) counts every MPMD component's ranks, and a join
            # group that never completes leaves its semaphore in /dev/shm.
            argv += [f"--join-ct={spec.ranks_per_node}", f"--join-tag={spec.tag}"]
        for m in spec.mounts:
            argv.append(f"--bind={m.source}:{m.target}")
        for key, value in spec.env.items():
            argv.append(f"--set-env={key}={value}")
        if spec.workdir:
            argv.append(f"--cd={spec.workdir}")
        argv += spec.runtime_args + [source, "--"] + spec.argv
        return argv

    def after_job(self, tag):
        # A join group that never completed (a rank died, or the winner's program ended before
        # a peer joined) keeps its semaphore and segment, naming a PID that is gone: the next
        # launch with the tag (a study's runs share it) would join that PID and fail.
        import os

        for name in (f"ch-run_shm-{tag}", f"sem.ch-run_sem-{tag}"):
            try:
                os.unlink(os.path.join("/dev/shm", name))
            except OSError:  # gone already, or another account's (sticky /dev/shm): not this job's to remove
                pass
