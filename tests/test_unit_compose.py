"""Composition, argv for argv: every runtime x launcher x MPI model x scheduler, MPMD, --workdir,
threads, ranks per node, SquashFS and the families' cross-namespace environment — without a
machine (ReFrame's unittests/test_containers.py and test_launchers.py style).

Components are resolved by resolve.resolve() through a FakeHost (synthetic MPI installation
records and images); the MPI models' output (models.ModelPlan) is written by hand, so nothing
here reads an image or an ELF file. compose.compose() then gives the launcher argv and the
launcher's environment delta. The expected argv are written out literally: they document what
nearmetal starts. `$H` stands for $NEARMETAL_HOME (podman's private storage lives there).

The local rows were cross-checked against `nearmetal run --dry-run` on a machine with both MPIs,
ch-run, bwrap, podman and the default image: identical once the image's path and podman
reference, the job tag (nm<pid>), $NEARMETAL_HOME and --allow-run-as-root (root) are
replaced by this file's stand-ins.
"""

import os
import shlex
import shutil
from pathlib import Path

import pytest

from nearmetal.compose import CONTAINER_WORKDIR, compose
from nearmetal.errors import NearmetalError
from nearmetal.image import Image
from nearmetal.models import ModelPlan
from nearmetal.resolve import Host, resolve
from nearmetal.run import RunRequest
from nearmetal.launchers.srun import _plugins as REAL_PLUGINS
from nearmetal.runtimes.base import Mount
from nearmetal.runtimes import RUNTIMES, names as runtime_names

pytestmark = pytest.mark.unit

# -- a machine without a machine ------------------------------------------------------------

# discovery.mpi records (see discovery/mpi_probe.py: probe()).
MPIS = {
    "openmpi": {"family": "openmpi", "version": "4.1.4", "library": "/usr/lib/x86_64-linux-gnu/libmpi.so.40.30.4",
                "soname": "libmpi.so.40", "abi": "openmpi", "compiler": "/usr/bin/mpicc.openmpi",
                "launcher": "/usr/bin/mpirun.openmpi", "pmi": ["pmix"], "plugin_dirs": {}},
    "mpich": {"family": "mpich", "version": "4.0.2", "library": "/usr/lib/x86_64-linux-gnu/libmpich.so.12.3.0",
              "soname": "libmpich.so.12", "abi": "mpich", "compiler": "/usr/bin/mpicc.mpich",
              "launcher": "/usr/bin/mpiexec.hydra", "pmi": ["pmi1", "pmi2"], "plugin_dirs": {}},
}

# Binaries the fake PATH has: the runtimes and Slurm's client.
ON_PATH = {"ch-run", "bwrap", "podman", "apptainer", "srun", "scontrol"}
# What `srun --mpi=list` offers on the fake Slurm.
SLURM_PLUGINS = ["cray_shasta", "none", "pmi2", "pmix", "pmix_v4"]


def make_image(name="nm-test", mpis=("openmpi", "mpich"), sqfs=True, podman=True):
    return Image(name=name, rootfs=Path(f"/img/{name}/rootfs"),
                 sqfs=Path(f"/img/{name}/{name}.sqfs") if sqfs else None,
                 podman_ref=f"localhost/nearmetal-{name}:latest" if podman else None,
                 distro="bookworm", mpis=list(mpis), meta={"mpi": {m: {"version": "4.x"} for m in mpis}})


class FakeHost(Host):
    """resolve.Host with synthetic MPIs and images: nothing on this machine is asked."""

    def __init__(self, mpis=("openmpi", "mpich"), images=None, program_abi=None, image_abi=None):
        self._mpis = {f: MPIS[f] for f in mpis}
        self._images = images or {"nm-test": make_image()}
        self._program_abi, self._image_abi = program_abi, image_abi
        self.asked = []  # (method, argument): what resolve() asked

    def installations(self):
        self.asked.append(("mpis", None))
        return dict(self._mpis)

    def installation(self, family):
        self.asked.append(("mpi", family))
        if family not in self._mpis:
            raise NearmetalError(f"no {family} installation found on this host (found: {', '.join(self._mpis) or 'none'})")
        return self._mpis[family]

    def image(self, spec):
        self.asked.append(("image", spec))
        spec = spec or "nm-test"
        if spec.endswith(".sqfs"):
            return self._images[Path(spec).stem]
        if spec not in self._images:
            raise NearmetalError(f"no image '{spec}': build it with `nearmetal image build ...` or give a path")
        return self._images[spec]

    def program_abi(self, path):
        self.asked.append(("program_abi", path))
        return self._program_abi

    def image_program_abi(self, image, program):
        self.asked.append(("image_program_abi", program))
        return self._image_abi


@pytest.fixture(autouse=True)
def machine(tmp_path, monkeypatch):
    """A fake PATH (runtimes, srun), a fake Slurm, a non-root user, a fresh NEARMETAL_HOME;
    returns that home ($H in the expected argv)."""
    home = tmp_path / "home"
    monkeypatch.setenv("NEARMETAL_HOME", str(home))
    monkeypatch.delenv("NEARMETAL_PODMAN_DRIVER", raising=False)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.setenv("USER", "tester")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(shutil, "which", lambda name, mode=os.F_OK | os.X_OK, path=None:
                        f"/usr/bin/{name}" if name in ON_PATH else None)
    import nearmetal.launchers.srun as srun

    monkeypatch.setattr(srun, "_plugins", lambda: list(SLURM_PLUGINS))
    return home


# -- what the MPI models decide (written by hand) --------------------------------------------

def native_model(family):
    return ModelPlan(["/usr/bin/prog", "-x", "1"], program="/usr/bin/prog")


def hybrid_model(family):
    return ModelPlan([f"/opt/nearmetal/{family}/bin/nm-mpi-info"], notes=[f"hybrid: container {family}"])


def bind_model(family):
    """What models/bind.py hands over: the staged host MPI mounted at /nm/host-mpi, preferred."""
    return ModelPlan([f"/opt/nearmetal/{family}/bin/nm-mpi-info"], env={"LD_LIBRARY_PATH": "/nm/host-mpi/lib"},
                     mounts=[Mount(f"/stage/{family}-k", "/nm/host-mpi")], notes=[f"bind: host {family}"])


MODELS = {"native": native_model, "hybrid": hybrid_model, "bind": bind_model}


def launch(req, *more, host=None, models=None, cores=4, environ=None, tag="nmT"):
    """(argv as one shell-quoted string, env delta, notes) of a composed launch."""
    components = resolve(req, more, host=host or FakeHost())
    if models is None:
        models = [MODELS[c.mode](c.installation["family"]) for c in components]
    argv, env, notes = compose(components, models, cores=cores, environ={} if environ is None else environ, tag=tag)
    return shlex.join(argv), env, notes


def req(mode="native", **kw):
    kw.setdefault("program", "prog")
    if mode != "native":
        kw.setdefault("image", "nm-test")
    return RunRequest(mode=mode, **kw)


def expand(text, home):
    return text.replace("$H", str(home))


# -- every runtime x family x mode x scheduler ----------------------------------------------

# The runtimes' fixed parts, as they wrap the image nm-test (its rootfs /img/nm-test/rootfs).
BWRAP = ("/usr/bin/bwrap --ro-bind /img/nm-test/rootfs / --dev-bind /dev /dev --proc /proc --ro-bind /sys /sys "
         "--bind /tmp /tmp --ro-bind-try /etc/hosts /etc/hosts --die-with-parent")
