"""`nearmetal run`: compose launcher x runtime x MPI model into one command and start it.

Flow: resolve the host MPI (launcher family) -> the model prepares what each rank runs
(program, env, mounts) -> the runtime wraps that in a container (not for native) -> the
launcher starts N copies. The result is a Plan: the exact argv and environment.
"""

import os
import sys

from .errors import NearmetalError
from .models import MODES


class RunRequest:
    __slots__ = ("mode", "runtime", "image", "mpi", "ranks", "ranks_per_node", "threads", "env",
                 "program", "args", "use_sqfs", "scheduler", "slurm", "workdir")

    def __init__(self, program, args=(), mode="native", runtime=None, image=None, mpi=None,
                 ranks=2, ranks_per_node=None, threads=1, env=None, scheduler=None, slurm=None, workdir=None):
        from . import runtimes, schedulers

        self.program, self.args, self.mode = program, list(args), mode
        self.runtime = runtime or runtimes.DEFAULT
        self.image, self.mpi, self.ranks, self.ranks_per_node = image, mpi, ranks, ranks_per_node
        self.threads, self.env, self.use_sqfs = threads, dict(env or {}), False
        # scheduler: a schedulers/ backend ("local": the MPI's own launcher; "slurm": srun,
        # sbatch outside an allocation); slurm: its options (partition, nodes, time, ...)
        self.scheduler, self.slurm = scheduler or schedulers.DEFAULT, dict(slurm or {})
        # The ranks' working directory (None: unchanged). Natively the launcher starts
        # there; containers get it bind-mounted read-write at /nm/work and start in it.
        self.workdir = workdir


# Where a container sees --workdir: a mount point every nearmetal image has (image.MOUNT_POINTS).
CONTAINER_WORKDIR = "/nm/work"


class Plan:
    __slots__ = ("argv", "env_delta", "notes", "cwd")

    def __init__(self, argv, env_delta, notes, cwd=None):
        self.argv, self.env_delta, self.notes, self.cwd = argv, env_delta, notes, cwd

    def environ(self):
        """The launcher's environment, stamped with the launch time: NM_LAUNCH_NS (CLOCK_REALTIME
        ns) reaches every rank through the launcher and runtime, so nm-startup can time the
        whole launch (launcher + container + loader) up to main()."""
        import time

        env = dict(os.environ)
        env.update(self.env_delta)
        env["NM_LAUNCH_NS"] = str(time.time_ns())
        return env

    def describe(self):
        import shlex

        lines = [f"# {n}" for n in self.notes]
        if self.cwd:
            lines.append(f"# working directory: {self.cwd}")
        lines += [f"{k}={shlex.quote(v)}" for k, v in sorted(self.env_delta.items())]
        lines.append(shlex.join(self.argv))
        return "\n".join(lines)


def _validate(req, check_paths=True):
    if req.mode not in MODES:
        raise NearmetalError(f"unknown mode '{req.mode}' (choose from: {', '.join(MODES)})")
    if req.ranks is None or req.ranks < 1:
        raise NearmetalError(f"-n must be a positive number of ranks, got {req.ranks}")
    if req.threads < 1:
        raise NearmetalError(f"--threads must be at least 1, got {req.threads}")
    if req.ranks_per_node is not None and req.ranks_per_node < 1:
        raise NearmetalError(f"--ranks-per-node must be at least 1, got {req.ranks_per_node}")
    if not req.program:
        raise NearmetalError("no program given: nearmetal run [OPTIONS] -- PROGRAM [ARGS...]")
    if req.workdir is not None and check_paths:
        req.workdir = _checked_workdir(req.workdir)


def _checked_workdir(path):
    """The absolute --workdir, or a one-line error when ranks could not work in it."""
    if not str(path):
        raise NearmetalError("--workdir: empty path")
    full = os.path.abspath(os.path.expanduser(str(path)))
    if not os.path.exists(full):
        raise NearmetalError(f"--workdir {path}: no such directory")
    if not os.path.isdir(full):
        raise NearmetalError(f"--workdir {path}: not a directory")
    if not os.access(full, os.W_OK | os.X_OK):
        raise NearmetalError(f"--workdir {path}: not writable")
    return full


