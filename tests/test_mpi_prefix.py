"""A second installation of one MPI family under a prefix (--mpi FAMILY@PREFIX): Debian's
MPICH packages extracted with dpkg -x into /opt/nm-second-mpich by scripts/setup.sh --test.
doctor lists it beside what `mpich` means; native and bind runs use its library (the
witness says so, by inode); studies name it; bad specs are one-line errors."""

import json
import os
import sqlite3

import pytest

from conftest import assert_one_line_error, nearmetal
from nearmetal.witness import parse

pytestmark = pytest.mark.integration

PREFIX = "/opt/nm-second-mpich/usr"
SPEC = f"mpich@{PREFIX}"
LIB = f"{PREFIX}/lib/x86_64-linux-gnu/libmpich.so.12"


def inode(path):
    return str(os.stat(path).st_ino)


def test_the_second_installation_is_there():
    assert os.access(f"{PREFIX}/bin/mpiexec.hydra", os.X_OK) and os.path.isfile(LIB)
    assert inode(LIB) != inode("/lib/x86_64-linux-gnu/libmpich.so.12")  # really a second copy


def test_doctor_lists_it_beside_what_the_family_name_means():
    report = json.loads(nearmetal("doctor", "--json", check=True).stdout)
    specs = {m["spec"]: m for m in report["mpi"]}
    assert specs["mpich"]["library"].startswith("/usr/lib") and specs["mpich"]["family"] == "mpich"
    assert specs[f"mpich@/opt/nm-second-mpich/usr"]["library"] == LIB
    assert specs[f"mpich@/opt/nm-second-mpich/usr"]["launcher"] == f"{PREFIX}/bin/mpiexec.hydra"


@pytest.mark.parametrize("mode, library", [("native", LIB), ("bind", "/nm/host-mpi/lib/libmpich.so.12")])
def test_runs_use_the_prefix_installation(default_image, mode, library):
    out = nearmetal("run", "--witness", "--mode", mode, "--mpi", SPEC, "-n", "2", "--", "nm-latency", "-m", "8:8")
    assert out.returncode == 0, out.stderr[-2000:]
    seen = parse(out.stderr)
    assert [w["library"] for w in seen] == [library] * 2 and all(w["inode"] == inode(LIB) for w in seen)
    dry = nearmetal("run", "--dry-run", "--mode", mode, "--mpi", SPEC, "--", "nm-latency").stdout
    assert f"{PREFIX}/bin/mpiexec.hydra" in dry


def test_a_study_names_it_with_a_short_label(tmp_path):
    study = tmp_path / "p.toml"
    study.write_text(f"""
[study]
name = "p"
repetitions = 1
[matrix]
mode = ["native"]
mpi = ["mpich", "{SPEC}"]
[[benchmark]]
kernel = "latency"
args = ["-m", "8:8"]
[baseline]
mode = "native"
mpi = "mpich"
""")
    out = nearmetal("study", str(study), "--db", str(tmp_path / "p.db"), "--out", str(tmp_path), "--no-progress")
    assert out.returncode == 0, out.stderr[-2000:]
    con = sqlite3.connect(tmp_path / "p.db")
    variants = {v for (v,) in con.execute("select distinct variant from runs")}
    statuses = {s for (s,) in con.execute("select distinct status from runs")}
    con.close()
    assert statuses == {"ok"}  # the prefix installation's cells really ran (they once failed unseen)
    assert "native/mpich" in variants
    (other,) = variants - {"native/mpich"}
    assert other.startswith("native/mpich@nm-second-mpich-") and other.count("/") == 1


@pytest.mark.parametrize("spec, expect", [
    ("mpich@opt/relative", "MPI prefix must be an absolute path"),
    ("lam@/opt/x", "unknown MPI 'lam'"),
    ("mpich@/nonexistent/prefix", "no mpich installation under /nonexistent/prefix"),
    ("openmpi@/opt/nm-second-mpich/usr", "no openmpi installation under /opt/nm-second-mpich/usr"),
])
def test_bad_prefix_specs(spec, expect):
    assert expect in assert_one_line_error(nearmetal("run", "--mpi", spec, "--", "nm-latency"))
