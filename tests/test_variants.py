"""Named variants ([[variant]]): their own environment and runtime arguments, the baseline,
names in the plan, the store and the report; the matrix's variants join them."""

import json
import sqlite3

import pytest

from conftest import assert_runs_ok, nearmetal

AA = """
[study]
name = "aa"
repetitions = 2
warmup = 1
timeout = 120
seed = 3
[baseline]
variant = "first"
[[variant]]
name = "first"
mode = "hybrid"
mpi = "mpich"
[[variant]]
name = "second"
mode = "hybrid"
mpi = "mpich"
[[variant]]
name = "tcp"
mode = "hybrid"
mpi = "mpich"
env = { UCX_TLS = "tcp,self" }
runtime_args = ["--unset-env=NM_NOTHING"]
[[benchmark]]
kernel = "latency"
args = ["-m", "8:8", "-i", "200"]
"""


def _parse(text):
    from nearmetal.study.plan.study_file import parse

    return parse(text, source="t.toml")


def _cells(text):
    from nearmetal.study.plan.plan import cells, variant_id

    return sorted(variant_id(c.variant) for c in cells(_parse(text)))


@pytest.mark.unit
def test_named_variants_alone_and_their_baseline():
    from nearmetal.study.plan.plan import baseline_of, cells, variant_id

    cfg = _parse(AA)
    assert _cells(AA) == ["first", "second", "tcp"]  # the matrix's defaults are not added
    for c in cells(cfg):
        assert variant_id(baseline_of(cfg, c.variant)) == "first"
    tcp = next(c.variant for c in cells(cfg) if c.variant["name"] == "tcp")
    assert tcp == {"name": "tcp", "mode": "hybrid", "runtime": "charliecloud", "mpi": "mpich", "image": "default",
                   "env": {"UCX_TLS": "tcp,self"}, "runtime_args": ["--unset-env=NM_NOTHING"]}


@pytest.mark.unit
def test_named_variants_join_a_matrix_that_names_its_dimensions():
    text = AA.replace("[baseline]\nvariant = \"first\"", "[baseline]\nmode = \"native\"") \
        + '[matrix]\nmode = ["native"]\nmpi = ["mpich"]\n'
    assert _cells(text) == ["first", "native/mpich", "second", "tcp"]
    from nearmetal.study.plan.plan import baseline_of, cells, variant_id

    cfg = _parse(text)
    assert {variant_id(baseline_of(cfg, c.variant)) for c in cells(cfg)} == {"native/mpich"}


@pytest.mark.unit
@pytest.mark.parametrize("change, expect", [
    (('name = "second"', 'name = "first"'), "variant[1].name: 'first' is also the name of variant[0]"),
    (('variant = "first"', 'variant = "nobody"'), "baseline.variant: no [[variant]] is named 'nobody'"),
    (('variant = "first"', 'variant = "first"\nmode = "hybrid"'), "baseline: Value error, give either variant"),
    (('name = "tcp"\nmode = "hybrid"', 'name = "tcp"\nmode = "native"'), "variant[2]: Value error, a native variant runs "
                                                                      "no container: remove runtime_args"),
    (('name = "first"', 'name = "a/b"'), "variant[0].name: String should match pattern"),
    (('UCX_TLS = "tcp,self"', '"BAD NAME" = "x"'), "variant[2].env: Value error, 'BAD NAME' is not an environment"),
])
def test_bad_named_variants_are_refused_with_their_key_path(change, expect):
    from nearmetal.errors import NearmetalError

    with pytest.raises(NearmetalError) as e:
        _parse(AA.replace(*change, 1))
    assert expect.replace("Value error, ", "") in str(e.value)


def test_an_aa_study_of_named_variants_runs_and_reports_their_names(tmp_path, default_image):
    f, db = tmp_path / "aa.toml", tmp_path / "aa.db"
    f.write_text(AA)
    out = nearmetal("study", f, "--db", db, "--no-progress", "--out", tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT variant, argv_json FROM runs").fetchall()
    assert sorted({v for v, _ in rows}) == ["first", "second", "tcp"]
    assert_runs_ok(db)
    for variant, argv in rows:
        argv = json.loads(argv)
        tcp = "--set-env=UCX_TLS=tcp,self" in argv and "--unset-env=NM_NOTHING" in argv
        assert tcp == (variant == "tcp"), argv
        if tcp:  # the runtime's own arguments come before the image
            assert argv.index("--unset-env=NM_NOTHING") < argv.index(str(default_image.rootfs))
    report = nearmetal("report", "--db", db, "--format", "json", "--out", tmp_path, timeout=120)
    assert report.returncode == 0, report.stderr
    data = json.loads((tmp_path / "analysis.json").read_text())
    assert {v["id"] for v in data["variants"]} == {"first", "second", "tcp"}
    assert {v["baseline"] for v in data["variants"]} == {"first"}
