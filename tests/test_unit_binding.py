"""Binding ranks to cores (launchers/_binding.py): the decision and its reasons, the argv each
launcher gets for it (native and container ranks, MPMD), and a study's `binding` reaching the
launch — written out literally, without a machine (test_unit_compose.py's FakeHost).
The real launches, with the ranks' Cpus_allowed_list, are in test_binding.py."""

import shlex

import pytest

from nearmetal.compose import compose
from nearmetal.launchers._binding import decide, describe
from nearmetal.resolve import resolve

from test_unit_compose import MODELS, FakeHost, req


@pytest.fixture(autouse=True)
def every_runtime_installed(monkeypatch):
    """The argv are written out for every runtime, installed here or not (Apptainer often is not)."""
    import shutil

    which = shutil.which
    runtimes = {"ch-run", "bwrap", "podman", "apptainer"}
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: f"/usr/bin/{name}" if name in runtimes
                        else which(name, *a, **k))

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("asked, launcher, ranks, threads, cores, hosts, used, why", [
    ("core", "mpirun", 2, 1, 2, False, "core", None),
    ("core", "hydra", 2, 1, 2, False, "core", None),
    ("core", "mpirun", 3, 1, 2, False, "none", "3 ranks on 2 cores"),
    ("core", "hydra", 3, 1, 2, False, "none", "3 ranks on 2 cores"),
    ("core", "mpirun", 1, 2, 4, False, "none", "2 threads"),
    ("core", "mpirun", 2, 1, 8, True, "none", "emulated nodes"),
    ("none", "mpirun", 3, 1, 2, False, "none", None),
    ("core", "srun", 2, 1, 2, False, "scheduler", "srun launcher"),
])
def test_the_decision_and_its_reason(asked, launcher, ranks, threads, cores, hosts, used, why):
    d = decide(asked, launcher, ranks, threads, cores, hosts)
    assert d["asked"] == asked and d["used"] == used
    assert (d["reason"] is None) if why is None else why in d["reason"]


def test_nothing_asked_is_nothing_decided():
    assert decide(None, "mpirun", 2, 1, 2) is None
    assert describe(None) == ""


def test_the_sentence_says_what_the_ranks_got_and_why_not_what_was_asked():
    assert describe(decide("core", "hydra", 2, 1, 2)) == "each rank on its own core"
    assert describe(decide("none", "hydra", 2, 1, 2)) == "unbound (the kernel places the ranks)"
    text = describe(decide("core", "mpirun", 3, 1, 2))
    assert text.startswith("unbound (the kernel places the ranks) (asked: core; 3 ranks on 2 cores")


def _argv(*reqs, cores=2):
    components = resolve(reqs[0], reqs[1:], host=FakeHost())
    first = components[0]
    binding = decide(reqs[0].binding, first.scheduler.launcher(first.profile), sum(c.ranks for c in components),
                     max(c.threads for c in components), cores)
    argv, _, notes = compose(components, [MODELS[c.mode](c.installation["family"]) for c in components], cores=cores,
                             environ={}, tag="nmT", binding=binding)
    return shlex.join(argv).replace(" --allow-run-as-root", ""), notes  # as root: test_unit_compose.py's rows


@pytest.mark.parametrize("family, binding, ranks, start", [
    ("openmpi", "core", 2, "/usr/bin/mpirun.openmpi -np 2 --map-by core --bind-to core -x OMP_NUM_THREADS=1 "),
    ("openmpi", "none", 2, "/usr/bin/mpirun.openmpi -np 2 --bind-to none -x OMP_NUM_THREADS=1 "),
    ("openmpi", "core", 3, "/usr/bin/mpirun.openmpi -np 3 --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 "),
    ("mpich", "core", 2, "/usr/bin/mpiexec.hydra -bind-to core -n 2 -genv OMP_NUM_THREADS 1 "),
    ("mpich", "none", 2, "/usr/bin/mpiexec.hydra -bind-to none -n 2 -genv OMP_NUM_THREADS 1 "),
    ("mpich", "core", 3, "/usr/bin/mpiexec.hydra -bind-to none -n 3 -genv OMP_NUM_THREADS 1 "),
])
def test_each_launcher_binds_native_ranks(family, binding, ranks, start):
    argv, notes = _argv(req("native", mpi=family, ranks=ranks, binding=binding))
    assert argv.startswith(start), argv
    assert any("ranks left unbound" in n for n in notes) == (binding == "core" and ranks == 3)


@pytest.mark.parametrize("runtime", ["charliecloud", "bwrap", "podman", "apptainer"])
@pytest.mark.parametrize("family, flags", [("openmpi", "--map-by core --bind-to core"), ("mpich", "-bind-to core")])
def test_container_ranks_are_bound_by_the_host_launcher(runtime, family, flags):
    """Every container mode launches through the host's launcher: the runtime wrapper is what
    it binds, and the container's processes inherit the affinity."""
    for mode in ("hybrid", "bind"):
        argv, _ = _argv(req(mode, mpi=family, runtime=runtime, binding="core"))
        launcher_part = argv.split(" -x ")[0].split(" -genv ")[0]
        assert flags in argv and argv.index(flags) < argv.index("/opt/nearmetal/"), argv
        assert "bind-to" not in argv[len(launcher_part):], argv


def test_mpmd_jobs_are_bound_as_one_job():
    argv, _ = _argv(req("native", mpi="mpich", ranks=1, binding="core"), req("native", mpi="mpich", ranks=1))
    assert argv.startswith("/usr/bin/mpiexec.hydra -bind-to core -n 1 ") and argv.count("-bind-to") == 1
    argv, _ = _argv(req("native", mpi="openmpi", ranks=1, binding="core"), req("native", mpi="openmpi", ranks=2))
    assert "--bind-to none" in argv and "--map-by core" not in argv   # 3 ranks on 2 cores


def test_without_binding_the_launch_is_as_before():
    argv, _ = _argv(req("native", mpi="mpich"))
    assert "-bind-to" not in argv
    argv, _ = _argv(req("native", mpi="openmpi"))
    assert "--bind-to" not in argv and "--map-by" not in argv


STUDY = """
[study]
name = "s"
repetitions = 2
{study}
[matrix]
mode = ["native"]
mpi = ["mpich", "openmpi"]
[[variant]]
name = "loose"
mode = "native"
mpi = "openmpi"
{variant}
[[benchmark]]
kernel = "latency"
"""


@pytest.mark.parametrize("study, variant, matrix_binding, named_binding", [
    ("", "", "core", "core"),
    ('binding = "none"', "", "none", "none"),
    ("", 'binding = "none"', "core", "none"),
])
def test_a_study_binds_by_default_and_a_variant_may_opt_out(study, variant, matrix_binding, named_binding):
    from nearmetal.study.plan import study_file as config_mod
    from nearmetal.study.plan.plan import cells

    cfg = config_mod.parse(STUDY.format(study=study, variant=variant))
    assert cfg.study.binding == ("none" if study else "core")
    by_name = {c.variant.get("name") or "matrix": c.variant for c in cells(cfg)}
    assert len(cells(cfg)) == 3
    assert (by_name["loose"].get("binding") or cfg.study.binding) == named_binding
    assert (by_name["matrix"].get("binding") or cfg.study.binding) == matrix_binding


def test_a_binding_that_is_not_known_is_refused_in_one_line():
    from nearmetal.errors import NearmetalError
    from nearmetal.study.plan import study_file as config_mod

    with pytest.raises(NearmetalError) as e:
        config_mod.parse(STUDY.format(study='binding = "socket"', variant=""))
    assert "binding" in str(e.value) and "\n" not in str(e.value)
