"""The stored context of a cell's runs: the machine (host, kernel, CPU, fabrics, MPIs), the
launch as resolved (mode, runtime and its version, image, network, account, nodes) and what
the first run said (the program's provenance, the witnessed MPI library, the transport).
One row per distinct context (Store.context_id), cached per cell."""

import os
import platform

from ... import __version__


class Contexts:
    def __init__(self, store):
        self.store = store
        self._ids = {}       # cell key -> context row id
        self._static = None
        self._runtime_versions = {}

    def known(self, cell_key):
        return cell_key in self._ids

    def _static_context(self):
        if self._static is None:
            from ...discovery import cpu
            from ...discovery.mpi import discover

            u = platform.uname()
            self._static = {
                "host": u.node, "kernel": f"{u.system} {u.release}", "machine": u.machine,
                "fabrics": _rdma_devices(),
                "cpu": cpu.describe(), "nearmetal_version": __version__,
                "mpi": {f: {"version": m["version"], "library": m["library"]} for f, m in discover().items()},
            }
        return self._static

    def _runtime_version(self, name):
        if name not in self._runtime_versions:
            from ... import runtimes

            self._runtime_versions[name] = runtimes.get(name).version()
        return self._runtime_versions[name]

    def id_for(self, cell_key, resolved, image=None, program=None, witnessed=None, transport=None, binding=None):
        """The context row id of a cell's runs, from its resolved launch (resolve.Resolved);
        image: how its image is read (cell_launch.CellLaunch.image); program: (benchmark, its
        first run's outputs) of a program benchmark, whose file, version and inputs the
        context records (study/execute/provenance.py); witnessed: what its first run's ranks said of
        the MPI library they ran (witness/); binding: the ranks' binding as decided
        (launchers/_binding.py: asked, used, and why they differ)."""
        if cell_key not in self._ids:
            ctx = dict(self._static_context())
            if program is not None:
                from .provenance import of_program

                ctx["program"] = of_program(resolved, *program)
            if witnessed is not None:
                ctx["witness"] = witnessed
            if transport is not None:  # what the ranks used between them (families/_transport.py)
                ctx["transport"] = transport
            if _network(resolved).emulated:  # the host's own network is not recorded: older contexts stay
                ctx["network"] = resolved.network
            if resolved.account is not None:  # the ranks ran as this account (privilege.py)
                ctx["user"] = {"name": resolved.account.name, "uid": resolved.account.uid}
            # the job's nodes: one where the job runs on this machine, else the nodes it asked for
            ctx["nodes"] = 1 if resolved.scheduler.job_is_child else int((resolved.options or {}).get("nodes") or 1)
            image = image or {}
            if image.get("cold_cache"):
                ctx["cold_cache"] = True
            ctx["mode"] = resolved.mode
            if binding is not None:  # contexts of runs before binding was decided stay as they were
                ctx["binding"] = dict(binding)
            if resolved.in_container:
                name = resolved.runtime.name
                ctx["runtime"] = {"name": name, "version": self._runtime_version(name),
                                  **resolved.runtime.context(resolved.runtime_args)}
                used = resolved.image
                ctx["image"] = {"name": used.name, "digest": used.meta.get("digest"), "distro": used.distro}
                from ...image import formats

                for fmt in formats.names():  # what each format records (SquashFS: whether it was named)
                    ctx["image"].update(formats.get(fmt).run_context(used, named=fmt == resolved.image_format))
                ctx["image"].update(image.get("image") or {})
            self._ids[cell_key] = self.store.context_id(ctx)
        return self._ids[cell_key]


def _rdma_devices():
    """The host's RDMA devices (InfiniBand, Omni-Path, RoCE: /sys/class/infiniband), sorted."""
    try:
        return sorted(os.listdir("/sys/class/infiniband"))
    except OSError:
        return []


def _network(resolved):
    from ... import networks

    return networks.get(resolved.network)
