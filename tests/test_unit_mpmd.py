"""Heterogeneous (MPMD) study benchmarks (study/config/mpmd.py) without a machine: what a file may say,
the cell's ranks, the components' requests and the refusals, each in one line with its key path.
The real launches are in test_kernel_coupled.py (locally) and test_slurm_run.py (hetjob)."""

import pytest

from nearmetal.errors import NearmetalError
from nearmetal.study.plan.study_file import parse
from nearmetal.study.config.mpmd import more_requests, parts
from nearmetal.study.plan.plan import cells
from test_unit_compose import FakeHost, machine  # noqa: F401  (machine: autouse fixture)

pytestmark = pytest.mark.unit

HEAD = '[study]\nname = "a"\nrepetitions = 2\n[matrix]\nmode = ["native"]\nmpi = ["mpich"]\n'
TWO = 'components = [{ranks = 1, args = ["--role", "atm"]}, {ranks = 3}]\n'


def study(bench_lines):
    return parse(HEAD + '[[benchmark]]\nname = "c"\nkernel = "coupled"\nargs = ["--role", "ocn"]\n' + bench_lines)


def test_the_cells_ranks_are_the_components_together():
    cfg = study(TWO)
    (cell,) = cells(cfg)
    assert cell.ranks == 4 and cell.key == "c|n=4|t=1|native/mpich"
    assert parts(cfg.benchmark[0], cfg.benchmark[0].args) == [(["--role", "atm"], 1), (["--role", "ocn"], 3)]


def test_a_plain_benchmark_has_no_components():
    cfg = parse(HEAD + '[[benchmark]]\nkernel = "bw"\n')
    assert parts(cfg.benchmark[0], ["-m", "8:8"]) == [] and cfg.benchmark[0].total_ranks() is None


def test_the_other_components_share_the_first_ones_variant():
    from nearmetal.run import RunRequest

    first = RunRequest("nm-coupled", ["--role", "atm"], mode="hybrid", runtime="charliecloud", image="/i", mpi="mpich",
                       ranks=1, threads=2, env={"A": "1"}, scheduler="local", runtime_args=["--x"])
    (other,) = more_requests(first, [(["--role", "ocn"], 3)])
    assert (other.program, other.args, other.ranks) == ("nm-coupled", ["--role", "ocn"], 3)
    assert (other.mode, other.runtime, other.image, other.mpi, other.threads, other.env, other.runtime_args) == (
        "hybrid", "charliecloud", "/i", "mpich", 2, {"A": "1"}, ["--x"])


@pytest.mark.parametrize("lines, message", [
    ('components = [{ranks = 2}]\n', r"benchmark\[0\]: .*an MPMD job has at least 2 components"),
    (TWO + 'ranks = [2]\n', r"benchmark\[0\]: .*remove ranks"),
    (TWO + 'ranks_per_node = [2]\n', r"benchmark\[0\]: .*remove ranks_per_node"),
    ('components = [{ranks = 0}, {ranks = 1}]\n', r"benchmark\[0\]\.components\[0\]\.ranks"),
    ('components = [{ranks = 1, host = "x"}, {ranks = 1}]\n', r"benchmark\[0\]\.components\[0\]\.host"),
    (TWO + 'nodes = [2]\n', r"benchmark\[0\]: .*nodes of its own.*remove nodes"),
    ('components = [{ranks = 1000000}, {ranks = 1}]\n', r"benchmark\[0\]: .*1000001 ranks together; at most"),
])
def test_what_a_heterogeneous_benchmark_may_not_say(lines, message):
    with pytest.raises(NearmetalError, match=message) as e:
        study(lines)
    assert "\n" not in str(e.value)


def test_submit_refuses_a_heterogeneous_benchmark_before_planning():
    from nearmetal.study.execute.submit import check

    with pytest.raises(NearmetalError, match=r"^s\.toml: benchmark\[0\]\.components: a heterogeneous \(MPMD\) "
                                             r"benchmark \(c\) does not run inside one runner job"):
        check(study(TWO), "s.toml")
    check(parse(HEAD + '[[benchmark]]\nkernel = "bw"\n'), "s.toml")  # a plain study: nothing to refuse


def test_the_matrixs_nodes_do_not_apply_to_a_heterogeneous_benchmark():
    cfg = parse('[study]\nname = "a"\nrepetitions = 2\nscheduler = "slurm"\n[matrix]\nmode = ["native"]\n'
                'mpi = ["mpich"]\nnodes = [2]\n[[benchmark]]\nname = "c"\nkernel = "coupled"\n' + TWO
                + '[[benchmark]]\nkernel = "bw"\n')
    placed = {c.benchmark.label: (c.ranks, c.variant.get("nodes")) for c in cells(cfg)}
    assert placed == {"c": (4, None), "bw": (2, 2)}


def test_every_component_sees_the_large_inputs_bound_into_the_working_directory(monkeypatch):
    from nearmetal.run import RunRequest, plan

    first = RunRequest("/bin/true", ["a"], mode="native", mpi="mpich", ranks=1, scheduler="local")
    first.workdir_binds = [("/data/big.nc", "big.nc")]
    p = plan(first, more_requests(first, [(["b"], 1)]), check_paths=False, host=FakeHost())
    assert [c.workdir_binds for c in p.components] == [(("/data/big.nc", "big.nc"),)] * 2


def test_inside_an_allocation_slurm_says_why_a_heterogeneous_job_cannot_run(monkeypatch):
    from nearmetal import schedulers

    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    assert schedulers.get("slurm").heterogeneous_problem() is None
    assert schedulers.get("local").heterogeneous_problem() is None
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    why = schedulers.get("slurm").heterogeneous_problem()
    assert "inside an allocation" in why and "\n" not in why
