"""Ranks bound to cores, for real (launchers/_binding.py): a study's own launch of a program
that reads its /proc/self/status shows each rank on a core of its own (Cpus_allowed_list),
natively and in a container, for both MPI families, and every allowed core with
`binding = "none"`; a real study records the binding in its runs' context, with the reason
where more ranks than cores left them unbound, and the report shows it."""

import json
import os

import pytest

# sleep: ch-run's join needs both ranks alive while the second joins the first's namespaces
READ_AFFINITY = ["/bin/sh", "-c", "grep Cpus_allowed_list /proc/self/status; sleep 1"]

PROGRAM_STUDY = """\
[study]
name = "aff"
repetitions = 1
warmup = 0
binding = "{binding}"
[matrix]
mode = ["{mode}"]
runtime = ["charliecloud"]
mpi = ["{family}"]
[baseline]
mode = "{mode}"
[[benchmark]]
name = "affinity"
command = {command}
"""


def _cpus(text):
    """The CPUs of a Cpus_allowed_list value ('0-1,3')."""
    out = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="binding two ranks needs two cores")
@pytest.mark.parametrize("family", ["openmpi", "mpich"])
@pytest.mark.parametrize("mode", ["native", "hybrid"])
@pytest.mark.parametrize("binding", ["core", "none"])
def test_the_studys_launch_puts_each_rank_on_its_own_core(family, mode, binding, host_mpis, default_image,
                                                          tmp_path):
    from nearmetal.run import capture
    from nearmetal.study.execute import runner
    from nearmetal.study.plan import study_file as config_mod
    from nearmetal.study.execute.executor import Executor
    from nearmetal.study.plan.plan import cells

    text = PROGRAM_STUDY.format(binding=binding, mode=mode, family=family, command=json.dumps(READ_AFFINITY))
    cfg = config_mod.parse(text)
    (cell,) = cells(cfg)
    store, sid, _ = runner.open_study(cfg, text, tmp_path / "aff.db", resume=False, say=lambda m: None)
    with store:  # the study's own composition (its working directory made), run here to read the ranks' output
        ex = Executor(cfg, store, sid, progress=False)
        launch = ex.launch_for(cell)
        assert launch.error is None, launch.error
        assert launch.launch.binding == {"asked": binding, "used": binding, "reason": None}
        rc, out, err = capture(launch.launch, timeout=120)
        ex.close()
    assert rc == 0, err[-2000:]
    lists = [_cpus(line.split()[-1]) for line in out.splitlines() if line.startswith("Cpus_allowed_list")]
    assert len(lists) == 2, out
    if binding == "core":
        assert all(len(c) == 1 for c in lists) and lists[0] != lists[1], lists
    else:
        assert lists == [set(os.sched_getaffinity(0))] * 2, lists


STUDY = """\
[study]
name = "bound"
repetitions = 1
warmup = 0
[matrix]
mode = ["native"]
mpi = ["openmpi", "mpich"]
[[benchmark]]
kernel = "latency"
args = ["-m", "8:8", "-i", "200"]
[[benchmark]]
kernel = "allgather"
ranks = [3]
args = ["-m", "8:8", "-i", "50"]
"""


@pytest.mark.skipif(os.cpu_count() != 2, reason="the fallback case is written for a 2-core machine (3 ranks)")
def test_a_study_records_the_binding_it_used_and_why(tmp_path, host_mpis):
    from nearmetal.report import html
    from nearmetal.study.execute import runner
    from nearmetal.study.plan import study_file as config_mod
    from nearmetal.study.execute.executor import Executor

    cfg = config_mod.parse(STUDY, source="bound.toml")
    store, sid, _ = runner.open_study(cfg, STUDY, tmp_path / "bound.db", resume=False, say=lambda m: None)
    with store:
        ex = Executor(cfg, store, sid, progress=False)
        assert [ex.execute(row) for row in store.pending(sid)] == ["ok"] * 4
        rows = store.db.execute("SELECT r.benchmark, x.context_json FROM runs r JOIN contexts x "
                                "ON x.id = r.context_id").fetchall()
    got = {(b, json.loads(c)["binding"]["used"]) for b, c in rows}
    assert got == {("latency", "core"), ("allgather", "none")}, got
    reasons = {json.loads(c)["binding"]["reason"] for b, c in rows if b == "allgather"}
    assert len(reasons) == 1 and "3 ranks on 2 cores" in reasons.pop()
    shown = [html._env_row(json.loads(c))["binding"] for _, c in rows]
    assert "each rank on its own core" in shown
    assert any(s.startswith("unbound (the kernel places the ranks) (asked: core; 3 ranks on 2 cores") for s in shown)
