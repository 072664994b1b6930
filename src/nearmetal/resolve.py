"""Resolving a run request: names become the things they name, once, before composing.

A RunRequest holds what the user asked for, as given (names and strings). resolve() turns
each component into a Resolved: the host MPI installation and its family profile, the
image (for container modes), the runtime and scheduler backends. Nothing is mutated, and
the machine is reached only through a Host, so planning is testable without MPI or images
(tests pass a Host of their own).
"""

import os

from .errors import NearmetalError
from .models import in_container


class Host:
    """What resolving needs from this machine: its MPI installations and its images."""

    def installations(self):
        """{family: installation record} (discovery.mpi): the MPIs installed here."""
        from .discovery.mpi import discover

        return discover()

    def installation(self, spec):
        """The installation record of an MPI as a request names it (FAMILY or FAMILY@PREFIX)."""
        from .discovery.mpi import get

        return get(spec)

    def image(self, spec):
        """The Image for a name or path; None: the default image."""
        from . import image as image_mod
        from .families import names

        return image_mod.resolve(spec or image_mod.default_name(image_mod.host_distro(), names()))

    def program_abi(self, path):
        """The MPI family a host program links against, or None (remembered per file: the
        ELF reader is the slowest import `nearmetal run` could make)."""
        from .discovery.cache import per_file

        asked = self.__dict__.setdefault("_program_abis", {})  # one launch asks twice: its family, its check
        if path not in asked:
            asked[path] = per_file("program-abi", path, lambda: _linked_abi(path))
        return asked[path]

    def image_program_abi(self, image, program):
        """The MPI family a program inside an image is built against; None for nearmetal's
        kernels (built for every MPI in the image) and for a program that links no MPI or is not
        found: resolve() then takes the profiles' order among the image's MPIs."""
        from .elf import LinkerView
        from .families import names
        from .program_paths import container_program, is_kernel, mpi_abi

        if is_kernel(program):
            return None
        for fam in image.mpis or names():
            try:
                path, _ = container_program(image, program, fam)
            except NearmetalError:
                continue
            abi, _ = mpi_abi(LinkerView(image.rootfs), path)
            if abi:
                return abi
        return None  # links no MPI (a script, a wrapper): resolve() takes the profiles' order, as for a kernel

    def account(self, name):
        """The privilege.Account called `name` (run --user), None when there is none."""
        from .privilege import lookup

        return lookup(name)

    def gpus(self):
        """This machine's GPUs, driver, device nodes and driver libraries (discovery.gpu)."""
        from .discovery.gpu import discover

        return discover()

    def euid(self):
        return os.geteuid()

    def facts(self):
        """What privilege checks read of this machine (device modes, /etc/subuid, ...)."""
        from .privilege import Facts

        return Facts()


class Resolved:
    """One component of a launch, resolved: the request's fields (`mpi`: the MPI
    as given, FAMILY or FAMILY@PREFIX) plus `installation` (the host MPI installation record
    it resolved to, discovery.mpi), `profile` (its family), `image` (an Image, None natively),
    `image_format` (the format of the file the user named: image/formats names, None: a name or
    directory), `runtime` and `scheduler` (backend instances; runtime None natively),
    `account` (the privilege.Account the ranks run as; None: as the caller).
    The attribute names are the ones the MPI models read."""

    __slots__ = ("program", "args", "mode", "ranks", "ranks_per_node", "threads", "env", "workdir", "options",
                 "runtime_args", "mpi", "installation", "profile", "image", "image_format", "runtime", "scheduler",
                 "workdir_binds", "network", "account", "gpus")

    def __init__(self, req, installation, profile, image, runtime, scheduler, account=None):
        self.program, self.args, self.mode = req.program, tuple(req.args), req.mode
        self.ranks, self.ranks_per_node, self.threads = req.ranks, req.ranks_per_node, req.threads
        self.env, self.workdir, self.options = dict(req.env), req.workdir, dict(req.options)
        self.runtime_args = tuple(getattr(req, "runtime_args", ()))
        self.workdir_binds = tuple(getattr(req, "workdir_binds", ()))
        self.network = getattr(req, "network", None) or _default_network()
        self.mpi, self.installation = req.mpi, installation
        self.profile, self.image, self.runtime, self.scheduler = profile, image, runtime, scheduler
        self.account = account
        self.gpus = getattr(req, "gpus", None)  # --gpus as given (gpu/plan.py reads it)
        if runtime is not None:
            runtime.account = account  # what it starts, it starts as the account
        named = req.image if image is not None and isinstance(req.image, str) else ""
        self.image_format = _named_format(named) if named else None

    @property
    def in_container(self):
        return in_container(self.mode)


def _default_network():
    from .networks import DEFAULT

    return DEFAULT