PODMAN = ("/usr/bin/podman --root $H/podman/root --runroot $H/podman/runroot --storage-driver overlay run --rm "
          "--pull=never --net=host --ipc=host --pid=host --userns=host --env-host --security-opt label=disable -v /tmp:/tmp "
          "--log-driver=none")
PODMAN_ENV = {"CONTAINERS_CONF": "$H/podman/containers.conf"}
CH_ENV = {"USER": "tester"}  # ch-run refuses to start without $USER
OMPI = "/opt/nearmetal/openmpi/bin/nm-mpi-info"
MPICH = "/opt/nearmetal/mpich/bin/nm-mpi-info"
# The families' cross-namespace environment (families/*.py): MPICH's UCX in any container,
# plus UCX_TLS when ranks are in separate namespaces (a container per rank under Slurm;
# shlex.join quotes its caret);
# Open MPI's vader BTL without CMA in separate namespaces only.
UCX_LINK, UCX_TLS = "UCX_POSIX_USE_PROC_LINK=n", "UCX_TLS=^cma,tcp"
VADER = "OMPI_MCA_btl_vader_single_copy_mechanism=none"
# Apptainer: one `apptainer exec` per rank, /tmp and /dev/shm bound; the ranks' variables go in as
# APPTAINERENV_* set by the launcher per rank (an --env value would be split at commas). As a
# non-root user (this fixture) each rank is in its own user namespace: the cross-namespace settings.
APPT = "/usr/bin/apptainer --quiet exec --bind /tmp --bind /dev/shm"
A_VADER = "APPTAINERENV_OMPI_MCA_btl_vader_single_copy_mechanism"
A_UCX_LINK, A_UCX_TLS, A_LDP = ("APPTAINERENV_UCX_POSIX_USE_PROC_LINK", "APPTAINERENV_UCX_TLS",
                               "APPTAINERENV_LD_LIBRARY_PATH")

