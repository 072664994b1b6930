"""`nearmetal doctor`: real discovery, real container smoke runs, a documented JSON schema."""

import json
from importlib import resources

import jsonschema
import pytest

from conftest import nearmetal


@pytest.fixture(scope="module")
def schema():
    return json.loads(resources.files("nearmetal").joinpath("schemas/doctor.schema.json").read_text())


def test_doctor_json_matches_schema_and_host(schema, host_mpis):
    out = nearmetal("doctor", "--json", timeout=600)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    jsonschema.validate(report, schema)
    by_family = {m["family"]: m for m in report["mpi"]}
    assert by_family["openmpi"]["soname"] == "libmpi.so.40"
    assert by_family["mpich"]["soname"] == "libmpich.so.12"
    assert "pmix" in by_family["openmpi"]["pmi"]
    runtimes = {r["name"]: r for r in report["runtimes"]}
    for name in ("charliecloud", "bwrap", "podman"):
        assert runtimes[name]["works"], runtimes[name]
        assert runtimes[name]["version"]
    assert report["cpu"]["cores"] >= 1
    assert report["cpu"]["simd"] in ("sse2", "avx", "avx2", "avx512")


def test_doctor_reports_hazards(schema):
    out = nearmetal("doctor", "--json", env={"LD_AUDIT": "/tmp/libaudit.so", "SINGULARITYENV_LD_AUDIT": "x.so"})
    report = json.loads(out.stdout)
    jsonschema.validate(report, schema)
    names = {h["variable"] for h in report["hazards"]}
    assert {"LD_AUDIT", "SINGULARITYENV_LD_AUDIT"} <= names
    assert all(h["fix"] and h["why"] for h in report["hazards"])
    human = nearmetal("doctor", env={"LD_PRELOAD": ""})
    assert human.returncode == 0 and "No environment hazards" in human.stdout


def test_doctor_image_bind_verdicts(schema, default_image, bullseye_image):
    out = nearmetal("doctor", "--json", "--image", default_image.name)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    jsonschema.validate(report, schema)
    img = report["image"]
    assert img["glibc"] == "2.36"
    assert {m["family"] for m in img["mpi"]} == {"openmpi", "mpich"}
    progs = {p["path"]: p for p in img["programs"]}
    rpath = progs["/opt/nearmetal/mpich/bin/nm-mpi-info-rpath"]
    assert rpath["linkage"] == "rpath" and rpath["mpi_soname"] == "libmpich.so.12"
    verdict = {b["host_mpi"]: b for b in rpath["bind"]}
    assert verdict["mpich"]["possible"] and "preload" in verdict["mpich"]["reason"]
    assert not verdict["openmpi"]["possible"] and "ABI" in verdict["openmpi"]["reason"]
    old = json.loads(nearmetal("doctor", "--json", "--image", bullseye_image.name).stdout)["image"]
    assert old["glibc"] == "2.31"
    info = [p for p in old["programs"] if p["path"].endswith("/nm-mpi-info")][0]
    mpich = [b for b in info["bind"] if b["host_mpi"] == "mpich"][0]
    assert not mpich["possible"] and "GLIBC" in mpich["reason"]
