"""Open MPI: mpirun (ORTE) with PMIx wire-up; libmpi.so.40."""

import os

from . import FAMILIES, MpiFamily, run_text


@FAMILIES.register
class OpenMpi(MpiFamily):
    title = abi_title = "Open MPI"
    sonames = ("libmpi.so.40",)
    wrappers = ("mpicc.openmpi", "mpicc")
    launcher_binaries = ("mpirun.openmpi", "mpirun", "mpiexec.openmpi")
    link_libs = ("mpi",)
    launcher = "mpirun"
    host_packages = "openmpi-bin libopenmpi-dev"
    slurm_pmi = ("pmix", "pmix_v4", "pmix_v3", "pmix_v2")
    slurm_pmi_failure = "MPI_Init aborts (\"OMPI was not built with SLURM's PMI support\")"
    plugin_env = {"openmpi": "OMPI_MCA_mca_base_component_path", "pmix": "PMIX_MCA_mca_base_component_path",
                  "ucx": "UCX_MODULE_DIR", "libfabric": "FI_PROVIDER_PATH"}
    wireup_prefixes = ("OMPI_", "OPAL_", "ORTE_", "PMIX_")
    mpiio_components = ("romio", "ompio")  # OMPI_MCA_io=romio321 / ompio
    default_mpiio = "ompio"
    # ob1's BML names each peer's BTL at verbosity 1 (and nothing else); pml ucx: UCX's lines
    transport_env = {"OMPI_MCA_btl_base_verbose": "1", "UCX_LOG_LEVEL": "info", "UCX_LOG_FILE": "stderr"}
    shared_memory_env = {"OMPI_MCA_btl": "self,vader"}  # ob1's shared-memory BTL (vader) and self
    image_packages = ("openmpi-bin", "libopenmpi-dev")
    pkgconfig = "ompi-c"
    library_pattern = r"^libmpi\.so\.\d+$"
    image_launchers = ("mpiexec.openmpi", "mpirun.openmpi")

    def prefix_env(self, installation):
        # A moved Open MPI finds its helpers (orted), plugins and help files through OPAL_PREFIX
        return {**super().prefix_env(installation), "OPAL_PREFIX": installation["prefix"]}

    def identifies_wrapper(self, wrapper):
        return "Open MPI" in run_text([wrapper, "-showme:version"])

    def identifies_launcher(self, launcher):
        text = run_text([launcher, "--version"])
        return "Open MPI" in text or "OpenRTE" in text

    def _ompi_info(self, launcher):
        return self.which("ompi_info", os.path.dirname(launcher)) or "ompi_info"

    def version(self, launcher):
        import re

        m = re.search(r"Open MPI v?(\d+\.\d+(?:\.\d+)?)", run_text([self._ompi_info(launcher), "--version"]))
        if not m:
            m = re.search(r"Open MPI\D*(\d+\.\d+\.\d+)", run_text([launcher, "--version"]))
        return m.group(1) if m else "unknown"

    def pmi_flavours(self, launcher, library):
        import re

        names = set(re.findall(r"mca:pmix:([a-z0-9]+):", run_text([self._ompi_info(launcher), "--parsable"])))
        flavours = ["pmix"] if any(n.startswith(("ext", "pmix")) for n in names) else []
        flavours += sorted(n for n in names if n in ("s1", "s2", "flux", "cray"))
        return flavours or ["pmix"]

    def plugin_dirs(self, launcher, library):
        import re

        dirs = {}
        out = run_text([self._ompi_info(launcher), "--path", "pkglibdir", "--parsable"])
        m = re.search(r"path:pkglibdir:(\S+)", out)
        if m and os.path.isdir(m.group(1)):
            dirs["openmpi"] = m.group(1)
        libdir = os.path.dirname(library)
        pmix = [d for d in (os.path.join(libdir, "pmix2", "lib", "pmix"), os.path.join(libdir, "pmix"))
                if os.path.isdir(d)]
        if pmix:
            dirs["pmix"] = pmix[0]
        return dirs

    def cuda_components(self, mpi):
        """Built --with-cuda: the smcuda BTL and libmca_common_cuda, which only such a build
        installs (ompi_info then says mpi_built_with_cuda_support:value:true)."""
        pkglib = (mpi.get("plugin_dirs") or {}).get("openmpi")
        found = [c for c in ("mca_btl_smcuda.so",) if pkglib and os.path.isfile(os.path.join(pkglib, c))]
        libdir = os.path.dirname(mpi.get("library") or "")
        try:
            found += sorted(n for n in os.listdir(libdir) if n.startswith("libmca_common_cuda.so"))[:1] if libdir else []
        except OSError:
            pass
        if not found:
            return [], []
        return [f"Open MPI built with CUDA ({', '.join(found)})"], ["smcuda"]

    def cross_namespace_env(self, containers, separate_namespaces):
        if containers and separate_namespaces:
            # Ranks in different namespaces cannot use CMA single-copy; without this the
            # vader BTL can hang.
            return {"OMPI_MCA_btl_vader_single_copy_mechanism": "none"}
        return {}

    def shm_in(self, directory):
        # vader's segments; its other shared files live in the session directory (in /tmp).
        return {"OMPI_MCA_btl_vader_backing_directory": directory}

    def hybrid_warning(self, host_version, image_version):
        if host_version and image_version and host_version.split(".")[0] != image_version.split(".")[0]:
            # ORTE/PMIx wire-up is only tested within one Open MPI major version.
            return (f"warning: host Open MPI {host_version} launching container Open MPI {image_version}: "
                    f"different major versions rarely wire up; prefer bind mode")
        return None