# (scheduler, family, mode, runtime): (launcher argv, environment delta). -n 2, 4 cores,
# one thread; locally the ranks of a node share one ch-run container (--join: Open MPI's
# mpirun tells ch-run the count itself; hydra does not, so --join-ct); srun starts one per rank.
MATRIX = {
    # --- local: mpirun (Open MPI), mpiexec.hydra (MPICH)
    ("local", "openmpi", "native", None):
        ("/usr/bin/mpirun.openmpi -np 2 -x OMP_NUM_THREADS=1 /usr/bin/prog -x 1", {}),
    ("local", "openmpi", "hybrid", "charliecloud"):
        ("/usr/bin/mpirun.openmpi -np 2 /usr/bin/ch-run --join-ct=2 --join-tag=nmT --set-env=OMP_NUM_THREADS=1 "
         f"/img/nm-test/rootfs -- {OMPI}", CH_ENV),
    ("local", "openmpi", "hybrid", "bwrap"):
        (f"/usr/bin/mpirun.openmpi -np 2 {BWRAP} --setenv OMP_NUM_THREADS 1 -- {OMPI}", {}),
    ("local", "openmpi", "hybrid", "podman"):
        (f"/usr/bin/mpirun.openmpi -np 2 {PODMAN} -e OMP_NUM_THREADS=1 localhost/nearmetal-nm-test:latest {OMPI}",
         PODMAN_ENV),
    ("local", "openmpi", "bind", "charliecloud"):
        ("/usr/bin/mpirun.openmpi -np 2 /usr/bin/ch-run --join-ct=2 --join-tag=nmT --bind=/stage/openmpi-k:/nm/host-mpi "
         "--set-env=LD_LIBRARY_PATH=/nm/host-mpi/lib --set-env=OMP_NUM_THREADS=1 "
         f"/img/nm-test/rootfs -- {OMPI}", CH_ENV),
    ("local", "openmpi", "bind", "bwrap"):
        (f"/usr/bin/mpirun.openmpi -np 2 {BWRAP} --ro-bind /stage/openmpi-k /nm/host-mpi "
         f"--setenv LD_LIBRARY_PATH /nm/host-mpi/lib --setenv OMP_NUM_THREADS 1 -- {OMPI}", {}),
    ("local", "openmpi", "bind", "podman"):
        (f"/usr/bin/mpirun.openmpi -np 2 {PODMAN} -v /stage/openmpi-k:/nm/host-mpi:ro "
         f"-e LD_LIBRARY_PATH=/nm/host-mpi/lib -e OMP_NUM_THREADS=1 localhost/nearmetal-nm-test:latest {OMPI}",
         PODMAN_ENV),
    ("local", "mpich", "native", None):
        ("/usr/bin/mpiexec.hydra -n 2 -genv OMP_NUM_THREADS 1 /usr/bin/prog -x 1", {}),
    ("local", "mpich", "hybrid", "charliecloud"):
        ("/usr/bin/mpiexec.hydra -n 2 /usr/bin/ch-run --join-ct=2 --join-tag=nmT --set-env=OMP_NUM_THREADS=1 "
         f"--set-env={UCX_LINK} /img/nm-test/rootfs -- {MPICH}", CH_ENV),
    ("local", "mpich", "hybrid", "bwrap"):
        (f"/usr/bin/mpiexec.hydra -n 2 {BWRAP} --setenv OMP_NUM_THREADS 1 --setenv UCX_POSIX_USE_PROC_LINK n "
         f"-- {MPICH}", {}),
    ("local", "mpich", "hybrid", "podman"):  # podman drops hydra's PMI fd: -pmi-port
        (f"/usr/bin/mpiexec.hydra -n 2 -pmi-port {PODMAN} -e OMP_NUM_THREADS=1 -e {UCX_LINK} "
         f"localhost/nearmetal-nm-test:latest {MPICH}", PODMAN_ENV),
    ("local", "mpich", "bind", "charliecloud"):
        ("/usr/bin/mpiexec.hydra -n 2 /usr/bin/ch-run --join-ct=2 --join-tag=nmT --bind=/stage/mpich-k:/nm/host-mpi "
         f"--set-env=LD_LIBRARY_PATH=/nm/host-mpi/lib --set-env=OMP_NUM_THREADS=1 --set-env={UCX_LINK} "
         f"/img/nm-test/rootfs -- {MPICH}", CH_ENV),
    ("local", "mpich", "bind", "bwrap"):
        (f"/usr/bin/mpiexec.hydra -n 2 {BWRAP} --ro-bind /stage/mpich-k /nm/host-mpi "
         "--setenv LD_LIBRARY_PATH /nm/host-mpi/lib --setenv OMP_NUM_THREADS 1 --setenv UCX_POSIX_USE_PROC_LINK n "
         f"-- {MPICH}", {}),
    ("local", "mpich", "bind", "podman"):
        (f"/usr/bin/mpiexec.hydra -n 2 -pmi-port {PODMAN} -v /stage/mpich-k:/nm/host-mpi:ro "
         f"-e LD_LIBRARY_PATH=/nm/host-mpi/lib -e OMP_NUM_THREADS=1 -e {UCX_LINK} "
         f"localhost/nearmetal-nm-test:latest {MPICH}", PODMAN_ENV),
    # --- slurm: srun with the family's PMI plugin (Open MPI: pmix, MPICH: pmi2); the ranks'
    # environment natively through srun's own (the delta), a container per rank
    ("slurm", "openmpi", "native", None):
        ("/usr/bin/srun --mpi=pmix --kill-on-bad-exit=1 -n 2 /usr/bin/prog -x 1", {"OMP_NUM_THREADS": "1"}),
    ("slurm", "openmpi", "hybrid", "charliecloud"):
        ("/usr/bin/srun --mpi=pmix --kill-on-bad-exit=1 -n 2 /usr/bin/ch-run --set-env=OMP_NUM_THREADS=1 "
         f"--set-env={VADER} /img/nm-test/rootfs -- {OMPI}", CH_ENV),
    ("slurm", "openmpi", "hybrid", "bwrap"):
        (f"/usr/bin/srun --mpi=pmix --kill-on-bad-exit=1 -n 2 {BWRAP} --setenv OMP_NUM_THREADS 1 "
         f"--setenv OMPI_MCA_btl_vader_single_copy_mechanism none -- {OMPI}", {}),
    ("slurm", "openmpi", "hybrid", "podman"):
        (f"/usr/bin/srun --mpi=pmix --kill-on-bad-exit=1 -n 2 {PODMAN} -e OMP_NUM_THREADS=1 -e {VADER} "
         f"localhost/nearmetal-nm-test:latest {OMPI}", PODMAN_ENV),
    ("slurm", "openmpi", "bind", "charliecloud"):
        ("/usr/bin/srun --mpi=pmix --kill-on-bad-exit=1 -n 2 /usr/bin/ch-run --bind=/stage/openmpi-k:/nm/host-mpi "
         f"--set-env=LD_LIBRARY_PATH=/nm/host-mpi/lib --set-env=OMP_NUM_THREADS=1 --set-env={VADER} "
         f"/img/nm-test/rootfs -- {OMPI}", CH_ENV),
    ("slurm", "openmpi", "bind", "bwrap"):
        (f"/usr/bin/srun --mpi=pmix --kill-on-bad-exit=1 -n 2 {BWRAP} --ro-bind /stage/openmpi-k /nm/host-mpi "
         "--setenv LD_LIBRARY_PATH /nm/host-mpi/lib --setenv OMP_NUM_THREADS 1 "
         f"--setenv OMPI_MCA_btl_vader_single_copy_mechanism none -- {OMPI}", {}),
    ("slurm", "openmpi", "bind", "podman"):
        (f"/usr/bin/srun --mpi=pmix --kill-on-bad-exit=1 -n 2 {PODMAN} -v /stage/openmpi-k:/nm/host-mpi:ro "
         f"-e LD_LIBRARY_PATH=/nm/host-mpi/lib -e OMP_NUM_THREADS=1 -e {VADER} "
         f"localhost/nearmetal-nm-test:latest {OMPI}", PODMAN_ENV),
    ("slurm", "mpich", "native", None):
        ("/usr/bin/srun --mpi=pmi2 --kill-on-bad-exit=1 -n 2 /usr/bin/prog -x 1", {"OMP_NUM_THREADS": "1"}),
    ("slurm", "mpich", "hybrid", "charliecloud"):
        ("/usr/bin/srun --mpi=pmi2 --kill-on-bad-exit=1 -n 2 /usr/bin/ch-run --set-env=OMP_NUM_THREADS=1 "
         f"--set-env={UCX_LINK} '--set-env={UCX_TLS}' /img/nm-test/rootfs -- {MPICH}", CH_ENV),
    ("slurm", "mpich", "hybrid", "bwrap"):
        (f"/usr/bin/srun --mpi=pmi2 --kill-on-bad-exit=1 -n 2 {BWRAP} --setenv OMP_NUM_THREADS 1 "
         f"--setenv UCX_POSIX_USE_PROC_LINK n --setenv UCX_TLS '^cma,tcp' -- {MPICH}", {}),
    ("slurm", "mpich", "hybrid", "podman"):
        (f"/usr/bin/srun --mpi=pmi2 --kill-on-bad-exit=1 -n 2 {PODMAN} -e OMP_NUM_THREADS=1 -e {UCX_LINK} "
         f"-e '{UCX_TLS}' localhost/nearmetal-nm-test:latest {MPICH}", PODMAN_ENV),
    ("slurm", "mpich", "bind", "charliecloud"):
        ("/usr/bin/srun --mpi=pmi2 --kill-on-bad-exit=1 -n 2 /usr/bin/ch-run --bind=/stage/mpich-k:/nm/host-mpi "
         f"--set-env=LD_LIBRARY_PATH=/nm/host-mpi/lib --set-env=OMP_NUM_THREADS=1 --set-env={UCX_LINK} "
         f"'--set-env={UCX_TLS}' /img/nm-test/rootfs -- {MPICH}", CH_ENV),
    ("slurm", "mpich", "bind", "bwrap"):
        (f"/usr/bin/srun --mpi=pmi2 --kill-on-bad-exit=1 -n 2 {BWRAP} --ro-bind /stage/mpich-k /nm/host-mpi "
         "--setenv LD_LIBRARY_PATH /nm/host-mpi/lib --setenv OMP_NUM_THREADS 1 --setenv UCX_POSIX_USE_PROC_LINK n "
         f"--setenv UCX_TLS '^cma,tcp' -- {MPICH}", {}),
    ("slurm", "mpich", "bind", "podman"):
        (f"/usr/bin/srun --mpi=pmi2 --kill-on-bad-exit=1 -n 2 {PODMAN} -v /stage/mpich-k:/nm/host-mpi:ro "
         f"-e LD_LIBRARY_PATH=/nm/host-mpi/lib -e OMP_NUM_THREADS=1 -e {UCX_LINK} -e '{UCX_TLS}' "
         f"localhost/nearmetal-nm-test:latest {MPICH}", PODMAN_ENV),
    # --- apptainer
    ("local", "openmpi", "hybrid", "apptainer"):
        (f"/usr/bin/mpirun.openmpi -np 2 -x APPTAINERENV_OMP_NUM_THREADS=1 -x {A_VADER}=none "
         f"{APPT} /img/nm-test/rootfs {OMPI}", {}),
    ("local", "openmpi", "bind", "apptainer"):
        (f"/usr/bin/mpirun.openmpi -np 2 -x {A_LDP}=/nm/host-mpi/lib -x APPTAINERENV_OMP_NUM_THREADS=1 "
         f"-x {A_VADER}=none {APPT} --bind /stage/openmpi-k:/nm/host-mpi:ro /img/nm-test/rootfs {OMPI}", {}),
    ("local", "mpich", "hybrid", "apptainer"):
        (f"/usr/bin/mpiexec.hydra -n 2 -genv APPTAINERENV_OMP_NUM_THREADS 1 -genv {A_UCX_LINK} n "
         f"-genv {A_UCX_TLS} '^cma,tcp' {APPT} /img/nm-test/rootfs {MPICH}", {}),
    ("local", "mpich", "bind", "apptainer"):
        (f"/usr/bin/mpiexec.hydra -n 2 -genv {A_LDP} /nm/host-mpi/lib -genv APPTAINERENV_OMP_NUM_THREADS 1 "
         f"-genv {A_UCX_LINK} n -genv {A_UCX_TLS} '^cma,tcp' "
         f"{APPT} --bind /stage/mpich-k:/nm/host-mpi:ro /img/nm-test/rootfs {MPICH}", {}),
    ("slurm", "openmpi", "hybrid", "apptainer"):
        (f"/usr/bin/srun --mpi=pmix --kill-on-bad-exit=1 -n 2 {APPT} /img/nm-test/rootfs {OMPI}",
         {"APPTAINERENV_OMP_NUM_THREADS": "1", A_VADER: "none"}),
    ("slurm", "openmpi", "bind", "apptainer"):
        (f"/usr/bin/srun --mpi=pmix --kill-on-bad-exit=1 -n 2 {APPT} --bind /stage/openmpi-k:/nm/host-mpi:ro "
         f"/img/nm-test/rootfs {OMPI}",
         {A_LDP: "/nm/host-mpi/lib", "APPTAINERENV_OMP_NUM_THREADS": "1", A_VADER: "none"}),
    ("slurm", "mpich", "hybrid", "apptainer"):
        (f"/usr/bin/srun --mpi=pmi2 --kill-on-bad-exit=1 -n 2 {APPT} /img/nm-test/rootfs {MPICH}",
         {"APPTAINERENV_OMP_NUM_THREADS": "1", A_UCX_LINK: "n", A_UCX_TLS: "^cma,tcp"}),
    ("slurm", "mpich", "bind", "apptainer"):
        (f"/usr/bin/srun --mpi=pmi2 --kill-on-bad-exit=1 -n 2 {APPT} --bind /stage/mpich-k:/nm/host-mpi:ro "
         f"/img/nm-test/rootfs {MPICH}",
         {A_LDP: "/nm/host-mpi/lib", "APPTAINERENV_OMP_NUM_THREADS": "1", A_UCX_LINK: "n",
          A_UCX_TLS: "^cma,tcp"}),
}


