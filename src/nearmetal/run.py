"""`nearmetal run`: compose launcher x runtime x MPI model into one command and start it.

Flow: resolve the request (resolve.py: host MPI and its family profile, image, runtime,
scheduler) -> the MPI model prepares what each rank runs (program, env, mounts) -> compose
(compose.py): the runtime wraps that in a container (not for native), the scheduler's
launcher starts N copies. The result is a Plan: the exact argv and environment.
"""

import os
import sys

from .errors import NearmetalError
from .models import in_container


class RunRequest:
    """What was asked for, as given: names and strings (resolve.py turns them into things).
    Changed in one place only: plan() makes the working directory absolute and gives MPMD
    components 2.. the first one's working directory, inputs, network and account; any
    other request that differs is a new one (replace(); docs/architecture.md). A plain class,
    not a dataclass: `nearmetal run` would import dataclasses and inspect for it (~15 ms)."""

    __slots__ = ("program", "args", "mode", "runtime", "image", "mpi", "ranks", "ranks_per_node", "threads", "env",
                 "scheduler", "options", "workdir", "runtime_args", "network", "user", "workdir_binds", "gpus",
                 "binding")

    def __init__(self, program, args=(), mode="native", runtime=None, image=None, mpi=None,
                 ranks=2, ranks_per_node=None, threads=1, env=None, scheduler=None, options=None, workdir=None,
                 runtime_args=(), network=None, user=None, workdir_binds=(), gpus=None,
                 binding=None):
        from . import schedulers

        self.program, self.args, self.mode = program, list(args), mode
        # A native run has no runtime (and does not import runtimes/ to name the default one)
        self.runtime = runtime or (_default_runtime() if in_container(mode) else None)
        self.image, self.mpi, self.ranks, self.ranks_per_node = image, mpi, ranks, ranks_per_node
        self.threads, self.env = threads, dict(env or {})
        # scheduler: a schedulers/ backend ("local": the MPI's own launcher; "slurm": srun,
        # sbatch outside an allocation); options: its options (Slurm's partition, nodes, time, ...)
        self.scheduler, self.options = scheduler or schedulers.DEFAULT, dict(options or {})
        # The ranks' working directory (None: unchanged). Natively the launcher starts
        # there; containers get it bind-mounted read-write at /nm/work and start in it.
        self.workdir = workdir
        # Extra arguments for the container runtime, before the image (a named variant's).
        self.runtime_args = list(runtime_args)
        # How the ranks reach each other (networks/): the host's network, or isolated nodes.
        self.network = network or _default_network()
        # The account the launcher and ranks run as (privilege.py, docs/privilege.md); None: as the caller.
        self.user = user
        # (host path, name): large inputs a container sees read-only as /nm/work/NAME
        # (study/config/program.py stages the small ones as copies)
        self.workdir_binds = list(workdir_binds)
        # --gpus all|N|ID,ID... (gpu/, docs/gpu.md); None: no GPU asked for.
        self.gpus = gpus
        # Ranks bound to cores: "core", "none", or None (the launcher's default; launchers/_binding.py).
        self.binding = binding

    def replace(self, **changes):
        """A new request: this one's fields, with `changes`."""
        return RunRequest(**{**{k: getattr(self, k) for k in self.__slots__}, **changes})


def _default_network():
    from .networks import DEFAULT

    return DEFAULT


def _default_runtime():
    from .runtimes import DEFAULT

    return DEFAULT


from .compose import CONTAINER_WORKDIR  # noqa: F401  (where containers see --workdir)


def unseen_host_files(components, cwd=None, always_seen=("/tmp", "/dev/shm")):
    """Warnings for container ranks' arguments that name an existing host file the
    container will not see at that path (the user ran from a directory the ranks do not
    start in, without --workdir): said before launching, since the program's own "cannot
    open input" would not say why. always_seen: what every runtime binds at the same path."""
    cwd = cwd or os.getcwd()
    out = []
    for c in components:
        if not c.in_container:
            continue
        seen, starts_in_cwd = c.runtime.host_dirs_seen(c.runtime_args, cwd)
        seen = [d.rstrip("/") + "/" for d in [*always_seen, *seen]]
        for arg in c.args:
            if not arg or arg.startswith("-") or "\n" in arg:
                continue
            if os.path.isabs(arg):
                if not os.path.exists(arg) or (arg + "/").startswith(tuple(seen)):
                    continue
                from .elf import LinkerView

                if LinkerView(c.image.rootfs).host_path(arg).exists():
                    continue  # the image has its own file there
                hint = "give --workdir DIR (mounted read-write at /nm/work, where the ranks start) with it inside"
                if c.workdir and (arg + "/").startswith(c.workdir.rstrip("/") + "/"):
                    hint = f"the ranks see it as {arg.replace(c.workdir.rstrip('/'), '/nm/work', 1)}"
            elif c.workdir or starts_in_cwd or not os.path.exists(os.path.join(cwd, arg)):
                continue  # resolved in the working directory the ranks start in (or nowhere)
            else:
                hint = "give --workdir DIR (mounted read-write at /nm/work, where the ranks start) with it inside"
            out.append(f"warning: '{arg}' is a file on the host that the {c.mode} ranks in the container will not "
                       f"see at that path: {hint}")
    return out