def _default_family(req):
    from .discovery.mpi import discover

    found = discover()
    if not found:
        raise NearmetalError("no MPI installation found on this host: install Open MPI or MPICH "
                             "(Debian: openmpi-bin libopenmpi-dev, mpich libmpich-dev)")
    if req.mode == "native" and "/" in req.program and os.path.isfile(req.program):
        # The program's own MPI decides which launcher can start it.
        from .elf import read_elf
        from .families import abi_of

        try:
            for soname in read_elf(req.program).needed:
                fam = abi_of(soname)
                if fam in found:
                    return fam
        except NearmetalError:
            pass
    from .families import names

    return next(f for f in names() + tuple(found) if f in found)  # the profiles' order: Open MPI first


def plan(req, more=(), check_paths=True):
    """The Plan for one run; `more` are further MPMD components (RunRequests) that share
    MPI_COMM_WORLD with the first: `prog_a : prog_b` under one launcher. check_paths=False
    (a study's dry run): the working directory need not exist yet."""
    _validate(req, check_paths)
    for r in more:
        r.workdir = req.workdir  # one working directory for the whole job
        _validate(r, check_paths)
    from . import launchers, schedulers
    from .discovery import mpi as mpi_mod
    from .families import get as get_family
    from .families import names as family_names

    family = req.mpi or None
    if family is not None and family not in family_names():
        raise NearmetalError(f"unknown MPI '{family}' (choose from: {', '.join(family_names())})")
    scheduler = schedulers.get(req.scheduler)
    _resolve_image(req)
    if family is None and req.mode != "native":
        family = _family_from_image(req)
    mpi = mpi_mod.get(family or _default_family(req))
    profile = get_family(mpi["family"])
    launcher = launchers.get(scheduler.launcher(profile), mpi, req)
    tag = f"nm{os.getpid()}"
    total = req.ranks + sum(r.ranks for r in more)
    # What the family's ranks need when they run in containers, and in separate namespaces
    # (MPMD components, or a container per rank where the scheduler places ranks).
    shared = profile.cross_namespace_env(containers=any(r.mode != "native" for r in [req, *more]),
                                         separate_namespaces=bool(more) or scheduler.one_container_per_rank)
    parts = [_component(req, mpi, tag, total, shared, scheduler, profile)]
    for i, r in enumerate(more, start=1):
        if r.mpi and r.mpi != mpi["family"]:
            raise NearmetalError(f"MPMD component {i + 1} asks for {r.mpi}, but components share one "
                                 f"MPI_COMM_WORLD: every component must use {mpi['family']}")
        _resolve_image(r)
        parts.append(_component(r, mpi, f"{tag}c{i}", total, shared, scheduler, profile))
    launch_env, notes = {}, []
    for lreq, env, n in parts:
        launch_env.update(env)
        notes += n
    if more:
        argv, extra = launcher.command_mpmd([p[0] for p in parts])
        notes.append(f"MPMD: {len(parts)} components, {total} ranks in one MPI_COMM_WORLD")
    else:
        argv, extra = launcher.command(parts[0][0])
    launch_env.update(extra)
    launch_env = {k: v for k, v in launch_env.items() if os.environ.get(k) != v}
    if req.workdir and any(r.mode != "native" for r in [req, *more]):
        notes.append(f"containers: {req.workdir} mounted read-write at {CONTAINER_WORKDIR}, ranks start there")
    return Plan(argv, launch_env, notes, cwd=req.workdir)


def _resolve_image(req):
    if req.mode == "native" or not isinstance(req.image, (str, type(None))):
        return
    from . import image as image_mod

    from .families import names

    spec = req.image or image_mod.default_name(image_mod.host_distro(), names())
    req.use_sqfs = spec.endswith(".sqfs")
    req.image = image_mod.resolve(spec)