def test_matrix_is_complete():
    from nearmetal import runtimes, schedulers
    from nearmetal.families import names as families

    want = {(s, f, m, r) for s in schedulers.names() for f in families() for m in ("native", "hybrid", "bind")
            for r in ((None,) if m == "native" else runtimes.names())}
    assert set(MATRIX) == want


@pytest.mark.parametrize("scheduler, family, mode, runtime", sorted(MATRIX, key=str),
                         ids=["-".join(str(x) for x in k) for k in sorted(MATRIX, key=str)])
def test_matrix(machine, scheduler, family, mode, runtime):
    argv, env = MATRIX[(scheduler, family, mode, runtime)]
    r = req(mode, runtime=runtime, mpi=family, scheduler=scheduler)
    got, delta, notes = launch(r)
    assert got == expand(argv, machine)
    assert delta == {k: expand(v, machine) for k, v in env.items()}
    expected = {"native": [], "hybrid": [f"hybrid: container {family}"], "bind": [f"bind: host {family}"]}[mode]
    if mode == "bind" and runtime == "charliecloud":  # ch-run cannot bind the staged MPI read-only: said so
        expected = expected + [notes[-1]]
        assert notes[-1].startswith("charliecloud: /nm/host-mpi bound read-write"), notes
    assert notes == expected


# -- MPMD: components sharing one MPI_COMM_WORLD ---------------------------------------------

def test_mpmd_hydra_three_components_each_with_its_own_env(machine):
    """hydra: one block per component (-n, -env per block); -pmi-port once, for the whole job,
    because one component runs in podman; tags nmT, nmTc1, nmTc2; every component is in its
    own namespace, so MPICH's UCX_TLS is set everywhere; component 3 (2 threads on 4 ranks x
    4 cores) does not spin-wait."""
    argv, env, notes = launch(req("hybrid", mpi="mpich", runtime="podman", env={"A": "1"}),
                              req("native", ranks=1, env={"B": "2"}),
                              req("bind", ranks=1, runtime="bwrap", threads=2))
    assert argv == expand(
        f"/usr/bin/mpiexec.hydra -pmi-port -n 2 {PODMAN} -e OMP_NUM_THREADS=1 -e {UCX_LINK} -e '{UCX_TLS}' -e A=1 "
        f"localhost/nearmetal-nm-test:latest {MPICH} "
        ": -n 1 -env OMP_NUM_THREADS 1 -env UCX_POSIX_USE_PROC_LINK n -env UCX_TLS '^cma,tcp' "
        "-env B 2 /usr/bin/prog -x 1 "
        f": -n 1 {BWRAP} --ro-bind /stage/mpich-k /nm/host-mpi --setenv LD_LIBRARY_PATH /nm/host-mpi/lib "
        "--setenv OMP_NUM_THREADS 2 --setenv OMP_WAIT_POLICY passive --setenv UCX_POSIX_USE_PROC_LINK n "
        f"--setenv UCX_TLS '^cma,tcp' -- {MPICH}", machine)
    assert env == expand_env(PODMAN_ENV, machine)
    assert notes == ["hybrid: container mpich", "bind: host mpich", "MPMD: 3 components, 4 ranks in one MPI_COMM_WORLD"]


def test_mpmd_mpirun_containers(machine):
    """mpirun: app contexts separated by ':'; container components carry their environment
    inside the container (no -x); Open MPI's vader BTL without CMA across namespaces."""
    argv, env, notes = launch(req("hybrid", mpi="openmpi"), req("bind", ranks=1, runtime="bwrap"))
    assert argv == (
        "/usr/bin/mpirun.openmpi -np 2 /usr/bin/ch-run --join-ct=2 --join-tag=nmT --set-env=OMP_NUM_THREADS=1 "
        f"--set-env={VADER} /img/nm-test/rootfs -- {OMPI} "
        f": -np 1 {BWRAP} --ro-bind /stage/openmpi-k /nm/host-mpi --setenv LD_LIBRARY_PATH /nm/host-mpi/lib "
        f"--setenv OMP_NUM_THREADS 1 --setenv OMPI_MCA_btl_vader_single_copy_mechanism none -- {OMPI}")
    assert env == CH_ENV
    assert notes[-1] == "MPMD: 2 components, 3 ranks in one MPI_COMM_WORLD"


def test_mpmd_mpirun_native_component_gets_its_own_environment(machine):
    """Open MPI 4.1.4 measured: `mpirun -x A=1 -np 1 a : -np 1 b` sets A for a only, and
    `-np 1 -x A=1 a : -np 1 -x A=2 b` gives each its own. So every app context needs its
    own -x: component 2 here must get OMP_NUM_THREADS=4 and FOO=2, component 1 neither."""
    argv, _, _ = launch(req("native", mpi="openmpi", ranks=1),
                        req("native", ranks=1, threads=4, env={"FOO": "2"}), cores=8)
    first, second = argv.split(" : ")
    assert "-x OMP_NUM_THREADS=1" in first and "FOO" not in first and "OMP_NUM_THREADS=4" not in first
    assert "-x OMP_NUM_THREADS=4" in second and "-x FOO=2" in second


def test_mpmd_charliecloud_join_count_is_the_components_own():
    argv, _, _ = launch(req("hybrid", mpi="openmpi"), req("native", ranks=1))
    first = argv.split(" : ")[0]
    assert "--join-ct=2" in first


def test_mpmd_srun_heterogeneous_step(machine):
    """srun: one heterogeneous step, ':' between components, the ranks' environment through
    srun's own (first component wins a name both set)."""
    argv, env, notes = launch(req("native", mpi="mpich", scheduler="slurm", ranks=1), req("bind", ranks=2))
    assert argv == ("/usr/bin/srun --mpi=pmi2 --kill-on-bad-exit=1 -n 1 /usr/bin/prog -x 1 "
                    ": -n 2 /usr/bin/ch-run --bind=/stage/mpich-k:/nm/host-mpi "
                    f"--set-env=LD_LIBRARY_PATH=/nm/host-mpi/lib --set-env=OMP_NUM_THREADS=1 --set-env={UCX_LINK} "
                    f"'--set-env={UCX_TLS}' /img/nm-test/rootfs -- {MPICH}")
    assert env == {"USER": "tester", "OMP_NUM_THREADS": "1", "UCX_POSIX_USE_PROC_LINK": "n",
                   "UCX_TLS": "^cma,tcp"}
    assert notes[0] == "bind: host mpich" and notes[-1] == "MPMD: 2 components, 3 ranks in one MPI_COMM_WORLD"
    assert len(notes) == 3 and notes[1].startswith("charliecloud: /nm/host-mpi bound read-write"), notes