def _named_format(spec):
    from .image.formats import of_path

    return of_path(spec)


def resolve(req, more=(), host=None):
    """[Resolved] for a request and its further MPMD components (which share its MPI)."""
    from . import schedulers
    from .families import get as get_family
    host = host or Host()
    account = None
    if getattr(req, "user", None) is not None:  # run --user: checked before anything is looked up
        from .privilege import account as checked_account

        account = checked_account(req.user, find=host.account, euid=host.euid())
    spec = req.mpi or None  # FAMILY or FAMILY@PREFIX, as given
    if spec is not None:
        from .discovery.mpi import spec_problem

        problem = spec_problem(spec)
        if problem:
            raise NearmetalError(problem)
    scheduler = schedulers.get(req.scheduler)
    image = host.image(req.image) if in_container(req.mode) else None
    if spec is None and image is not None:
        spec = host.image_program_abi(image, req.program) or _image_family(image, host)
    installation = host.installation(spec or _default_family(req, host))
    profile = get_family(installation["family"])
    out = [Resolved(req, installation, profile, image, _runtime(req), scheduler, account)]
    for i, r in enumerate(more, start=2):
        if r.mpi and r.mpi not in (req.mpi, installation["family"]):  # as the first one names it, or its family
            raise NearmetalError(f"MPMD component {i} asks for {r.mpi}, but components share one "
                                 f"MPI_COMM_WORLD: every component must use {req.mpi or installation['family']}")
        r_image = host.image(r.image) if in_container(r.mode) else None
        out.append(Resolved(r, installation, profile, r_image, _runtime(r), scheduler, account))
    for c in out:
        if not in_container(c.mode):
            problem = host_program_abi_problem(c.program, c.installation, host)
            if problem:
                raise NearmetalError(problem)
    return out


def host_program_abi_problem(program, installation, host, remedy="use --mpi {}", path=None):
    """Why a host program cannot be launched by `installation`'s launcher, or None: built
    against another MPI ABI, it would start as N separate 1-rank jobs, each finishing
    "successfully" with one rank's numbers. nearmetal's kernels exist for every family; a
    program that links no MPI, or is not found (the run says so), is not checked. remedy:
    what to do, with {} for the program's own family (a study file says it otherwise); path:
    the program's file when the caller has looked it up already."""
    from .program_paths import host_program, is_kernel

    if is_kernel(program):
        return None
    try:
        path = path or host_program(program, installation["family"])  # the file the native model runs
    except NearmetalError:
        return None
    if not os.path.isfile(path):
        return None
    from .families import abi_of, get as get_family

    linked = host.program_abi(path)
    launched = abi_of(installation.get("soname") or "") or installation["family"]
    if linked is None or linked == launched:
        return None
    return (f"{program} is built against {get_family(linked).abi_title}, but {installation['family']} would launch "
            f"it: each rank would start alone as a 1-rank MPI job; {remedy.format(linked)}"
            + ("" if linked in host.installations() else f" (install {_packages(linked)})"))


def _runtime(req):
    if not in_container(req.mode):
        return None
    from . import runtimes

    runtime = runtimes.get(req.runtime)
    if not runtime.path():
        raise NearmetalError(f"runtime '{req.runtime}' is not installed ({runtime.binary} not on PATH)")
    return runtime


def _linked_abi(path):
    from .elf import read_elf
    from .families import abi_of

    try:
        for soname in read_elf(path).needed:
            if abi_of(soname):
                return abi_of(soname)
    except NearmetalError:
        pass
    return None


def _image_family(image, host):
    """A kernel's or a program's that links no MPI, in a container: the first MPI in the profiles'
    order that the image holds and this host has a launcher for (None: the default family),
    the same choice as natively where the image holds both."""
    from .families import names

    found = host.installations()
    return next((fam for fam in names() if fam in image.mpis and fam in found), None)


def _default_family(req, host):
    from .families import names
    from .program_paths import host_program, is_kernel

    found = host.installations()
    if not found:
        raise NearmetalError("no MPI installation found on this host: install one (Debian: "
                             + "; ".join(f"{n}: {_packages(n)}" for n in names()) + ")")
    order = list(dict.fromkeys(f for f in names() + tuple(found) if f in found))  # the profiles' order: Open MPI first
    if not in_container(req.mode) and not is_kernel(req.program):
        for family in order if "/" not in req.program else order[:1]:
            try:  # a path, an application nearmetal built for that family, or a name on PATH
                path = req.program if "/" in req.program else host_program(req.program, family)
            except NearmetalError:
                continue  # not found: the launch says so
            fam = host.program_abi(path) if os.path.isfile(path) else None
            if fam in found:
                return fam  # the program's own MPI decides which launcher can start it
    return order[0]


def _packages(family):
    from .families import get

    return get(family).host_packages