def _component(req, mpi, tag, total_ranks, shared_env, scheduler, profile):
    """(LaunchRequest, launcher environment, notes) for one component of a launch."""
    from .launchers.base import LaunchRequest
    from .models import prepare

    runtime = None
    if req.mode != "native":
        from . import runtimes

        runtime = runtimes.get(req.runtime)
        if not runtime.path():
            raise NearmetalError(f"runtime '{req.runtime}' is not installed ({runtime.binary} not on PATH)")
    req.mpi = mpi
    model = prepare(req.mode, req)
    launch_env = {}
    # OpenMP placement is explicit, never the runtime's default of one thread per core;
    # oversubscribed ranks must not spin-wait (5-7x slower when they do).
    rank_env = {"OMP_NUM_THREADS": str(req.threads)}
    if total_ranks * req.threads > (os.cpu_count() or 1):
        rank_env["OMP_WAIT_POLICY"] = "passive"
    rank_env.update(shared_env or {})
    rank_env.update(req.env)
    if runtime is None:
        rank_argv = model.argv
    else:
        from .runtimes.base import RankSpec

        container_env = dict(model.env)
        if req.workdir:
            # Open MPI and podman --env-host hand the host's $PWD on; shells and Fortran
            # runtimes trust $PWD when it names the same directory (through /tmp).
            container_env["PWD"] = CONTAINER_WORKDIR
        # User --env goes into the container: the runtime sets it there.
        container_env.update(rank_env)
        rank_env = {}
        # Namespace joining needs the exact peer count per node, which a resource manager
        # decides at run time: there every rank gets its own container (see plan()).
        peers = 1 if scheduler.one_container_per_rank else (req.ranks_per_node or req.ranks)
        mounts, inner_cwd = list(model.mounts), None
        if req.workdir:
            from .runtimes.base import Mount

            mounts.append(Mount(req.workdir, CONTAINER_WORKDIR, readonly=False))
            inner_cwd = CONTAINER_WORKDIR
        spec = RankSpec(req.image, model.argv, env=container_env, mounts=mounts, local_size_env=profile.local_size_env,
                        ranks_per_node=peers, tag=tag, use_sqfs=req.use_sqfs, workdir=inner_cwd)
        rank_argv = runtime.wrap(spec)
        launch_env.update(runtime.launch_env())
    lreq = LaunchRequest(req.ranks, rank_argv, ranks_per_node=req.ranks_per_node, threads=req.threads,
                         env=rank_env, pmi_port=bool(runtime and runtime.needs_pmi_port),
                         cores=os.cpu_count() or 1)
    lreq.total_ranks = total_ranks
    return lreq, launch_env, list(model.notes)


def _family_from_image(req):
    """Without --mpi, a container run uses the MPI family the program was built against."""
    from .elf import LinkerView
    from .models.program import container_program, mpi_abi

    from .models.program import is_kernel

    image = req.image
    if is_kernel(req.program):
        return None  # nearmetal's kernels exist for every MPI in the image
    from .families import names

    for fam in image.mpis or names():
        try:
            path, _ = container_program(image, req.program, fam)
        except NearmetalError:
            continue
        abi, _ = mpi_abi(LinkerView(image.rootfs), path)
        if abi:
            return abi
    return image.mpis[0] if image.mpis else None


def execute(plan, verbose=False):
    """Replace this process with the launcher under nm-supervise (same PID): the exit
    status is the program's, and killing this PID, even with SIGKILL, ends the whole job."""
    from . import supervise

    if verbose:
        print(plan.describe(), file=sys.stderr, flush=True)
    argv = supervise.wrap(plan.argv, die_with_parent=False)
    sys.stdout.flush()
    if plan.cwd:
        try:
            os.chdir(plan.cwd)
        except OSError as e:
            raise NearmetalError(f"--workdir {plan.cwd}: {e.strerror}")
    try:
        os.execve(argv[0], argv, plan.environ())
    except OSError as e:
        raise NearmetalError(f"cannot start {plan.argv[0]}: {e.strerror}")


def start(plan):
    """Start a plan as a supervised child in its own session, stdout/stderr piped (text).
    The job ends when this process ends, however it ends (see supervise)."""
    import subprocess

    from . import supervise

    try:
        return subprocess.Popen(supervise.wrap(plan.argv), env=plan.environ(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, errors="replace",
                                start_new_session=True, cwd=plan.cwd)
    except OSError as e:  # E2BIG (huge arguments or environment), a vanished working directory, ...
        raise NearmetalError(f"cannot start {plan.argv[0]}: {e.strerror}")
    except ValueError as e:  # a NUL byte in an argument or environment value
        raise NearmetalError(f"cannot start {plan.argv[0]}: {e}")


def wait(proc, timeout=None):
    """(exit status, stdout, stderr, why) for a started plan; on time-out the job's whole
    process tree is ended and `why` says so (exit status None); an interrupt ends it too."""
    import subprocess

    from . import supervise

    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        supervise.stop(proc)
        out, err = proc.communicate()
        return None, out, err, f"timed out after {timeout:g} s; the job's process tree was ended"
    except BaseException:
        supervise.stop(proc)
        proc.communicate()
        raise
    return proc.returncode, out, err, None


def capture(plan, timeout=None):
    """Run a plan as a supervised child; (exit status, stdout, stderr). On time-out the
    job's whole process tree is ended and a one-line error raised."""
    rc, out, err, why = wait(start(plan), timeout)
    if why:
        raise NearmetalError(f"{plan.argv[0]}: {why}")
    return rc, out, err