def test_mpmd_srun_per_component_placement(machine):
    argv, _, _ = launch(req("native", mpi="openmpi", scheduler="slurm", ranks=1, ranks_per_node=1),
                        req("hybrid", ranks=2, threads=2))
    assert argv == ("/usr/bin/srun --mpi=pmix --kill-on-bad-exit=1 -n 1 --ntasks-per-node=1 /usr/bin/prog -x 1 "
                    ": -n 2 --cpus-per-task=2 /usr/bin/ch-run --set-env=OMP_NUM_THREADS=2 "
                    f"--set-env=OMP_WAIT_POLICY=passive --set-env={VADER} /img/nm-test/rootfs -- {OMPI}")


def test_mpmd_tags_are_unique_per_component():
    argv, _, _ = launch(req("hybrid", mpi="mpich"), req("hybrid", ranks=2), req("bind", ranks=3))
    assert [t for t in shlex.split(argv) if t.startswith("--join-tag=")] == [
        "--join-tag=nmT", "--join-tag=nmTc1", "--join-tag=nmTc2"]


# -- --workdir: the launcher starts there natively; containers get it at /nm/work --------------

WORKDIR = {
    ("local", "openmpi", "hybrid", "charliecloud"):
        ("/usr/bin/mpirun.openmpi -np 2 /usr/bin/ch-run --join-ct=2 --join-tag=nmT --bind=/scratch/w:/nm/work "
         f"--set-env=PWD=/nm/work --set-env=OMP_NUM_THREADS=1 --cd=/nm/work /img/nm-test/rootfs -- {OMPI}"),
    ("local", "mpich", "bind", "bwrap"):
        (f"/usr/bin/mpiexec.hydra -n 2 {BWRAP} --ro-bind /stage/mpich-k /nm/host-mpi --bind /scratch/w /nm/work "
         "--setenv LD_LIBRARY_PATH /nm/host-mpi/lib --setenv PWD /nm/work --setenv OMP_NUM_THREADS 1 "
         f"--setenv UCX_POSIX_USE_PROC_LINK n --chdir /nm/work -- {MPICH}"),
    ("local", "mpich", "hybrid", "podman"):
        (f"/usr/bin/mpiexec.hydra -n 2 -pmi-port {PODMAN} -v /scratch/w:/nm/work:rw -e PWD=/nm/work "
         f"-e OMP_NUM_THREADS=1 -e {UCX_LINK} --workdir /nm/work localhost/nearmetal-nm-test:latest {MPICH}"),
    ("local", "openmpi", "native", None):  # the launcher starts in it (Plan.cwd): nothing in the argv
        "/usr/bin/mpirun.openmpi -np 2 -x OMP_NUM_THREADS=1 /usr/bin/prog -x 1",
    ("slurm", "openmpi", "hybrid", "charliecloud"):
        ("/usr/bin/srun --mpi=pmix --kill-on-bad-exit=1 --chdir=/scratch/w -n 2 /usr/bin/ch-run "
         f"--bind=/scratch/w:/nm/work --set-env=PWD=/nm/work --set-env=OMP_NUM_THREADS=1 --set-env={VADER} "
         f"--cd=/nm/work /img/nm-test/rootfs -- {OMPI}"),
    ("slurm", "mpich", "native", None):
        "/usr/bin/srun --mpi=pmi2 --kill-on-bad-exit=1 --chdir=/scratch/w -n 2 /usr/bin/prog -x 1",
}


@pytest.mark.parametrize("key", list(WORKDIR), ids=["-".join(str(x) for x in k) for k in WORKDIR])
def test_workdir(machine, key):
    scheduler, family, mode, runtime = key
    argv, _, notes = launch(req(mode, runtime=runtime, mpi=family, scheduler=scheduler, workdir="/scratch/w"))
    assert argv == expand(WORKDIR[key], machine)
    note = "containers: /scratch/w mounted read-write at /nm/work, ranks start there"
    assert (note in notes) == (mode != "native")
    assert CONTAINER_WORKDIR == "/nm/work"


def test_workdir_mpmd_note_once_and_every_container_mounts_it():
    argv, _, notes = launch(req("hybrid", mpi="openmpi", workdir="/w"), req("native", ranks=1, workdir="/w"),
                            req("bind", ranks=1, runtime="bwrap", workdir="/w"))
    assert argv.count("/w:/nm/work") == 1 and argv.count("--bind /w /nm/work") == 1
    assert notes.count("containers: /w mounted read-write at /nm/work, ranks start there") == 1


# -- threads, oversubscription, placement ------------------------------------------------------

@pytest.mark.parametrize("family, scheduler, ranks, threads, cores, expected", [
    # more threads than cores: passive OpenMP waiting; mpirun must be told it may oversubscribe
    ("openmpi", "local", 3, 2, 4, "/usr/bin/mpirun.openmpi -np 3 --oversubscribe --bind-to none "
                                  "-x OMP_NUM_THREADS=2 -x OMP_WAIT_POLICY=passive /usr/bin/prog -x 1"),
    ("openmpi", "local", 2, 2, 8, "/usr/bin/mpirun.openmpi -np 2 --bind-to none -x OMP_NUM_THREADS=2 "
                                  "/usr/bin/prog -x 1"),
    ("openmpi", "local", 5, 1, 4, "/usr/bin/mpirun.openmpi -np 5 --oversubscribe -x OMP_NUM_THREADS=1 "
                                  "-x OMP_WAIT_POLICY=passive /usr/bin/prog -x 1"),
    ("openmpi", "local", 4, 1, 4, "/usr/bin/mpirun.openmpi -np 4 -x OMP_NUM_THREADS=1 /usr/bin/prog -x 1"),
    ("mpich", "local", 3, 2, 4, "/usr/bin/mpiexec.hydra -n 3 -genv OMP_NUM_THREADS 2 -genv OMP_WAIT_POLICY passive "
                                "/usr/bin/prog -x 1"),
    ("mpich", "local", 2, 2, 4, "/usr/bin/mpiexec.hydra -n 2 -genv OMP_NUM_THREADS 2 /usr/bin/prog -x 1"),
    ("openmpi", "slurm", 3, 2, 4, "/usr/bin/srun --mpi=pmix --kill-on-bad-exit=1 -n 3 --cpus-per-task=2 "
                                  "/usr/bin/prog -x 1"),
])
def test_threads_and_oversubscription(family, scheduler, ranks, threads, cores, expected):
    argv, env, _ = launch(req("native", mpi=family, scheduler=scheduler, ranks=ranks, threads=threads), cores=cores)
    assert argv == expected
    if scheduler == "slurm":
        assert env == {"OMP_NUM_THREADS": str(threads), "OMP_WAIT_POLICY": "passive"}


def test_threads_in_a_container_are_set_inside():
    argv, _, _ = launch(req("hybrid", mpi="mpich", ranks=3, threads=2))
    assert argv == ("/usr/bin/mpiexec.hydra -n 3 /usr/bin/ch-run --join-ct=3 --join-tag=nmT "
                    "--set-env=OMP_NUM_THREADS=2 --set-env=OMP_WAIT_POLICY=passive "
                    f"--set-env={UCX_LINK} /img/nm-test/rootfs -- {MPICH}")


