"""Bind: the host's MPI library and its dependency closure, mounted (read-only where the
runtime can: not ch-run, whose launches say so) into the container and preferred over the
image's own MPI.

Steps, each of which can refuse with the exact reason:
1. ABI: the program's MPI SONAME family must match the host MPI's (MPICH ABI
   libmpi.so.12 / libmpich.so.12 are aliased to each other).
2. Closure: the host library's DT_NEEDED closure, found by emulating ld.so (never glibc
   or the loader), plus the directories of plugins the MPI loads at run time.
3. glibc: the highest GLIBC_x.y the staged libraries need must not exceed the image's.
4. Staging: the closure is hard-linked (or copied) into one directory under the
   nearmetal home, keyed by content, and that directory is bind-mounted (read-only but for
   ch-run) at /nm/host-mpi (a mount point every nearmetal image has).
5. Preference: LD_LIBRARY_PATH when the program lets it win; when the program's DT_RPATH
   would pin the container's MPI, launch through the image's ld.so with --library-path and
   --preload so the host library still wins.
"""

import hashlib
import json
import os
import shutil

from ..errors import NearmetalError
from ..program_paths import container_program, mpi_abi
from . import MODELS, ModelPlan
from .base import Model

MOUNT_POINT = "/nm/host-mpi"
LIBDIR = f"{MOUNT_POINT}/lib"
STAGE_VERSION = 4  # 2: a prefix installation's own libraries first; 3: inodes in the keys, devices cached; 4: no CUDA note for UCX's fabric modules

# Sonames that are the same ABI under two names: provide the one the program asks for.
ABI_ALIASES = {
    "libmpi.so.12": "libmpich.so.12",
    "libmpich.so.12": "libmpi.so.12",
    "libmpifort.so.12": "libmpichfort.so.12",
    "libmpichfort.so.12": "libmpifort.so.12",
    "libmpicxx.so.12": "libmpichcxx.so.12",
    "libmpichcxx.so.12": "libmpicxx.so.12",
}


class BindRefused(NearmetalError):
    """Bind mode cannot work for this program and image: `why`, and `remedy` (what to use
    instead; '' when none), said apart so that doctor can leave out a remedy that does not help."""

    def __init__(self, why, remedy="", other_mpi=None):
        self.why, self.remedy, self.other_mpi = why, remedy, other_mpi  # other_mpi: the --mpi the remedy names
        super().__init__(f"bind mode refused: {why}" + (f"; {remedy}" if remedy else ""))


def _fmt_glibc(v):
    return f"{v[0]}.{v[1]}"


def host_closure(installation, program_sonames):
    """Host libraries to stage: (soname -> ResolvedLib) in load order, and plugin dirs.

    The MPI sonames the program needs are resolved on the host (through the ABI aliases),
    then the closure of each, then the closure of every plugin.
    """
    from ..elf import LinkerView, read_elf

    # An installation under a prefix (--mpi FAMILY@PREFIX) is found as its ranks find it: its
    # library directory first (LD_LIBRARY_PATH, families' prefix_env), then the host's linker.
    host = LinkerView("/", **({"ld_library_path": [os.path.dirname(installation["library"])]} if installation.get("prefix") else {}))
    ordered = {}
    aliases = {}
    anchor = read_elf(installation["library"])

    def add_closure(path):
        for lib in host.closure(path):
            if not _driver_library(lib.soname):  # the GPU driver's: bound by --gpus (gpu/stage.py), never staged
                ordered.setdefault(lib.soname, lib)

    roots = []
    for soname in program_sonames:
        lib = host.resolve(soname, anchor)
        if lib is None and soname in ABI_ALIASES:
            lib = host.resolve(ABI_ALIASES[soname], anchor)
            if lib is not None:
                aliases[soname] = lib.soname
        if lib is None:
            raise NearmetalError(f"bind mode: the program needs {soname}, which the host {installation['family']} "
                                 f"does not provide")
        roots.append(lib)
    for lib in roots:
        add_closure(str(lib.host_path))
        ordered.setdefault(lib.soname, lib)
    plugins = {}
    for kind, directory in sorted(installation.get("plugin_dirs", {}).items()):
        files = []
        for entry in sorted(os.listdir(directory)):
            full = os.path.join(directory, entry)
            if entry.endswith(".so") or ".so." in entry:
                if os.path.isfile(full) and not entry.endswith(".a"):
                    files.append(full)
        for f in files:
            try:
                add_closure(f)
            except NearmetalError:
                # A plugin whose own dependencies are missing on the host cannot load
                # there either; the MPI skips it at run time, so do we.
                continue
        plugins[kind] = (directory, files)
    _add_cuda_transports(installation, ordered, plugins, add_closure)
    return ordered, aliases, plugins


def _driver_library(soname):
    from ..discovery.gpu_libs import NVLIBLIST, split_name

    return split_name(soname)[0] in NVLIBLIST


