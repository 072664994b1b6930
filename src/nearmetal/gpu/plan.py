"""What `--gpus` adds to one component's launch (compose applies it):

- the runtime's own arguments (Runtime.gpu_args: Apptainer --nv, podman CDI devices, binds
  of the device nodes and the driver libraries for bwrap, Charliecloud and podman without
  CDI), placed before the user's runtime arguments;
- LD_LIBRARY_PATH inside the container, where the driver libraries are bound (gpu.stage);
- nm-gpuvis in front of each rank's command: CUDA_VISIBLE_DEVICES = the GPUs given, the
  local rank's one (local rank mod their count), CUDA_DEVICE_ORDER=PCI_BUS_ID so indices
  mean what nvidia-smi shows. --env CUDA_VISIBLE_DEVICES=... overrides it (no wrapper then).
"""

import os

from ..errors import NearmetalError
from .stage import LIBDIR, MOUNT_POINT

CONTROL_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")


class GpuRequest:
    """What a runtime needs to give a container GPUs: the selected GPU records (discovery.gpu),
    all GPUs found, the device nodes for them, the staged directory and the library binds
    ((host file, container path)), the CDI spec if one exists, nvidia-container-cli's path."""

    __slots__ = ("selected", "found", "devices", "staged", "libraries", "cdi", "nvccli", "all")

    def __init__(self, selected, found, devices, staged=None, libraries=(), cdi=None, nvccli=None):
        self.selected, self.found, self.devices = list(selected), list(found), list(devices)
        self.staged, self.libraries, self.cdi, self.nvccli = staged, list(libraries), cdi, nvccli
        self.all = len(self.selected) == len(self.found)


class GpuArgs:
    """A runtime's answer: args (before the user's runtime arguments), env (inside the
    container), renumbered (the container sees only the selected GPUs, as 0..k-1), notes."""

    __slots__ = ("args", "env", "renumbered", "notes")

    def __init__(self, args=(), env=None, renumbered=False, notes=()):
        self.args, self.env, self.renumbered, self.notes = list(args), dict(env or {}), renumbered, list(notes)


class GpuPlan:
    """The whole of a component's GPU launch: runtime args, container env, the per-rank
    wrapper's device list (None: no wrapper), notes."""

    __slots__ = ("args", "env", "visible", "notes", "env_prefix", "devices")

    def __init__(self, args=(), env=None, visible=None, notes=(), env_prefix=None, devices=()):
        self.args, self.env, self.visible, self.notes = list(args), dict(env or {}), visible, list(notes)
        self.env_prefix = env_prefix  # the wrapper also sets PREFIX + CUDA_VISIBLE_DEVICES (Apptainer)
        self.devices = list(devices)  # the device nodes the ranks open (run --user checks the account may)


def devices_for(selected, present):
    """The device nodes the selected GPUs need: /dev/nvidiaMINOR each, then the control and
    UVM nodes; only those present (a missing GPU node is a refusal)."""
    out = []
    for g in selected:
        node = f"/dev/nvidia{g['minor'] if g.get('minor') is not None else g['index']}"
        if node not in present:
            raise NearmetalError(f"--gpus refused: GPU {g['index']} has no device node {node} on this machine")
        out.append(node)
    missing = [n for n in CONTROL_NODES[:2] if n not in present]
    if missing:
        raise NearmetalError(f"--gpus refused: {' and '.join(missing)} missing (the NVIDIA driver's control/UVM "
                             "nodes: load nvidia-uvm, or run nvidia-modprobe -u -c=0)")
    return out + [n for n in CONTROL_NODES if n in present]