@pytest.mark.parametrize("family, scheduler, expected", [
    # ranks per node: the launcher's placement, and the size of each node's ch-run join group
    ("openmpi", "local", "/usr/bin/mpirun.openmpi -np 4 --map-by ppr:2:node /usr/bin/ch-run --join-ct=2 --join-tag=nmT "
                         f"--set-env=OMP_NUM_THREADS=1 /img/nm-test/rootfs -- {OMPI}"),
    ("mpich", "local", "/usr/bin/mpiexec.hydra -n 4 -ppn 2 /usr/bin/ch-run --join-ct=2 --join-tag=nmT "
                       f"--set-env=OMP_NUM_THREADS=1 --set-env={UCX_LINK} /img/nm-test/rootfs -- {MPICH}"),
    ("mpich", "slurm", "/usr/bin/srun --mpi=pmi2 --kill-on-bad-exit=1 -n 4 --ntasks-per-node=2 /usr/bin/ch-run "
                       f"--set-env=OMP_NUM_THREADS=1 --set-env={UCX_LINK} '--set-env={UCX_TLS}' "
                       f"/img/nm-test/rootfs -- {MPICH}"),
])
def test_ranks_per_node(family, scheduler, expected):
    argv, _, _ = launch(req("hybrid", mpi=family, scheduler=scheduler, ranks=4, ranks_per_node=2))
    assert argv == expected


def test_ranks_per_node_native():
    assert launch(req("native", mpi="openmpi", ranks=4, ranks_per_node=2))[0] == (
        "/usr/bin/mpirun.openmpi -np 4 -x OMP_NUM_THREADS=1 --map-by ppr:2:node /usr/bin/prog -x 1")
    assert launch(req("native", mpi="mpich", ranks=4, ranks_per_node=2))[0] == (
        "/usr/bin/mpiexec.hydra -n 4 -ppn 2 -genv OMP_NUM_THREADS 1 /usr/bin/prog -x 1")


def test_one_rank_needs_no_join():
    argv, _, _ = launch(req("hybrid", mpi="mpich", ranks=1))
    assert "--join" not in argv and argv.startswith("/usr/bin/mpiexec.hydra -n 1 /usr/bin/ch-run --set-env=")


# -- images: SquashFS, podman storage ----------------------------------------------------------

def test_squashfs_with_charliecloud():
    argv, _, _ = launch(req("hybrid", mpi="openmpi", image="/img/nm-test/nm-test.sqfs"))
    assert argv == ("/usr/bin/mpirun.openmpi -np 2 /usr/bin/ch-run --join-ct=2 --join-tag=nmT "
                    f"--set-env=OMP_NUM_THREADS=1 /img/nm-test/nm-test.sqfs -- {OMPI}")


@pytest.mark.parametrize("runtime, message", [
    ("bwrap", "bwrap runs directory images only; use the image directory or charliecloud for .sqfs"),
    ("podman", "podman runs images from its own storage, not .sqfs files"),
])
def test_squashfs_refused(runtime, message):
    with pytest.raises(NearmetalError) as e:
        launch(req("hybrid", mpi="openmpi", runtime=runtime, image="/img/nm-test/nm-test.sqfs"))
    assert str(e.value) == message


def test_image_without_squashfs_or_podman_copy():
    host = FakeHost(images={"bare": make_image("bare", sqfs=False, podman=False)})
    with pytest.raises(NearmetalError, match=r"^image 'bare' has no SquashFS file: rebuild with "
                                             r"`nearmetal image build --format squashfs`$"):
        launch(req("hybrid", mpi="openmpi", image="/img/bare/bare.sqfs"), host=host)
    with pytest.raises(NearmetalError, match=r"^image 'bare' is not in nearmetal's podman storage: run "
                                             r"`nearmetal image build --format podman --name bare`$"):
        launch(req("hybrid", mpi="openmpi", runtime="podman", image="bare"), host=host)


def test_podman_storage_driver_from_environment(machine, monkeypatch):
    monkeypatch.setenv("NEARMETAL_PODMAN_DRIVER", "vfs")
    argv, _, _ = launch(req("hybrid", mpi="openmpi", runtime="podman"))
    assert argv.startswith(expand("/usr/bin/mpirun.openmpi -np 2 /usr/bin/podman --root $H/podman/root-vfs "
                                  "--runroot $H/podman/runroot-vfs --storage-driver vfs run --rm", machine))


# -- environment: the user's, the family's, the launcher's -------------------------------------

def test_user_env_natively_through_the_launcher_and_overrides_defaults():
    argv, _, _ = launch(req("native", mpi="openmpi", env={"OMP_NUM_THREADS": "8", "A": "x y"}))
    assert argv == "/usr/bin/mpirun.openmpi -np 2 -x OMP_NUM_THREADS=8 -x 'A=x y' /usr/bin/prog -x 1"
    argv, _, _ = launch(req("native", mpi="mpich", env={"A": "1"}))
    assert argv == "/usr/bin/mpiexec.hydra -n 2 -genv OMP_NUM_THREADS 1 -genv A 1 /usr/bin/prog -x 1"


def test_user_env_in_a_container_is_set_there_and_overrides_the_family():
    argv, _, _ = launch(req("hybrid", mpi="mpich", env={"UCX_TLS": "tcp", "A": "1"}))
    assert argv == ("/usr/bin/mpiexec.hydra -n 2 /usr/bin/ch-run --join-ct=2 --join-tag=nmT "
                    f"--set-env=OMP_NUM_THREADS=1 --set-env={UCX_LINK} --set-env=UCX_TLS=tcp --set-env=A=1 "
                    f"/img/nm-test/rootfs -- {MPICH}")


def test_env_delta_leaves_out_what_the_environment_already_has(machine):
    _, env, _ = launch(req("hybrid", mpi="openmpi"), environ={"USER": "tester"})
    assert env == {}
    _, env, _ = launch(req("hybrid", mpi="openmpi"), environ={"USER": "someone-else"})
    assert env == {"USER": "tester"}
    _, env, _ = launch(req("native", mpi="openmpi", scheduler="slurm"), environ={"OMP_NUM_THREADS": "1"})
    assert env == {}


def test_model_env_comes_first_then_rank_env():
    model = ModelPlan(["/p"], env={"OMP_NUM_THREADS": "99", "M": "1"})
    argv, _, _ = launch(req("hybrid", mpi="openmpi", runtime="bwrap"), models=[model])
    assert argv.endswith("--setenv OMP_NUM_THREADS 1 --setenv M 1 -- /p")  # the request's threads win


def test_runtime_args_go_just_before_the_image(machine):
    assert launch(req("hybrid", mpi="openmpi", runtime_args=["--private-tmp"]))[0] == (
        "/usr/bin/mpirun.openmpi -np 2 /usr/bin/ch-run --join-ct=2 --join-tag=nmT --set-env=OMP_NUM_THREADS=1 "
        f"--private-tmp /img/nm-test/rootfs -- {OMPI}")
    assert launch(req("hybrid", mpi="openmpi", runtime="bwrap", runtime_args=["--unshare-ipc"]))[0] == (
        f"/usr/bin/mpirun.openmpi -np 2 {BWRAP} --setenv OMP_NUM_THREADS 1 --unshare-ipc -- {OMPI}")
    assert launch(req("hybrid", mpi="openmpi", runtime="podman", runtime_args=["--cap-add=SYS_PTRACE"]))[0] == (
        expand(f"/usr/bin/mpirun.openmpi -np 2 {PODMAN} -e OMP_NUM_THREADS=1 --cap-add=SYS_PTRACE "
               f"localhost/nearmetal-nm-test:latest {OMPI}", machine))


