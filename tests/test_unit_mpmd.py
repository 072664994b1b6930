"""Heterogeneous (MPMD) study benchmarks (study/mpmd.py) without a machine: what a file may say,
the cell's ranks, the components' requests and the refusals, each in one line with its key path.
The real launches are in test_kernel_coupled.py (locally) and test_slurm_run.py (hetjob)."""

import pytest

from nearmetal.errors import NearmetalError
from nearmetal.study.config import parse
from nearmetal.study.mpmd import more_requests, parts
from nearmetal.study.plan import cells

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
])
def test_what_a_heterogeneous_benchmark_may_not_say(lines, message):
    with pytest.raises(NearmetalError, match=message) as e:
        study(lines)
    assert "\n" not in str(e.value)


def test_submit_refuses_a_heterogeneous_benchmark_before_planning():
    from nearmetal.study.submit import check

    with pytest.raises(NearmetalError, match=r"^s\.toml: benchmark\[0\]\.components: a heterogeneous \(MPMD\) "
                                             r"benchmark \(c\) does not run inside one runner job"):
        check(study(TWO), "s.toml")
    check(parse(HEAD + '[[benchmark]]\nkernel = "bw"\n'), "s.toml")  # a plain study: nothing to refuse