class Plan:
    """The exact launch: argv, the environment delta, notes on what was decided, the working
    directory, and the resolved components (resolve.Resolved) it was composed from; with
    run --user, the account (privilege.Account), nm-supervise's options that switch to it
    (`supervise_options`) and the caller's variables removed from the environment (`unset`)."""

    __slots__ = ("argv", "env_delta", "notes", "cwd", "components", "account", "supervise_options", "unset", "tag",
                 "binding")

    def __init__(self, argv, env_delta, notes, cwd=None, components=(), account=None, supervise_options=(),
                 unset=(), tag=None):
        self.argv, self.env_delta, self.notes, self.cwd = argv, env_delta, notes, cwd
        self.components, self.tag = list(components), tag
        self.account, self.supervise_options, self.unset = account, list(supervise_options), tuple(unset)
        self.binding = None  # the job's binding as decided (launchers/_binding.py); None: not asked

    def environ(self):
        """The launcher's environment, stamped with the launch time: NM_LAUNCH_NS (CLOCK_REALTIME
        ns) reaches every rank through the launcher and runtime, so nm-startup can time the
        whole launch (launcher + container + loader) up to main()."""
        import time

        env = dict(os.environ)
        env.update(self.env_delta)
        for key in self.unset:
            env.pop(key, None)
        env["NM_LAUNCH_NS"] = str(time.time_ns())
        return env

    def prepare_account(self):
        """What must be done on this machine before the launch and not for a dry run: as
        another account, each runtime readies its image for it (podman imports it into the
        account's storage, once); what was done is added to the notes."""
        if self.account is None:
            return
        for c in self.components:
            if c.runtime is not None:
                self.notes += c.runtime.prepare_account(c.image)

    def after_job(self):
        """Once the job's processes are all gone: each runtime removes what the job left on
        this machine (runtimes' after_job), so the next launch of this plan starts clean."""
        from .compose import component_tag

        for i, c in enumerate(self.components):
            if c.runtime is not None and self.tag:
                c.runtime.after_job(component_tag(self.tag, i))

    def describe(self):
        import shlex

        lines = [f"# {n}" for n in self.notes]
        if self.cwd:
            lines.append(f"# working directory: {self.cwd}")
        if self.unset:
            lines.append(f"# unset: {' '.join(self.unset)}")
        lines += [f"{k}={shlex.quote(v)}" for k, v in sorted(self.env_delta.items())]
        lines.append(shlex.join(self.argv))
        return "\n".join(lines)


def refuse_batch_options(scheduler, options):
    """A batch scheduler's options (--nodes, --time, ...) where the scheduler takes none: it would
    ignore them without a word."""
    if not options:
        return
    from . import schedulers

    if not schedulers.get(scheduler or schedulers.DEFAULT).batch_options:
        batch = " or ".join(f"--scheduler {n}" for n in schedulers.names() if schedulers.get(n).batch_options)
        given = " and ".join(f"--{o.replace('slurm_', '')}" for o in options)
        raise NearmetalError(f"{given}: a batch scheduler's options, which this run's scheduler "
                             f"({scheduler or schedulers.DEFAULT}) would ignore: add {batch}, or leave them out")


def _validate(req, check_paths=True):
    """A one-line error for what cannot run; the working directory made absolute, in place
    (one of the two changes a request sees: docs/architecture.md)."""
    container = in_container(req.mode)  # an unknown mode: the registry's one-line error
    if req.ranks is None or req.ranks < 1:
        raise NearmetalError(f"-n must be a positive number of ranks, got {req.ranks}")
    if req.threads < 1:
        raise NearmetalError(f"--threads must be at least 1, got {req.threads}")
    if req.ranks_per_node is not None and req.ranks_per_node < 1:
        raise NearmetalError(f"--ranks-per-node must be at least 1, got {req.ranks_per_node}")
    if not req.program:
        raise NearmetalError("no program given: nearmetal run [OPTIONS] -- PROGRAM [ARGS...]")
    if req.runtime_args and not container:
        from .models import names

        raise NearmetalError("runtime arguments need a container mode ("
                             + " or ".join(n for n in names() if in_container(n)) + ")")
    refuse_batch_options(req.scheduler, req.options)
    from . import networks

    networks.NETWORKS.get(req.network)  # an unknown name: the registry's one-line error
    if req.user is not None:
        from .privilege import check_name

        check_name(req.user)
    if req.gpus is not None:
        from .gpu.select import parse

        parse(req.gpus)  # its spelling, before anything is looked up
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