@pytest.mark.parametrize("family, containers, separate, expected", [
    ("openmpi", False, False, {}),
    ("openmpi", False, True, {}),
    ("openmpi", True, False, {}),
    ("openmpi", True, True, {"OMPI_MCA_btl_vader_single_copy_mechanism": "none"}),
    ("mpich", False, False, {}),
    ("mpich", False, True, {}),
    ("mpich", True, False, {"UCX_POSIX_USE_PROC_LINK": "n"}),
    ("mpich", True, True, {"UCX_POSIX_USE_PROC_LINK": "n", "UCX_TLS": "^cma,tcp"}),
])
def test_cross_namespace_env_of_the_families(family, containers, separate, expected):
    from nearmetal.families import get

    assert get(family).cross_namespace_env(containers, separate) == expected


def test_native_mpmd_of_mpich_needs_no_ucx_settings():
    argv, _, _ = launch(req("native", mpi="mpich", ranks=1), req("native", ranks=1))
    assert argv == ("/usr/bin/mpiexec.hydra -n 1 -env OMP_NUM_THREADS 1 /usr/bin/prog -x 1 "
                    ": -n 1 -env OMP_NUM_THREADS 1 /usr/bin/prog -x 1")


# -- launchers' own conditions -----------------------------------------------------------------

