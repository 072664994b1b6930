"""Registries (registry.py): names from the package's files without importing a backend, one-line
errors naming the choices, and a backend registered from outside the package (a test, a plugin)
accepted everywhere a name is checked — argparse, the fast run parser, study and I/O study
files — and composed into a launch like the built-in ones."""

import importlib
import shlex
import sys
import textwrap

import pytest

from nearmetal import families, launchers, models, runtimes, schedulers
from nearmetal.errors import NearmetalError
from nearmetal.registry import Registry
from nearmetal.run import RunRequest
from nearmetal.runtimes import RUNTIMES
from nearmetal.runtimes.base import Runtime
from test_unit_compose import FakeHost, launch, machine, req  # noqa: F401  (machine: autouse fixture)

pytestmark = pytest.mark.unit


# -- a registry over a package made here ---------------------------------------------------------

@pytest.fixture
def fake_package(tmp_path, monkeypatch, request):
    """A package `nmregN` with backends alpha, beta, gamma (registers nothing), helpers _private
    and base, a non-Python file; its modules are forgotten afterwards."""
    name = f"nmreg{abs(hash(request.node.nodeid)) % 10**8}"
    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent("""\
        from nearmetal.registry import Registry
        REG = Registry(__name__, "widget", first=("beta",))
    """))
    for backend in ("alpha", "beta"):
        (pkg / f"{backend}.py").write_text(textwrap.dedent(f"""\
            from . import REG
            from .base import Widget

            @REG.register
            class {backend.title()}(Widget):
                pass
        """))
    (pkg / "gamma.py").write_text("X = 1  # forgets to register\n")
    (pkg / "base.py").write_text("class Widget:\n    name = ''\n")
    (pkg / "_private.py").write_text("raise RuntimeError('a helper is never imported by names()')\n")
    (pkg / "notes.txt").write_text("not a backend\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        yield name, importlib.import_module(name)
    finally:
        for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[mod]


def test_names_come_from_files_without_importing_backends(fake_package):
    name, pkg = fake_package
    before = set(sys.modules)
    assert pkg.REG.names() == ("beta", "alpha", "gamma")  # `first` first, then sorted; no _private, base, .txt
    assert {m for m in sys.modules if m.startswith(name + ".")} == set()
    assert set(sys.modules) - before == set()


def test_get_imports_one_backend_on_first_use(fake_package):
    name, pkg = fake_package
    cls = pkg.REG.get("alpha")
    assert cls.name == "alpha" and cls.__name__ == "Alpha"
    assert f"{name}.alpha" in sys.modules and f"{name}.beta" not in sys.modules
    assert pkg.REG.get("alpha") is cls


def test_get_unknown_lists_the_choices(fake_package):
    _, pkg = fake_package
    with pytest.raises(NearmetalError) as e:
        pkg.REG.get("delta")
    assert str(e.value) == "unknown widget 'delta' (choose from: beta, alpha, gamma)"


def test_a_module_that_registers_nothing(fake_package):
    name, pkg = fake_package
    with pytest.raises(NearmetalError) as e:
        pkg.REG.get("gamma")
    assert str(e.value) == f"internal error: {name}.gamma registers no widget"


def test_register_from_outside_and_unregister(fake_package):
    _, pkg = fake_package

    @pkg.REG.register(name="omega")
    class Omega:
        pass

    assert Omega.name == "omega" and pkg.REG.get("omega") is Omega
    assert pkg.REG.names() == ("beta", "alpha", "gamma", "omega")
    pkg.REG.unregister("omega")
    assert pkg.REG.names() == ("beta", "alpha", "gamma")
    with pytest.raises(NearmetalError, match="unknown widget 'omega'"):
        pkg.REG.get("omega")
    pkg.REG.unregister("omega")  # twice: harmless


def test_all_imports_every_backend(fake_package):
    _, pkg = fake_package
    with pytest.raises(NearmetalError, match="registers no widget"):
        pkg.REG.all()  # gamma registers nothing
    assert [c.name for c in (pkg.REG.get("beta"), pkg.REG.get("alpha"))] == ["beta", "alpha"]


def test_first_names_missing_from_the_package_are_left_out(fake_package):
    name, _ = fake_package
    reg = Registry(name, "widget", first=("zeta", "alpha"))
    assert reg.names() == ("alpha", "beta", "gamma")


# -- the real registries ------------------------------------------------------------------------------

@pytest.mark.parametrize("package, kind, first, expected", [
    ("nearmetal.runtimes", "runtime", ("charliecloud", "bwrap", "podman"), ("charliecloud", "bwrap", "podman", "apptainer")),
    ("nearmetal.launchers", "launcher", ("mpirun", "hydra", "srun"), ("mpirun", "hydra", "srun")),
    ("nearmetal.schedulers", "scheduler", ("local", "slurm"), ("local", "slurm")),
    ("nearmetal.families", "MPI", ("openmpi", "mpich"), ("openmpi", "mpich")),
    ("nearmetal.models", "mode", ("native", "hybrid", "bind"), ("native", "hybrid", "bind")),
])
def test_real_registries_list_their_files_without_importing(package, kind, first, expected):
    fresh = Registry(package, kind, first=first)  # nothing registered in it: names() can only read files
    before = set(sys.modules)
    assert fresh.names() == expected
    assert set(sys.modules) == before


def test_real_registries_defaults_and_lookups():
    assert runtimes.names()[0] == runtimes.DEFAULT == "charliecloud"
    assert schedulers.names()[0] == schedulers.DEFAULT == "local"
    assert families.names() == ("openmpi", "mpich")
    assert [c.name for c in RUNTIMES.all()] == list(runtimes.names())
    assert [c.name for c in launchers.LAUNCHERS.all()] == ["mpirun", "hydra", "srun"]
    assert families.get("mpich").launcher == "hydra" and families.get("openmpi").launcher == "mpirun"
    assert families.abi_of("libmpi.so.40") == "openmpi" and families.abi_of("libmpi.so.12") == "mpich"
    assert families.abi_of("libmpich.so.12") == "mpich" and families.abi_of("libfoo.so.1") is None
    assert schedulers.get("slurm").launcher(families.get("openmpi")) == "srun"
    assert schedulers.get("local").launcher(families.get("openmpi")) == "mpirun"
    assert [m.name for m in models.MODELS.all()] == ["native", "hybrid", "bind"]
    assert [models.in_container(n) for n in models.names()] == [False, True, True]
    assert [m.title for m in models.MODELS.all()] == ["Native", "Hybrid mode", "Bind mode"]


@pytest.mark.parametrize("get, name, message", [
    (runtimes.get, "sarus", "unknown runtime 'sarus' (choose from: charliecloud, bwrap, podman, apptainer)"),
    (schedulers.get, "pbs", "unknown scheduler 'pbs' (choose from: local, slurm)"),
    (families.get, "lam", "unknown MPI 'lam' (choose from: openmpi, mpich)"),
    (lambda n: launchers.get(n, {}), "aprun", "unknown launcher 'aprun' (choose from: mpirun, hydra, srun)"),
    (models.MODELS.get, "teleport", "unknown mode 'teleport' (choose from: native, hybrid, bind)"),
    (models.in_container, "_fabric", "unknown mode '_fabric' (choose from: native, hybrid, bind)"),
    (runtimes.get, "base", "unknown runtime 'base' (choose from: charliecloud, bwrap, podman, apptainer)"),
    (runtimes.get, "_podman_storage", "unknown runtime '_podman_storage' (choose from: charliecloud, bwrap, podman, apptainer)"),
])
def test_unknown_backend(get, name, message):
    with pytest.raises(NearmetalError) as e:
        get(name)
    assert str(e.value) == message


# -- a runtime registered from a test ----------------------------------------------------------------

class Dummy(Runtime):
    binary = "dummy-run"

    def path(self):
        return "/opt/dummy/bin/dummy-run"

    def wrap(self, spec):
        env = [f"{k}={v}" for k, v in spec.env.items()]
        return [self.path(), "--image", spec.image.name, *env, "--", *spec.argv]


@pytest.fixture
def dummy_runtime():
    RUNTIMES.register(name="dummy")(Dummy)
    try:
        yield Dummy
    finally:
        RUNTIMES.unregister("dummy")


def test_dummy_not_known_without_registration():
    from nearmetal.cli import fast_parse_run

    assert "dummy" not in runtimes.names()
    assert fast_parse_run(["--runtime", "dummy", "--", "p"]) is None


def test_dummy_runtime_is_listed(dummy_runtime):
    assert runtimes.names() == ("charliecloud", "bwrap", "podman", "apptainer", "dummy")
    assert runtimes.get("dummy").name == "dummy"


def test_dummy_runtime_accepted_by_argparse(dummy_runtime):
    from nearmetal.cli_parser import build_parser, component_parser

    args = build_parser("run").parse_args(["run", "--runtime", "dummy", "--mode", "hybrid", "--", "p"])
    assert args.runtime == "dummy"
    assert component_parser().parse_args(["--runtime", "dummy"]).runtime == "dummy"
    args = build_parser("bench").parse_args(["bench", "mpi-info", "--runtime=dummy"])
    assert args.runtime == "dummy"


def test_dummy_runtime_accepted_by_the_fast_parser(dummy_runtime):
    from nearmetal.cli import fast_parse_run

    args = fast_parse_run(["--runtime=dummy", "--mode", "bind", "--", "p"])
    assert args is not None and args.runtime == "dummy" and args.mode == "bind"


STUDY = """\
[study]
name = "dummy-study"

[matrix]
mode = ["native", "hybrid"]
runtime = ["{runtime}"]
mpi = ["openmpi"]

[[benchmark]]
kernel = "latency"
"""


def test_dummy_runtime_in_a_study_file(dummy_runtime):
    from nearmetal.study.plan.study_file import parse
    from nearmetal.study.plan.plan import cells

    cfg = parse(STUDY.format(runtime="dummy"))
    assert cfg.matrix.runtime == ["dummy"]
    assert sorted(c.key for c in cells(cfg)) == ["latency|n=2|t=1|hybrid/dummy/openmpi/default",
                                                 "latency|n=2|t=1|native/openmpi"]


def test_unregistered_runtime_in_a_study_file_names_the_choices():
    from nearmetal.study.plan.study_file import parse

    with pytest.raises(NearmetalError) as e:
        parse(STUDY.format(runtime="dummy"), source="s.toml")
    assert str(e.value).startswith("s.toml: matrix.runtime[0]: ")
    assert "'charliecloud', 'bwrap', 'podman' or 'apptainer'" in str(e.value) and "'dummy'" in str(e.value)


IO_STUDY = """\
[study]
name = "dummy-io"

[io]
grid = [64, 64, 4]
dir = "/tmp/nm-dummy-io"
mode = ["hybrid"]
runtime = ["{runtime}"]

[io.space]
pattern = ["serial"]
library = ["posix"]
"""


def test_dummy_runtime_in_an_io_study_file(dummy_runtime):
    from nearmetal.io.config import parse

    s = parse(IO_STUDY.format(runtime="dummy"))
    assert s.io.runtime == ["dummy"] and s.io.mode == ["hybrid"]


def test_unregistered_runtime_in_an_io_study_file():
    from nearmetal.io.config import parse

    with pytest.raises(NearmetalError) as e:
        parse(IO_STUDY.format(runtime="dummy"), source="io.toml")
    assert str(e.value).startswith("io.toml: io.runtime[0]: ") and "'dummy'" in str(e.value)


def test_dummy_runtime_composes_a_launch(dummy_runtime):
    argv, env, notes = launch(req("hybrid", mpi="openmpi", runtime="dummy"))
    assert argv == ("/usr/bin/mpirun.openmpi -np 2 /opt/dummy/bin/dummy-run --image nm-test OMP_NUM_THREADS=1 "
                    "-- /opt/nearmetal/openmpi/bin/nm-mpi-info")
    assert env == {}  # Runtime.launch_env: nothing by default
    argv, _, _ = launch(req("bind", mpi="mpich", runtime="dummy", scheduler="slurm"))
    assert shlex.split(argv) == ["/usr/bin/srun", "--mpi=pmi2", "--kill-on-bad-exit=1", "-n", "2",
                                 "/opt/dummy/bin/dummy-run", "--image", "nm-test", "LD_LIBRARY_PATH=/nm/host-mpi/lib",
                                 "OMP_NUM_THREADS=1", "UCX_POSIX_USE_PROC_LINK=n",
                                 "UCX_TLS=^cma,tcp", "--", "/opt/nearmetal/mpich/bin/nm-mpi-info"]


# -- a scheduler and a launcher registered from a test -------------------------------------------------

def test_dummy_scheduler_with_its_own_launcher():
    from nearmetal.launchers import LAUNCHERS
    from nearmetal.launchers.base import Launcher
    from nearmetal.schedulers import SCHEDULERS

    # The Scheduler base class: schedulers/__init__.py, formerly schedulers/base.py.
    Scheduler = getattr(schedulers, "Scheduler", None) or importlib.import_module("nearmetal.schedulers.base").Scheduler

    class Flux(Launcher):
        def command(self, r):
            return ["flux", "run", "-n", str(r.ranks), *r.rank_argv], {f"FLUX_{k}": v for k, v in r.env.items()}

    class FluxScheduler(Scheduler):
        one_container_per_rank = True

        def launcher(self, family):
            return "flux"

    LAUNCHERS.register(name="flux")(Flux)
    SCHEDULERS.register(name="flux")(FluxScheduler)
    try:
        assert schedulers.names() == ("local", "slurm", "flux")
        argv, env, _ = launch(req("native", mpi="mpich", scheduler="flux"))
        assert (argv, env) == ("flux run -n 2 /usr/bin/prog -x 1", {"FLUX_OMP_NUM_THREADS": "1"})
        argv, _, _ = launch(req("hybrid", mpi="mpich", scheduler="flux"))  # a container per rank: no --join
        assert argv.startswith("flux run -n 2 /usr/bin/ch-run --set-env=OMP_NUM_THREADS=1 "
                               "--set-env=UCX_POSIX_USE_PROC_LINK=n '--set-env=UCX_TLS=")
        with pytest.raises(NearmetalError) as e:
            launch(req("native", mpi="mpich", scheduler="flux", ranks=1), req("native", ranks=1))
        assert str(e.value) == "the flux launcher cannot start MPMD jobs"
    finally:
        SCHEDULERS.unregister("flux")
        LAUNCHERS.unregister("flux")
    assert schedulers.names() == ("local", "slurm")


def test_every_image_format_that_keeps_an_imported_file_names_a_kind_import_knows():
    """ImageFormat.kept_from is compared with what importer.kind_of says of a source: a kind
    spelt differently would silently never keep the file (a SIF extracted instead of kept)."""
    from nearmetal.image import formats
    from nearmetal.image.importer import KINDS

    kept = {name: formats.get(name).kept_from for name in formats.names()}
    assert kept["sif"] == "SIF"
    assert all(kind is None or kind in KINDS for kind in kept.values()), kept


def test_a_new_kernel_is_its_spec_what_the_analysis_and_report_need_of_it_included():
    """A kernel registered from outside (as a new parser module would) is answered by the
    metric its spec names, called by its words in sentences, and its scaling drawn as its
    spec says: no table elsewhere to edit. Unknown names (a program's benchmark) get nothing."""
    from nearmetal import kernels
    from nearmetal.analysis.answer_text import bench_words
    from nearmetal.analysis.quantities import choose
    from nearmetal.report.kernel_semantics import scales_by_efficiency

    spec = kernels.KernelSpec("halo3d", "nm-halo3d", "osu", "a halo exchange", 2, primary="exchange_s",
                              words="halo exchange", communicates=True)
    kernels.register(spec)
    try:
        assert kernels.traits("halo3d") is spec and bench_words("halo3d", "halo3d", None) == "halo exchange"
        points = [{"benchmark": "halo3d", "kernel": "halo3d", "metric": m, "variant": "native", "values": [v],
                   "higher_is_better": False} for m, v in (("setup_s", 1.0), ("exchange_s", 2.0))]
        chosen = choose(points)
        assert chosen[("halo3d", "exchange_s")]["primary"] and not chosen[("halo3d", "setup_s")]["primary"]
        assert not scales_by_efficiency([{"kernel": "halo3d", "higher_is_better": True}])
        assert scales_by_efficiency([{"kernel": "stream", "higher_is_better": True}])
    finally:
        del kernels.REGISTRY["halo3d"]
    assert kernels.traits("my-app").primary is None and bench_words("my-app", "my-app", None) == "my-app"
    assert kernels.traits("gpu-stream").primary == "triad"  # GPU kernels: parsers/gpu.SPECS, not registered


@pytest.mark.parametrize("shape", ["pairs", "phases", "io"])
def test_a_new_kernels_shape_and_start_up_cost_come_from_its_spec(shape):
    """How a kernel's results are laid out (a rank matrix, phases, an I/O section) and whether
    its answer states a cost per launch are traits of its spec, not of its name."""
    from nearmetal import kernels
    from nearmetal.analysis.per_launch import per_launch
    from nearmetal.report.kernel_semantics import has_phases, is_io, is_pairs

    spec = kernels.KernelSpec("probe2", "nm-probe2", "startup", "a launch probe", shape=shape, per_launch=True)
    kernels.register(spec)
    try:
        point = {"kernel": "probe2", "point": {}}
        assert (is_pairs([point]), has_phases([point]), is_io(point)) == (
            shape == "pairs", shape == "phases", shape == "io")
        launch = {"kernel": "probe2", "unit": "ms", "metric": "to_after_init", "point": {"rank": "max"},
                  "var": [12.0, 12.0], "base": [10.0, 10.0]}
        assert abs(per_launch([launch])["delta_s"] - 0.002) < 1e-9
        assert per_launch([{**launch, "kernel": "latency"}]) is None  # no per-launch cost: not its trait
    finally:
        del kernels.REGISTRY["probe2"]
    plain = {"kernel": "stream", "point": {}}
    assert not (is_pairs([plain]) or has_phases([plain]) or is_io(plain))
    # a program's benchmark: its unitless figures of merit are costs, and its answers name the metric
    assert kernels.traits(kernels.PROGRAM.name).foms and not kernels.traits("imported").foms


# -- an MPI model registered from a test ----------------------------------------------------------------

def _traced(req):
    """A container model of a test's own: the image's program under strace, the image's MPI."""
    from nearmetal.models import ModelPlan

    return ModelPlan(["/usr/bin/strace", "-f", req.program, *req.args], env={"TRACED": "1"},
                     notes=[f"traced: {req.program} under strace"], program=req.program)


def _solo(req):
    """A model without a container: the host's program, started through env(1)."""
    from nearmetal.models import ModelPlan

    return ModelPlan(["/usr/bin/env", req.program, *req.args], program=req.program)


@pytest.fixture
def extra_models():
    from nearmetal.models import MODELS
    from nearmetal.models.base import Model

    class Traced(Model):
        prepare = staticmethod(_traced)

    class Solo(Model):
        in_container = False
        prepare = staticmethod(_solo)

    MODELS.register(name="traced")(Traced)
    MODELS.register(name="solo")(Solo)
    try:
        yield
    finally:
        MODELS.unregister("traced")
        MODELS.unregister("solo")
    assert models.names() == ("native", "hybrid", "bind")


def test_a_model_registered_outside_is_a_mode_everywhere(extra_models, dummy_runtime):
    from nearmetal import choices
    from nearmetal.cli import fast_parse_run
    from nearmetal.cli_parser import build_parser
    from nearmetal.study.plan.plan import cells
    from nearmetal.study.plan.study_file import parse

    assert choices.modes() == ("native", "hybrid", "bind", "traced", "solo")
    assert fast_parse_run(["--mode", "traced", "--", "p"]).mode == "traced"
    assert build_parser("run").parse_args(["run", "--mode", "solo", "--", "p"]).mode == "solo"
    text = STUDY.replace('["native", "hybrid"]', '["solo", "traced"]').format(runtime="dummy")
    cfg = parse(text.replace("[[benchmark]]", '[baseline]\nmode = "solo"\n\n[[benchmark]]'))
    # a model without a container collapses runtime and image, as native does
    assert sorted(c.key for c in cells(cfg)) == ["latency|n=2|t=1|solo/openmpi",
                                                 "latency|n=2|t=1|traced/dummy/openmpi/default"]


def test_a_model_registered_outside_plans_a_launch(extra_models, dummy_runtime):
    from nearmetal.run import plan

    p = plan(RunRequest("/bin/true", ["x"], mode="traced", runtime="dummy", image="nm-test", mpi="openmpi"),
             host=FakeHost())
    assert p.argv[-7:] == ["TRACED=1", "OMP_NUM_THREADS=1", "--", "/usr/bin/strace", "-f", "/bin/true", "x"]
    assert "traced: /bin/true under strace" in p.notes
    p = plan(RunRequest("/bin/true", ["x"], mode="solo", mpi="openmpi"), host=FakeHost())
    assert p.components[0].runtime is None and p.argv[-3:] == ["/usr/bin/env", "/bin/true", "x"]
    with pytest.raises(NearmetalError) as e:
        plan(RunRequest("/bin/true", mode="solo", mpi="openmpi", runtime_args=["--x"]), host=FakeHost())
    assert str(e.value) == "runtime arguments need a container mode (hybrid or bind or traced)"
