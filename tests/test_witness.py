"""The witness (run --witness, [study] witness = true): which MPI library each rank of any
program really ran, for real: natively, hybrid and bind, both MPI families, an image with
an older glibc, and a real application (GROMACS) in bind mode."""

import json
import os
import sqlite3

import pytest

from conftest import nearmetal
from nearmetal.witness import parse

pytestmark = pytest.mark.integration


def witnessed(*argv):
    out = nearmetal("run", "--witness", "-n", "2", *argv)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = parse(out.stderr)
    assert [w["rank"] for w in lines] == ["0", "1"], out.stderr[-2000:]
    return lines


def host_inode(soname):
    return str(os.stat(os.path.join("/lib/x86_64-linux-gnu", soname)).st_ino)


@pytest.mark.parametrize("family, soname", [("openmpi", "libmpi.so.40"), ("mpich", "libmpich.so.12")])
def test_native_ranks_name_the_host_library(family, soname):
    for w in witnessed("--mpi", family, "--", "nm-latency", "-m", "8:8"):
        assert w["library"].endswith(soname) and w["inode"] == host_inode(soname)


@pytest.mark.parametrize("family, soname", [("openmpi", "libmpi.so.40"), ("mpich", "libmpich.so.12")])
def test_bind_ranks_run_the_host_library_inside_the_container(default_image, family, soname):
    for w in witnessed("--mode", "bind", "--mpi", family, "--", "nm-latency", "-m", "8:8"):
        assert w["library"] == f"/nm/host-mpi/lib/{soname}" and w["inode"] == host_inode(soname)


def test_hybrid_ranks_run_the_image_library(default_image):
    for w in witnessed("--mode", "hybrid", "--mpi", "mpich", "--", "nm-latency", "-m", "8:8"):
        assert w["library"].endswith("libmpich.so.12") and w["inode"] != host_inode("libmpich.so.12")


def test_the_witness_loads_in_an_image_with_an_older_glibc(bullseye_image):
    lines = witnessed("--mode", "hybrid", "--image", bullseye_image.name, "--mpi", "mpich", "--",
                      "nm-latency", "-m", "8:8")
    assert all("MPICH Version:" in w["version"] and "3.4" in w["version"] for w in lines)


def test_a_non_mpi_program_is_not_witnessed():
    out = nearmetal("run", "--witness", "-n", "2", "--mpi", "openmpi", "--", "/bin/true")
    assert out.returncode == 0 and parse(out.stderr) == []


def test_bind_runs_the_host_library_in_the_users_program(tmp_path):
    """GROMACS (Debian's gmx_mpi) in the applications' image, bind mode."""
    from app_inputs import APP_IMAGE, APP_PACKAGES, gromacs_tpr

    assert nearmetal("image", "build", "--mpi", "openmpi", "--name", APP_IMAGE, "--packages", APP_PACKAGES,
                     timeout=1800).returncode == 0
    gromacs_tpr(tmp_path, nsteps=200)
    lines = witnessed("--mode", "bind", "--image", APP_IMAGE, "--mpi", "openmpi", "--workdir", str(tmp_path), "--",
                      "gmx_mpi", "mdrun", "-s", "topol.tpr", "-ntomp", "1")
    for w in lines:
        assert w["program"] == "/usr/bin/gmx_mpi"
        assert w["library"] == "/nm/host-mpi/lib/libmpi.so.40" and w["inode"] == host_inode("libmpi.so.40")


def test_a_study_records_what_its_ranks_ran(tmp_path, default_image):
    study = tmp_path / "w.toml"
    study.write_text("""
[study]
name = "w"
repetitions = 1
witness = true
[matrix]
mode = ["native", "bind"]
mpi = ["mpich"]
[[benchmark]]
kernel = "latency"
args = ["-m", "8:8"]
""")
    db = tmp_path / "w.db"
    assert nearmetal("study", str(study), "--db", str(db), "--out", str(tmp_path), "--no-progress").returncode == 0
    con = sqlite3.connect(db)
    ctx = {v: json.loads(c)["witness"] for v, c in con.execute(
        "select distinct r.variant, c.context_json from runs r join contexts c on c.id = r.context_id")}
    con.close()
    assert [w["library"] for w in ctx["bind/charliecloud/mpich/default"]] == ["/nm/host-mpi/lib/libmpich.so.12"] * 2
    assert all(w["inode"] == host_inode("libmpich.so.12") for w in ctx["native/mpich"])
    # the report shows it as a table of its own: one row per rank, no Python dict anywhere
    html = (tmp_path / "report.html").read_text()
    table = html[html.index('<table class="witness">'):]
    table = table[:table.index("</table>")]
    assert table.count("<tr>") == 1 + 4   # the header, 2 ranks x 2 contexts
    assert "<td>/nm/host-mpi/lib/libmpich.so.12</td>" in table and f"<td>{host_inode('libmpich.so.12')}</td>" in table
    assert "{&#39;rank&#39;" not in html and "{'rank'" not in html


def test_bench_witnesses_too():
    out = nearmetal("bench", "latency", "--witness", "--mpi", "mpich", "--", "-m", "8:8")
    assert out.returncode == 0 and [w["library"] for w in parse(out.stderr)] == ["/lib/x86_64-linux-gnu/libmpich.so.12"] * 2