def test_mpirun_as_root_allows_it(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert launch(req("native", mpi="openmpi"))[0] == (
        "/usr/bin/mpirun.openmpi -np 2 --allow-run-as-root -x OMP_NUM_THREADS=1 /usr/bin/prog -x 1")
    assert launch(req("native", mpi="openmpi", ranks=1), req("native", ranks=1))[0] == (
        "/usr/bin/mpirun.openmpi --allow-run-as-root -np 1 -x OMP_NUM_THREADS=1 /usr/bin/prog -x 1 "
        ": -np 1 -x OMP_NUM_THREADS=1 /usr/bin/prog -x 1")  # each app context its own -x (Open MPI 4.1)


def test_srun_nodes_only_inside_an_allocation(monkeypatch):
    r = req("native", mpi="openmpi", scheduler="slurm", options={"nodes": "2", "partition": "p"})
    assert launch(r)[0] == "/usr/bin/srun --mpi=pmix --kill-on-bad-exit=1 -n 2 /usr/bin/prog -x 1"
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    assert launch(r)[0] == "/usr/bin/srun --mpi=pmix --kill-on-bad-exit=1 --nodes=2 -n 2 /usr/bin/prog -x 1"


@pytest.mark.parametrize("offered, family, expected", [
    (["pmix_v3", "pmi2"], "openmpi", "--mpi=pmix_v3"),   # the profile's order: pmix, pmix_v4, pmix_v3, pmix_v2
    (["pmix_v2", "pmix_v4"], "openmpi", "--mpi=pmix_v4"),
    (["pmi2"], "mpich", "--mpi=pmi2"),
])
def test_srun_picks_the_familys_plugin(monkeypatch, offered, family, expected):
    import nearmetal.launchers.srun as srun

    monkeypatch.setattr(srun, "_plugins", lambda: offered)
    assert launch(req("native", mpi=family, scheduler="slurm"))[0].split()[1] == expected


@pytest.mark.parametrize("offered, family, message", [
    (["pmi2", "none"], "openmpi", "this Slurm offers MPI plugins pmi2, none, but openmpi needs pmix or pmix_v4 or "
                                  "pmix_v3 or pmix_v2; ask the site for it or use --scheduler local"),
    ([], "mpich", "this Slurm offers MPI plugins none, but mpich needs pmi2; ask the site for it or use "
                  "--scheduler local"),
])
def test_srun_without_the_familys_plugin(monkeypatch, offered, family, message):
    import nearmetal.launchers.srun as srun

    monkeypatch.setattr(srun, "_plugins", lambda: offered)
    with pytest.raises(NearmetalError) as e:
        launch(req("native", mpi=family, scheduler="slurm"))
    assert str(e.value) == message


def test_srun_not_installed(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name, mode=0, path=None: None)
    with pytest.raises(NearmetalError, match=r"^--scheduler slurm: srun is not installed \(Debian: slurm-client\)$"):
        launch(req("native", mpi="openmpi", scheduler="slurm"))


def test_no_slurm_reachable(monkeypatch):
    """launchers.srun._plugins asks slurm.info.detect; None (no Slurm answers) is a clear error."""
    import nearmetal.launchers.srun as srun
    import nearmetal.slurm.info as info

    monkeypatch.setattr(srun, "_plugins", REAL_PLUGINS)
    monkeypatch.setattr(info, "detect", lambda env=None: None)
    with pytest.raises(NearmetalError, match=r"^--scheduler slurm: no Slurm reachable \(no SLURM_CONF, or its "
                                             r"controller does not answer `scontrol ping`\)"):
        launch(req("native", mpi="openmpi", scheduler="slurm"))


def expand_env(env, home):
    return {k: expand(v, home) for k, v in env.items()}


# -- apptainer: containment options, the capability fix, SIF files -----------------------------

def test_apptainer_contain_moves_open_mpi_segments_to_tmp_and_gives_mpich_the_hosts_dev():
    argv, _, notes = launch(req("hybrid", runtime="apptainer", mpi="openmpi", runtime_args=["--contain"]))
    assert argv == ("/usr/bin/mpirun.openmpi -np 2 -x APPTAINERENV_OMPI_MCA_btl_vader_backing_directory=/tmp "
                    f"-x APPTAINERENV_OMP_NUM_THREADS=1 -x {A_VADER}=none /usr/bin/apptainer --quiet exec "
                    f"--bind /tmp --contain /img/nm-test/rootfs {OMPI}")
    assert any("private /dev/shm" in n for n in notes)
    argv, _, _ = launch(req("hybrid", runtime="apptainer", mpi="mpich", runtime_args=["-c"]))
    assert " --bind /tmp --bind /dev -c /img/nm-test/rootfs " in argv and "/dev/shm" not in argv


def test_apptainer_cleanenv_forwards_the_launchers_variables(monkeypatch):
    import nearmetal.runtimes._envfwd as envfwd

    monkeypatch.setattr(envfwd, "binary", lambda: "/h/tools/nm-envfwd")
    argv, _, notes = launch(req("bind", runtime="apptainer", mpi="mpich", runtime_args=["--cleanenv"]))
    keep = " ".join(f"--keep={p}" for p in ("OMPI_", "OPAL_", "ORTE_", "PMIX_", "PMI_", "HYDRA_", "MPIR_", "MPICH_",
                                           "UCX_", "SLURM_", "NM_"))
    assert f" /h/tools/nm-envfwd --prefix APPTAINERENV_ {keep} -- /usr/bin/apptainer --quiet exec " in argv
    assert argv.endswith(f"--cleanenv /img/nm-test/rootfs {MPICH}")
    assert any("nm-envfwd" in n for n in notes)


def test_apptainer_as_root_in_a_container_drops_cap_sys_resource(monkeypatch):
    import nearmetal.runtimes.apptainer as appt

    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(appt, "needs_drop_caps", lambda: True)
    monkeypatch.delenv("APPTAINER_DROP_CAPS", raising=False)
    argv, env, notes = launch(req("hybrid", runtime="apptainer", mpi="openmpi"))
    assert env == {"APPTAINER_DROP_CAPS": "CAP_SYS_RESOURCE"}
    assert notes[-1].startswith("apptainer: root without CAP_SYS_RESOURCE")
    # as root without --userns the ranks share namespaces: no cross-namespace settings
    assert A_VADER not in argv
    monkeypatch.setenv("APPTAINER_DROP_CAPS", "CAP_SYS_RESOURCE,CAP_NET_RAW")  # the user's own wins
    assert launch(req("hybrid", runtime="apptainer", mpi="openmpi"))[1] == {}
    assert launch(req("hybrid", runtime="apptainer", mpi="openmpi", runtime_args=["--userns"]))[0].count(A_VADER) == 1


def test_needs_drop_caps_reads_the_permitted_set(tmp_path):
    from nearmetal.runtimes.apptainer import needs_drop_caps

    status = tmp_path / "status"
    status.write_text("Name:\tx\nCapPrm:\t000001fffeffffff\n")
    assert needs_drop_caps(str(status), euid=0) is True
    status.write_text("Name:\tx\nCapPrm:\t000001ffffffffff\n")
    assert needs_drop_caps(str(status), euid=0) is False
    assert needs_drop_caps(str(status), euid=1000) is False


def test_apptainer_runs_the_sif_or_sqfs_the_user_named():
    img = make_image()
    img.sif = Path("/img/nm-test/nm-test.sif")
    host = FakeHost(images={"nm-test": img})
    host.image = lambda spec: img
    argv, _, _ = launch(req("hybrid", runtime="apptainer", mpi="mpich", image="/img/nm-test/nm-test.sif"), host=host)
    assert argv.endswith(f"/img/nm-test/nm-test.sif {MPICH}")
    argv, _, _ = launch(req("hybrid", runtime="apptainer", mpi="mpich", image="/img/nm-test/nm-test.sqfs"), host=host)
    assert argv.endswith(f"/img/nm-test/nm-test.sqfs {MPICH}")
    img.sif = None
    with pytest.raises(NearmetalError, match=r"^image 'nm-test' has no SIF file: build one with "
                                             r"`nearmetal image build --format sif --name nm-test`$"):
        launch(req("hybrid", runtime="apptainer", mpi="mpich", image="/x/nm-test.sif"), host=host)


# -- bind mode's fabric (models/_fabric.py): this machine has none, so the devices are injected --

FABRIC = ["/dev/infiniband/rdma_cm", "/dev/infiniband/uverbs0"]


def fabric_model(family):
    model = bind_model(family)
    model.devices = list(FABRIC)
    return model


@pytest.mark.parametrize("runtime, expect", [
    ("podman", "--device /dev/infiniband/rdma_cm --device /dev/infiniband/uverbs0"),
    ("charliecloud", None), ("bwrap", None), ("apptainer", None)])
def test_fabric_devices_reach_the_ranks(runtime, expect):
    argv, _, _ = launch(req("bind", runtime=runtime, mpi="openmpi"), models=[fabric_model("openmpi")])
    if expect:  # a runtime whose cgroup must allow each device
        assert expect in argv
    else:  # these show the host's /dev: nothing to add
        assert "/dev/infiniband" not in argv


def test_fabric_devices_under_apptainer_contain():
    # Open MPI moves its segments to /tmp under --contain: the minimal /dev gets each device
    argv, _, _ = launch(req("bind", runtime="apptainer", mpi="openmpi", runtime_args=["--contain"]),
                        models=[fabric_model("openmpi")])
    assert "--bind /dev/infiniband/rdma_cm --bind /dev/infiniband/uverbs0" in argv
    # MPICH brings the host's whole /dev in (its shared memory is only in /dev/shm): devices included
    argv, _, _ = launch(req("bind", runtime="apptainer", mpi="mpich", runtime_args=["--contain"]),
                        models=[fabric_model("mpich")])
    assert "--bind /dev " in argv and "/dev/infiniband" not in argv


def test_fabric_device_discovery_and_its_note():
    from nearmetal.models import _fabric as fabric

    listing = {"/dev/infiniband": ["uverbs0", "rdma_cm"]}
    found = fabric.devices(listdir=lambda d: listing[d], is_dir=lambda d: d in listing)
    assert found == ["/dev/infiniband/rdma_cm", "/dev/infiniband/uverbs0"]
    assert fabric.notes(found) == ["bind: the host's fabric devices go to every rank "
                                   "(/dev/infiniband/rdma_cm, /dev/infiniband/uverbs0)"]
    assert fabric.devices(is_dir=lambda d: False) == [] and fabric.notes([]) == []


def test_every_family_points_its_plugin_loaders_at_the_staged_fabric_plugins():
    from nearmetal import families

    for name in families.names():
        env = families.get(name).plugin_env
        assert env.get("ucx") == "UCX_MODULE_DIR" and env.get("libfabric") == "FI_PROVIDER_PATH"


def test_a_finished_job_leaves_no_charliecloud_join_state_behind(tmp_path):
    """A join group that never completed keeps /dev/shm files naming a dead PID; a study's runs
    share the tag, so the next run would join that PID. After each job they are removed, for
    every component's tag (MPMD components have their own)."""
    from nearmetal.compose import component_tag
    from nearmetal.run import Plan
    from nearmetal.runtimes.charliecloud import Charliecloud

    tag = f"nmtest{os.getpid()}"
    names = [f"/dev/shm/ch-run_shm-{component_tag(tag, i)}" for i in (0, 1)]
    names += [f"/dev/shm/sem.ch-run_sem-{component_tag(tag, i)}" for i in (0, 1)]
    for name in names:
        open(name, "w").close()

    class Part:
        runtime = Charliecloud()

    class NativePart:
        runtime = None

    Plan(["mpirun"], {}, [], components=[Part(), Part(), NativePart()], tag=tag).after_job()
    assert [n for n in names if os.path.exists(n)] == []
    Plan(["mpirun"], {}, [], components=[Part()], tag=tag).after_job()  # nothing left: nothing to do


def _rw_model(family):
    model = bind_model(family)
    model.mounts = [Mount(m.source, m.target, readonly=False) for m in model.mounts]
    return model


@pytest.mark.parametrize("runtime", runtime_names())
def test_each_runtime_binds_read_only_what_is_meant_read_only_or_says_it_cannot(runtime):
    """The same bind-mode launch with the staged host MPI mounted read-only and read-write: a
    runtime that can bind read-only makes a different launch of them and adds no note; one that
    cannot (ch-run) makes the same launch and names the writable mount in the run's notes."""
    ro_argv, _, ro_notes = launch(req("bind", runtime=runtime, mpi="openmpi"))
    rw_argv, _, rw_notes = launch(req("bind", runtime=runtime, mpi="openmpi"), models=[_rw_model("openmpi")])
    writable = [n for n in ro_notes if "bound read-write" in n]
    if RUNTIMES.get(runtime).read_only_binds:
        assert ro_argv != rw_argv and not writable
    else:
        assert ro_argv == rw_argv
        assert len(writable) == 1 and writable[0].startswith(f"{runtime}: /nm/host-mpi bound read-write"), ro_notes
        assert all(f"{name}" in writable[0] for name in runtime_names() if RUNTIMES.get(name).read_only_binds)
    assert not [n for n in rw_notes if "bound read-write" in n]  # nothing meant read-only: nothing to say