def _add_cuda_transports(installation, ordered, plugins, add_closure):
    """A CUDA-aware host MPI's UCX CUDA modules (discovery/mpi_cuda.py) as the plugin kind
    "ucx": staged at lib/ucx, beside the staged libucs, where UCX looks for its modules
    (and UCX_MODULE_DIR names it), with their closure less the driver's libraries. Without
    them nothing changes (UCX's other modules stay out, as before)."""
    from ..discovery.mpi_cuda import detect

    libucs = ordered.get("libucs.so.0")
    if libucs is None:
        return
    found = detect(installation, str(libucs.host_path))
    if not found["ucx_modules"] or "ucx" in plugins:
        return
    for f in found["ucx_modules"]:
        try:
            add_closure(f)
        except NearmetalError:
            continue  # cannot load on the host either (its CUDA runtime missing): UCX skips it
    plugins["ucx"] = (found["ucx_dir"], found["ucx_modules"])


def cuda_notes(installation, plugins):
    """bind's notes on the host MPI's CUDA transports: what was staged, or nothing."""
    if "ucx" not in plugins:
        return []
    directory, files = plugins["ucx"]
    from ..discovery.mpi_cuda import UCX_CUDA_MODULE, UCX_TRANSPORTS, _module_name

    # UCX's whole module directory is staged for the fabric (libuct_cma, libuct_ib, ...): only
    # its CUDA modules make the MPI CUDA-aware
    names = sorted({_module_name(f) for f in files if UCX_CUDA_MODULE.match(os.path.basename(f))})
    if not names:
        return []
    transports = [t for n in names for t in UCX_TRANSPORTS.get(n, ())]
    return [f"bind: host {installation['family']} is CUDA-aware: UCX's CUDA transports ({', '.join(transports) or 'memory hooks'}: "
            f"{', '.join(n + '.so' for n in names)} from {directory}) staged at {LIBDIR}/ucx; they need the driver "
            "--gpus binds"]


def _stage_key(installation, libs, aliases, plugins):
    h = hashlib.sha256()
    h.update(json.dumps([STAGE_VERSION, installation["family"], installation["library"], sorted(aliases.items())]).encode())
    paths = [str(l.host_path) for l in libs.values()]
    for kind, (_, files) in plugins.items():
        paths += files
    for p in sorted(paths):
        st = os.stat(p)  # the inode: staged files are hard links to these very files
        h.update(f"{p}:{st.st_size}:{st.st_mtime_ns}:{st.st_ino}\n".encode())
    return h.hexdigest()[:16]


def _place(src, dst):
    """Hard link when possible (no copy, same inode), else copy."""
    try:
        os.link(os.path.realpath(src), dst)
    except OSError:
        shutil.copy2(os.path.realpath(src), dst)


def stage(installation, libs, aliases, plugins):
    """The staging directory for this closure, built once and reused."""
    from ..home import subdir

    key = _stage_key(installation, libs, aliases, plugins)
    root = subdir("bind") / f"{installation['family']}-{key}"
    if (root / "manifest.json").exists():
        return root
    tmp = root.with_name(root.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "lib").mkdir(parents=True)
    for soname, lib in libs.items():
        _place(lib.host_path, tmp / "lib" / soname)
    for alias, target in aliases.items():
        os.symlink(target, tmp / "lib" / alias)
    for kind, (directory, files) in plugins.items():
        (tmp / "lib" / kind).mkdir()
        for f in files:
            _place(f, tmp / "lib" / kind / os.path.basename(f))
    manifest = {
        "family": installation["family"], "version": installation["version"], "library": installation["library"],
        "libraries": {s: str(l.host_path) for s, l in libs.items()},
        "aliases": aliases,
        "plugins": {k: d for k, (d, _) in plugins.items()},
    }
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1))
    try:
        os.rename(tmp, root)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)  # a concurrent run staged it first
    return root


def prepare(req):
    """The bind plan for one program in one image with one host MPI; cached, because the
    ELF work behind it (both closures, plugins, glibc) costs 0.1-0.6 s and every rank
    launch would pay it. The cache is checked against the stat of every file it used."""
    from ..discovery.cache import cached_plan

    image, installation = req.image, req.installation
    from ._fabric import devices

    key = [STAGE_VERSION, str(image.rootfs), image.meta.get("digest"), req.program, installation["family"], installation["library"],
           devices()]  # a fabric that appears (or goes) makes another plan
    hit = cached_plan("bind", key)
    if hit is not None:
        return _from_cache(hit, req.args)
    plan = _prepare(req)
    files = [str(plan.host_file), str(plan.staged / "manifest.json")]
    manifest = json.loads((plan.staged / "manifest.json").read_text())
    files += list(manifest["libraries"].values()) + list(manifest["plugins"].values())
    cached_plan("bind", key, value={"argv": plan.argv[:len(plan.argv) - len(req.args)], "env": plan.env,
                                    "mounts": [(m.source, m.target, m.readonly) for m in plan.mounts],
                                    "notes": plan.notes, "program": plan.program, "devices": plan.devices},
                 files=files)
    return plan


