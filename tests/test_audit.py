"""`audit`: the ranks under nearmetal's rtld-audit library (audit/nm-audit.c), as seed 002's
Titan jobs ran under Singularity's LD_AUDIT interception. Real runs: the auditor's callbacks
fire in every rank (natively with both MPI families, and inside a container), never in the
launcher; a study's `audit` dimension plans audited variants against unaudited baselines."""

import pytest

from conftest import nearmetal
from nearmetal.audit import parse


def audited_run(*options):
    out = nearmetal("run", *options, "-n", "2", "--env", "NM_AUDIT_REPORT=1", "--", "nm-startup")
    assert out.returncode == 0, out.stderr
    return parse(out.stderr), out


@pytest.mark.parametrize("family", ["openmpi", "mpich"])
def test_the_auditor_sees_every_object_and_binding_of_each_rank(family, host_mpis):
    lines, out = audited_run("--audit", "--mpi", family)
    assert len(lines) == 2, out.stderr  # one per rank: the launcher is not audited
    assert len({r["pid"] for r in lines}) == 2
    for r in lines:
        assert r["objects"] >= 10 and r["bindings"] >= 100, r  # libc, libmpi and its closure
    lines, out = audited_run("--mpi", family)
    assert lines == [], out.stderr  # without --audit the report variable alone prints nothing


def test_the_auditor_runs_inside_a_container(default_image):
    lines, out = audited_run("--audit", "--mode", "hybrid", "--mpi", "mpich")
    assert len(lines) == 2 and all(r["objects"] >= 10 and r["bindings"] >= 100 for r in lines), out.stderr


def test_dry_run_shows_ld_audit_for_the_ranks_only():
    out = nearmetal("run", "--audit", "--dry-run", "--mpi", "mpich", "-n", "2", "--", "nm-startup")
    assert out.returncode == 0, out.stderr
    assert "-genv LD_AUDIT /tmp/nearmetal-" in out.stdout and "nm-audit-" in out.stdout


@pytest.mark.unit
def test_a_study_plans_audited_variants_against_unaudited_baselines():
    from conftest import planned_variants
    from nearmetal.study.plan.plan import baseline_of, cells, variant_id

    cfg, ids = planned_variants("audit = [false, true]",
                                '[[variant]]\nname = "named-audited"\nmode = "hybrid"\nmpi = "mpich"\naudit = true\n')
    assert ids == ["hybrid/charliecloud/mpich/default", "hybrid/charliecloud/mpich/default+audit", "named-audited",
                   "native/mpich", "native/mpich+audit"]
    by_id = {variant_id(c.variant): c.variant for c in cells(cfg)}
    assert by_id["named-audited"]["audit"] is True and "audit" not in by_id["native/mpich"]
    for vid in ids:
        assert variant_id(baseline_of(cfg, by_id[vid])) == "native/mpich"


@pytest.mark.unit
def test_audit_takes_booleans_only():
    from nearmetal.errors import NearmetalError
    from nearmetal.study.plan.study_file import parse as parse_study

    with pytest.raises(NearmetalError) as e:
        parse_study('[study]\nname = "a"\n[matrix]\naudit = ["yes"]\n[[benchmark]]\nkernel = "startup"\n',
                    source="a.toml")
    assert "matrix.audit[0]" in str(e.value) and "\n" not in str(e.value)