def plan(req, more=(), check_paths=True, host=None):
    """The Plan for one run; `more` are further MPMD components (RunRequests) that share
    MPI_COMM_WORLD with the first: `prog_a : prog_b` under one launcher. check_paths=False
    (a study's dry run): the working directory need not exist yet. host: the machine's MPIs
    and images (resolve.Host; tests pass their own)."""
    from .compose import compose
    from .models import prepare
    from .resolve import Host, resolve

    _validate(req, check_paths)
    for r in more:  # the other change a request sees, here and only here (docs/architecture.md)
        r.workdir = req.workdir  # one working directory for the whole job
        r.workdir_binds = list(req.workdir_binds)  # and the large inputs bound into it
        r.network = req.network  # and one network
        r.user = req.user  # and one account: the launcher's
        r.gpus = r.gpus if r.gpus is not None else req.gpus  # the GPUs, unless a component names its own
        _validate(r, check_paths)
    host = host or Host()
    components = resolve(req, more, host)
    account = components[0].account
    if account is not None:
        from . import privilege

        privilege.check(components, account, host.facts(), os.getcwd())
    from . import networks

    networks.get(req.network).check(components)  # the host's: nothing to check
    models = [prepare(c.mode, c) for c in components]
    gpus = _gpu_plans(components, host)
    if account is not None and gpus:  # the account must be able to open the GPUs' device nodes
        from .privilege import check_devices

        check_devices(account, [d for g in gpus if g for d in g.devices], host.facts())
    tag = f"nm{os.getpid()}x{os.urandom(3).hex()}"  # a reused PID never meets an earlier job's join state
    cores = os.cpu_count() or 1
    binding = _binding(req, components, cores)
    argv, env_delta, notes = compose(components, models, cores=cores, environ=os.environ, tag=tag, gpus=gpus,
                                     binding=binding)
    p = Plan(argv, env_delta, notes, cwd=req.workdir, components=components, tag=tag)
    p.binding = binding
    return p if account is None else _as_account(p, account, host.facts())


def _binding(req, components, cores):
    """The job's binding decision (launchers/_binding.py), None when the request asks for none."""
    if req.binding is None:  # `nearmetal run`: the launcher's default, without importing the decision (run overhead)
        return None
    from . import networks
    from .launchers._binding import decide

    first = components[0]
    return decide(req.binding, first.scheduler.launcher(first.profile), sum(c.ranks for c in components),
                  max(c.threads for c in components), cores, hosts=bool(networks.get(req.network).emulated))


def _gpu_plans(components, host):
    """gpu.plan.GpuPlan per component that asked for --gpus (None for the others); None: none did."""
    if not any(getattr(c, "gpus", None) for c in components):
        return None
    from .gpu.plan import prepare as gpu_prepare

    found = host.gpus()
    return [gpu_prepare(c, found, c.gpus) if c.gpus else None for c in components]


def _as_account(p, account, facts):
    """The plan run as `account`: its identity in the environment, root's own variables
    removed, and the view of the file system it needs (privilege.view)."""
    from . import privilege
    from .home import home_str

    p.account = account
    p.env_delta.update(account.env())
    p.unset = tuple(k for k in privilege.ROOT_ONLY_ENV if k in os.environ and k not in p.env_delta)
    masks, shows = privilege.view(account, privilege.wanted_paths(p.components, p.argv, p.env_delta, home_str()),
                                  facts)
    p.supervise_options = privilege.supervise_options(account, masks, shows)
    cwd = p.cwd or os.getcwd()
    st = facts.stat(cwd)
    p.notes += privilege.notes(account, masks, shows, cwd_writable=bool(st and privilege.permits(st, account, "wx")),
                               cwd=cwd)
    return p


def execute(plan, verbose=False):
    """Replace this process with the launcher under nm-supervise (same PID): the exit
    status is the program's, and killing this PID, even with SIGKILL, ends the whole job."""
    from . import supervise

    plan.prepare_account()
    if verbose:
        print(plan.describe(), file=sys.stderr, flush=True)
    argv = supervise.wrap(plan.argv, die_with_parent=False, options=["--launcher", *plan.supervise_options])
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

    plan.prepare_account()
    try:
        return subprocess.Popen(supervise.wrap(plan.argv, options=["--launcher", *plan.supervise_options]),
                                env=plan.environ(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, errors="replace",
                                start_new_session=True, cwd=plan.cwd)
    except OSError as e:  # E2BIG (huge arguments or environment), a vanished working directory, ...
        raise NearmetalError(f"cannot start {plan.argv[0]}: {e.strerror}")
    except ValueError as e:  # a NUL byte in an argument or environment value
        raise NearmetalError(f"cannot start {plan.argv[0]}: {e}")


def wait(proc, timeout=None, before_stop=None):
    """(exit status, stdout, stderr, why) for a started plan; on time-out the job's whole
    process tree is ended and `why` says so (exit status None); an interrupt ends it too.
    before_stop(pid): called on time-out with the job's PID while its tree still runs."""
    import subprocess

    from . import supervise

    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        if before_stop is not None:
            before_stop(proc.pid)
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