def _from_cache(hit, args):
    from ..runtimes.base import Mount

    plan = ModelPlan(list(hit["argv"]) + list(args), env=hit["env"],
                     mounts=[Mount(s, t, ro) for s, t, ro in hit["mounts"]], notes=hit["notes"], program=hit["program"])
    plan.devices = list(hit.get("devices", []))
    return plan


def _prepare(req):
    from ..elf import LinkerView, glibc_missing, glibc_release, read_elf
    from ..families import abi_of, get as get_family

    image, installation = req.image, req.installation
    path, host_file = container_program(image, req.program, installation["family"])
    view = LinkerView(image.rootfs)
    prog_abi, prog_soname = mpi_abi(view, path)
    host_abi = abi_of(installation["soname"]) or installation["family"]
    notes = []
    if prog_abi is None:
        # A script or launcher wrapper: stage the host MPI for whatever it starts.
        notes.append(f"bind: {path} does not link an MPI library itself; the host {installation['family']} is "
                     f"staged and put first on LD_LIBRARY_PATH for the programs it starts (ABI not checked)")
        prog_soname = installation["soname"]
    elif prog_abi != host_abi:
        raise BindRefused(
            f"{path} is built against {get_family(prog_abi).abi_title} ({prog_soname}) but the host MPI is "
            f"{installation['family']} {installation['version']} ({installation['soname']}): the ABIs differ",
            f"use --mpi {prog_abi} or --mode hybrid", other_mpi=prog_abi)

    # Every MPI-family soname the program loads (C, C++ and Fortran bindings).
    prog_info = read_elf(host_file)
    try:
        inner = view.closure(path)
    except NearmetalError as e:
        raise NearmetalError(f"bind mode: cannot resolve {path}'s libraries inside the image: {e}")
    mpi_sonames = [l.soname for l in inner if l.soname.startswith(("libmpi", "libmpich"))]
    libs, aliases, plugins = host_closure(installation, mpi_sonames or [prog_soname])

    # glibc: the host libraries are linked against the host's glibc symbol versions; each
    # one they need must be defined by the image's libc.so.6.
    release = glibc_release(image.rootfs)
    if release is None:
        raise BindRefused(f"cannot find glibc in image '{image.name}'")
    missing = glibc_missing(libs.values(), image.rootfs)
    if missing:
        tag, needer = missing[0]
        raise BindRefused(
            f"host {installation['family']} library {os.path.basename(needer)} needs {tag} but image "
            f"'{image.name}' has glibc {_fmt_glibc(release)}",
            f"use an image whose glibc is at least {tag[len('GLIBC_'):]}, or --mode hybrid")

    staged = stage(installation, libs, aliases, plugins)
    from ..runtimes.base import Mount

    env = {}
    plugin_env = get_family(installation["family"]).plugin_env  # each plugin loader pointed at its staged directory
    for kind in plugins:
        if kind in plugin_env:
            env[plugin_env[kind]] = f"{LIBDIR}/{kind}"
    notes += [f"bind: host {installation['family']} {installation['version']} ({len(libs)} libraries, plugins: "
             f"{', '.join(plugins) or 'none'}) staged at {staged} -> {MOUNT_POINT}"]
    for alias, target in aliases.items():
        notes.append(f"bind: {alias} provided as an alias of the host's {target} (same MPICH ABI)")
    notes += cuda_notes(installation, plugins)

    # Would the program's DT_RPATH pin the image's own MPI ahead of LD_LIBRARY_PATH?
    pinned = None
    probe = LinkerView(image.rootfs, ld_library_path=[LIBDIR])
    for soname in mpi_sonames or [prog_soname]:
        hit = probe.resolve(soname, prog_info, prog_info)
        if hit is not None and hit.found_via == "rpath":
            pinned = hit
            break
    if pinned is None:
        env["LD_LIBRARY_PATH"] = LIBDIR
        argv = [path] + list(req.args)
    else:
        interp = prog_info.interp or "/lib64/ld-linux-x86-64.so.2"
        preload = " ".join(f"{LIBDIR}/{s}" for s in libs)
        argv = [interp, "--library-path", LIBDIR, "--preload", preload, path] + list(req.args)
        notes.append(f"bind: {path} carries DT_RPATH {':'.join(prog_info.rpath)} which would load the image's "
                     f"{pinned.path}; launching through {interp} --preload so the host library wins")
    mounts = [Mount(staged, MOUNT_POINT, readonly=True)]
    from . import _fabric as fabric

    found = fabric.devices()
    plan = ModelPlan(argv, env=env, mounts=mounts, notes=notes + fabric.notes(found), program=path)
    plan.host_file, plan.staged, plan.devices = host_file, staged, found
    return plan


@MODELS.register
class Bind(Model):
    """The image's program with the host MPI bound in and preferred."""

    title = "Bind mode"
    prepare = staticmethod(prepare)
