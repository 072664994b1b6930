"""`nearmetal doctor`: real discovery, real container smoke runs, a documented JSON schema."""

import json
import re
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
    assert report["shm"]["path"] == "/dev/shm" and report["shm"]["free_bytes"] > 0
    cleaned = nearmetal("doctor", "--clean-shm")  # what it removes: tests/test_unit_shm.py
    assert cleaned.returncode == 0 and re.match(r"removed \d+ stale MPI segments? \([\d.,]+ MiB\) from /dev/shm\n",
                                                cleaned.stderr), cleaned.stderr
    assert "Shared memory /dev/shm:" in cleaned.stdout


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
    assert verdict["openmpi"]["other_mpi"] == "mpich" and verdict["openmpi"]["remedy"] == "use --mpi mpich or --mode hybrid"
    assert verdict["openmpi"]["reason"] == f"bind mode refused: {verdict['openmpi']['why']}; {verdict['openmpi']['remedy']}"
    old = json.loads(nearmetal("doctor", "--json", "--image", bullseye_image.name).stdout)["image"]
    assert old["glibc"] == "2.31"
    info = [p for p in old["programs"] if p["path"].endswith("/nm-mpi-info")][0]
    mpich = [b for b in info["bind"] if b["host_mpi"] == "mpich"][0]
    assert not mpich["possible"] and "GLIBC" in mpich["reason"]
    # in words: no host MPI binds there, so the other --mpi is not offered as a way out (a new user
    # read "use --mpi mpich" right above "no bind with host mpich: ... needs GLIBC_2.36")
    words = " ".join(nearmetal("doctor", "--image", bullseye_image.name, env={"COLUMNS": "400"}).stdout.split())
    assert "no host MPI binds into this image: --mode hybrid runs the image's own MPI" in words
    assert "use --mpi mpich" not in words
    words = " ".join(nearmetal("doctor", "--image", default_image.name, env={"COLUMNS": "400"}).stdout.split())
    assert "use --mpi mpich or --mode hybrid" in words and "no host MPI binds into this image" not in words


def test_doctor_lists_every_mpi_linked_program_of_an_image(schema, default_image):
    """Not only nearmetal's kernels: the image's own MPI programs (Debian's ompi_info links
    libmpi.so.40, mpichversion libmpich.so.12), each once although /bin is /usr/bin."""
    out = nearmetal("doctor", "--json", "--image", default_image.name)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    jsonschema.validate(report, schema)
    progs = {p["path"]: p for p in report["image"]["programs"]}
    assert progs["/usr/bin/ompi_info"]["mpi_abi"] == "openmpi"
    assert progs["/usr/bin/mpichversion"]["mpi_soname"] == "libmpich.so.12"
    assert "/bin/ompi_info" not in progs and "/usr/bin/ls" not in progs
    assert all(p["mpi_soname"] for p in progs.values())


def test_doctor_program_without_an_image_describes_host_programs(schema, host_mpis):
    from nearmetal.kernels.build import host_bin

    kernel = f"{host_bin('mpich')}/nm-mpi-info"
    out = nearmetal("doctor", "--json", "--program", kernel, "--program", "ls")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    jsonschema.validate(report, schema)
    assert "image" not in report
    first, second = report["programs"]
    assert first["path"] == kernel and first["mpi_soname"] == "libmpich.so.12" and first["mpi_abi"] == "mpich"
    assert second["path"].endswith("/ls") and second["mpi_soname"] is None and second["linkage"] == "none"
    text = nearmetal("doctor", "--program", kernel).stdout
    assert "Programs (host)" in text and "libmpich.so.12" in text
    from conftest import assert_one_line_error

    assert "is not an ELF file" in assert_one_line_error(nearmetal("doctor", "--program", "/etc/passwd"))
    assert "program not found" in assert_one_line_error(nearmetal("doctor", "--program", "/nonexistent/x"))


def test_doctor_lists_the_parallel_io_libraries(schema, host_mpis, default_image):
    """Each host MPI's parallel I/O libraries are what its nm-iobench says (`nm-iobench -A`
    launched by `nearmetal run`, which also builds the kernels); an image's are the packages
    its build installed (a walk-through had to run nm-iobench -A to learn MPICH lacks PnetCDF)."""
    from nearmetal.io.config import parse_availability

    said = {}
    for family in ("openmpi", "mpich"):
        out = nearmetal("run", "--mpi", family, "-n", "1", "--", "nm-iobench", "-A", timeout=600)
        assert out.returncode == 0, out.stderr
        said[family] = parse_availability(out.stdout)
    assert said["openmpi"]["pnetcdf"] is None and said["mpich"]["pnetcdf"]  # Debian builds PnetCDF for Open MPI only
    report = json.loads(nearmetal("doctor", "--json", "--image", default_image.name, timeout=600).stdout)
    jsonschema.validate(report, schema)
    mine = {m["spec"]: m["io_libraries"] for m in report["mpi"] if m["spec"] in said}
    assert {f: m["libraries"] for f, m in mine.items()} == said
    assert report["image"]["io_packages"] == default_image.meta["io_packages"]
    assert "libpnetcdf-dev" in report["image"]["io_packages"]
    words = " ".join(nearmetal("doctor", "--image", default_image.name, env={"COLUMNS": "400"}).stdout.split())
    assert "parallel I/O posix, mpiio, hdf5 pnetcdf unavailable: PnetCDF is not installed for MPICH" in words
    packages = ", ".join(f"{p} {v}" for p, v in sorted(default_image.meta["io_packages"].items()))
    assert f"parallel I/O {packages}" in words and "libpnetcdf-dev" in packages
