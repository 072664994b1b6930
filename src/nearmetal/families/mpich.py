"""MPICH: hydra (mpiexec.hydra) with simple PMI; the MPICH ABI (libmpich.so.12 / libmpi.so.12,
shared by Intel MPI and Cray MPICH)."""

from . import FAMILIES, MpiFamily, run_text


@FAMILIES.register
class Mpich(MpiFamily):
    title = "MPICH"
    abi_title = "MPICH-ABI"
    sonames = ("libmpich.so.12", "libmpi.so.12")
    wrappers = ("mpicc.mpich", "mpicc")
    launcher_binaries = ("mpiexec.hydra", "mpiexec.mpich", "mpiexec")
    link_libs = ("mpich", "mpi")
    launcher = "hydra"
    host_packages = "mpich libmpich-dev"
    slurm_pmi = ("pmi2",)
    slurm_pmi_failure = "each rank starts alone, in an MPI_COMM_WORLD of size 1"
    plugin_env = {"ucx": "UCX_MODULE_DIR", "libfabric": "FI_PROVIDER_PATH"}
    wireup_prefixes = ("PMI_", "HYDRA_", "MPIR_", "MPICH_", "UCX_")
    image_packages = ("mpich", "libmpich-dev")
    pkgconfig = "mpich"
    library_pattern = r"^libmpich\.so\.\d+$"
    image_launchers = ("mpiexec.mpich", "mpiexec.hydra")
    tcp_between_nodes_hazard = (
        "MPICH before 4.2 with UCX can hang in MPI_Finalize over TCP (a rank in the PMI barrier keeps the others "
        "from disconnecting: pmodels/mpich#6596); seen here intermittently, more often with 3 ranks or more: "
        "give runs a time-out")

    def identifies_wrapper(self, wrapper):
        text = run_text([wrapper, "-show"])
        return "-lmpich" in text or "mpich" in text

    def identifies_launcher(self, launcher):
        text = run_text([launcher, "--version"])
        return "HYDRA" in text or "hydra" in text.lower()

    def version(self, launcher):
        import re

        m = re.search(r"Version:\s*(\S+)", run_text([launcher, "-info"]))
        if not m:
            m = re.search(r"MPICH Version:\s*(\S+)", run_text(["mpichversion"]))
        return m.group(1) if m else "unknown"

    def pmi_flavours(self, launcher, library):
        # MPICH speaks simple PMI-1 to hydra; PMI-2 / PMIx client code shows in the binary.
        with open(library, "rb") as f:
            blob = f.read()
        flavours = ["pmi1"]
        if b"PMI2" in blob:
            flavours.append("pmi2")
        if b"PMIx_Init" in blob:
            flavours.append("pmix")
        return flavours

    def cross_namespace_env(self, containers, separate_namespaces):
        if not containers:
            return {}
        # UCX shared memory reaches a peer's segment through /proc/<pid>/fd, which fails
        # across user namespaces (separate ch-run containers, MPMD components, ranks on
        # different Slurm "nodes" of one host); named segments in /dev/shm work everywhere.
        env = {"UCX_POSIX_USE_PROC_LINK": "n"}
        if separate_namespaces:
            # ...and single-copy via process_vm_readv (CMA) is not permitted across them;
            # TCP between namespaces hung intermittently here. Every other transport: shared
            # memory by named segments, and InfiniBand (or CUDA) where the host has it. Said as
            # exclusions: a transport named but missing (rc, ud, dc without InfiniBand) makes
            # every rank print a UCX warning, an excluded one too (so knem, xpmem and cuda_ipc,
            # absent here, are not named; CUDA IPC between containers is untested).
            env["UCX_TLS"] = "^cma,tcp"
        return env