def prepare(c, found, spec):
    """The GpuPlan for resolved component `c` (resolve.Resolved), the machine's GPUs `found`
    (discovery.gpu.discover()), and `spec` (a --gpus value)."""
    from ..discovery.gpu_libs import compute_libraries
    from .select import choose

    selected = choose(spec, found["gpus"])
    notes = [f"gpu: --gpus {spec}: GPU {', '.join(str(g['index']) for g in selected)} "
             f"({', '.join(sorted({g.get('model') or '?' for g in selected}))}), driver {found['driver'] or '?'}"]
    args = GpuArgs()
    devices = _present_nodes(selected, found["devices"])
    if c.runtime is not None:
        from . import stage

        libraries = compute_libraries(found["libraries"])
        if not any(s.startswith("libcuda.so") for s in libraries):
            raise NearmetalError("--gpus refused: no libcuda.so.1 on this host (not in ld.so.cache nor in "
                                 f"{', '.join(found['library_dirs']) or '/usr/local/nvidia/lib64'}): the driver's "
                                 "libraries are needed in the container")
        notes += stage.check_image(c.image, found["driver"])
        stage.check_glibc(c.image, libraries, found.get("root", "/"))
        request = GpuRequest(selected, found["gpus"], devices_for(selected, found["devices"]),
                             staged=None, libraries=stage.binds(libraries),
                             cdi=found["mechanisms"].get("podman cdi"),
                             nvccli=found["mechanisms"].get("nvidia-container-cli"))
        request.staged = _staged_lazily(libraries)
        args = c.runtime.gpu_args(request, c)
        notes += args.notes
    env = dict(args.env)
    if "CUDA_VISIBLE_DEVICES" in c.env:
        notes.append(f"gpu: CUDA_VISIBLE_DEVICES={c.env['CUDA_VISIBLE_DEVICES']} from --env: every rank sees what "
                     "it names (no per-rank assignment)")
        visible = None
    else:
        ordered = sorted(selected, key=lambda g: g["index"])
        visible = [str(ordered.index(g)) if args.renumbered else str(g["index"]) for g in selected]
        notes.append(f"gpu: each local rank sees one GPU: CUDA_VISIBLE_DEVICES = [{','.join(visible)}][local rank mod "
                     f"{len(visible)}] (nm-gpuvis; override with --env CUDA_VISIBLE_DEVICES=...)")
    return GpuPlan(args.args, env, visible, notes,
                   env_prefix=c.runtime.env_prefix if c.runtime is not None else None, devices=devices)


def _present_nodes(selected, present):
    """The device nodes of the selected GPUs and the control/UVM nodes, those present (what a
    rank opens; devices_for refuses the missing ones for containers)."""
    nodes = [f"/dev/nvidia{g['minor'] if g.get('minor') is not None else g['index']}" for g in selected]
    return [n for n in nodes + list(CONTROL_NODES) if n in present]


class _staged_lazily:
    """The staged directory, made only when a runtime asks for it (Apptainer --nv and podman
    CDI never do); str() gives its path."""

    def __init__(self, libraries):
        self._libraries, self._path = libraries, None

    def __str__(self):
        if self._path is None:
            from .stage import stage

            self._path = str(stage(self._libraries))
        return self._path

    __fspath__ = __str__


def library_path(model_env):
    """LD_LIBRARY_PATH inside the container: LIBDIR after what the MPI model set (bind mode's
    /nm/host-mpi/lib stays first for the MPI; the driver libraries are found either way)."""
    first = model_env.get("LD_LIBRARY_PATH")
    return f"{first}:{LIBDIR}" if first else LIBDIR


def bind_pairs(gpu):
    """(source, target) binds of the library placeholders: the staged directory at
    /nm/host-gpu, then each host library over its placeholder."""
    return [(os.fspath(gpu.staged), MOUNT_POINT)] + list(gpu.libraries)


def need_mount_point(c, runtime_name):
    """A one-line refusal for runtimes that cannot create /nm/host-gpu in the image."""
    from .stage import has_mount_point

    if not has_mount_point(c.image):
        raise NearmetalError(f"--gpus with {runtime_name}: image '{c.image.name}' has no {MOUNT_POINT} mount point "
                             f"(made before GPU support): create it (mkdir {c.image.rootfs}{MOUNT_POINT}; a SquashFS "
                             "file needs the image made again) or use --runtime apptainer or podman")
