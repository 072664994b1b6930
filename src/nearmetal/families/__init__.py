"""MPI families: one profile module each (openmpi.py, mpich.py), all that is family-specific.

A profile says how to find the family on a host (wrappers, launchers, libraries, how to
read its version and PMI flavours), its ABI (SONAMEs), which launcher backend starts it,
which Slurm PMI plugin wires it, what its ranks need across namespaces, and what an image
installs for it. Everything else in nearmetal asks the profile; a new family (Intel MPI,
Cray MPICH, ...) is one module here.
"""

from ..registry import Registry

FAMILIES = Registry(__name__, "MPI", first=("openmpi", "mpich"))


def names():
    return FAMILIES.names()


def get(name):
    """The profile (an instance) of one family; a one-line error for an unknown name."""
    return FAMILIES.get(name)()


def wireup_prefixes():
    """Every family's launcher variable prefixes: what a clean container environment must keep."""
    out = []
    for name in FAMILIES.names():
        out += [p for p in FAMILIES.get(name).wireup_prefixes if p not in out]
    return tuple(out)


def abi_of(soname):
    """The ABI family whose libraries carry `soname`, or None."""
    for name in FAMILIES.names():
        if soname in FAMILIES.get(name).sonames:
            return name
    return None


# -- what every profile provides (here, not in a base module: `nearmetal run` reads a
# profile, and every module imported costs start-up)

# No module-level imports beyond what `nearmetal run` already loads: profiles are read on
# its hot path; probing (subprocess, re) happens only on a discovery cache miss.


def run_text(argv, timeout=20):
    """stdout+stderr of a probe command, '' when it cannot run (discovery never fails on it)."""
    import subprocess

    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout + out.stderr


class MpiFamily:
    name = ""                  # the registry sets it: the module's name
    title = ""                 # "Open MPI"
    abi_title = ""             # how bind mode names the ABI ("MPICH-ABI": MPICH, Intel MPI, Cray MPICH)
    sonames = ()               # MPI library SONAMEs of this ABI, the family's own first
    wrappers = ()              # compiler wrappers to try, first found wins
    launcher_binaries = ()     # the family's launcher names
    link_libs = ()             # -l names of the MPI library
    launcher = ""              # the launcher backend (launchers/<name>.py) that starts its ranks
    host_packages = ""         # what to install on Debian, for messages
    slurm_pmi = ()             # `srun --mpi=` plugins that wire its ranks, preferred first
    slurm_pmi_failure = ""     # what happens with the wrong plugin (measured), for doctor
    plugin_env = {}            # run-time plugin kind -> the variable pointing its loader at a directory
    wireup_prefixes = ()       # prefixes of the variables its launcher hands each rank (PMI, PMIx, ...)
    mpiio_components = ()      # MPI-IO implementations a run can choose between (MCA io), if any
    default_mpiio = None       # the one a run gets unless told (where it is not ROMIO, hints files go unread)
    # Environment that makes the ranks say which transport they use to each peer (parsed by
    # families/_transport.py); UCX's, for any family built on it.
    transport_env = {"UCX_LOG_LEVEL": "info", "UCX_LOG_FILE": "stderr"}  # UCX logs to stdout by default
    # the ranks' environment that forces the shared-memory transport between ranks of a node
    # (explain's transport ablation): UCX's shared-memory transports (Debian's MPICH is ch4:ucx)
    shared_memory_env = {"UCX_TLS": "self,sm"}
    # What is known to go wrong when its ranks talk over TCP between nodes (said with an
    # isolated network's launch notes), or "".
    tcp_between_nodes_hazard = ""
    # Images: Debian packages of the MPI (those of its parallel I/O stack come from
    # nm-iobench's backend table), its pkg-config module, its library file pattern and its
    # launcher names inside the image.
    image_packages = ()
    pkgconfig = ""
    library_pattern = r"$^"
    image_launchers = ()

    @property
    def image_io_packages(self):
        """Debian packages of the parallel I/O libraries built for this family
        (kernels/csrc/iobench/backends.def: Debian builds some for Open MPI only)."""
        from ..kernels.iobench_backends import image_packages

        return image_packages(self.name)

    # -- discovery (on a cache miss only)
    def identifies_wrapper(self, wrapper):
        return False

    def identifies_launcher(self, launcher):
        return False

    def version(self, launcher):
        return "unknown"

    def pmi_flavours(self, launcher, library):
        return []

    def plugin_dirs(self, launcher, library):
        """Directories of run-time loaded modules the bind model must carry along."""
        return {}

    def cuda_components(self, mpi):
        """([words], [transports]): what in the installation's own files says it was built with
        CUDA, beyond UCX's modules (discovery/mpi_cuda.py): its library linking the CUDA runtime."""
        from ..discovery.mpi_cuda import links_cuda

        cuda = links_cuda(mpi.get("library"))
        return ([f"{self.name} links {', '.join(cuda)}"] if cuda else []), []

    # -- running
    def cross_namespace_env(self, containers, separate_namespaces):
        """Environment for ranks that run in containers (containers=True) and, with
        separate_namespaces, in different namespaces (MPMD components, srun ranks)."""
        return {}

    def prefix_env(self, installation):
        """The launcher's environment for an installation under a prefix (--mpi FAMILY@PREFIX):
        its ranks find its libraries first. A family whose tools must be told where they were
        moved (Open MPI: OPAL_PREFIX) adds that."""
        import os

        libdir = os.path.dirname(installation["library"])
        rest = os.environ.get("LD_LIBRARY_PATH", "")
        return {"LD_LIBRARY_PATH": libdir + (f":{rest}" if rest else "")}

    def shm_in(self, directory):
        """Environment that makes ranks put their shared-memory files in `directory` (for
        containers with a private /dev/shm per rank); None: the family cannot move them."""
        return None

    def hybrid_warning(self, host_version, image_version):
        """A note when the host launcher and the image's MPI are unlikely to wire up."""
        return None

    def library_re(self):
        import re

        return re.compile(self.library_pattern)

    @staticmethod
    def which(name, near=None):
        import shutil

        return (near and shutil.which(name, path=near)) or shutil.which(name)
