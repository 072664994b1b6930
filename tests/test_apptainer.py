"""Apptainer, real: directory and SIF images, hybrid and bind for both MPIs (the library each
rank really maps), a SIF nearmetal did not build, containment options per named variant,
the capability fix recorded, probes, Slurm, doctor, and bad input in one line.

Without Apptainer these tests report themselves skipped with the reason; with
NEARMETAL_REQUIRE_APPTAINER=1 (as .ci/run sets) a missing Apptainer fails them instead.
"""

import hashlib
import json
import os
import sqlite3
import subprocess

import pytest

from conftest import assert_one_line_error, local_slurm_env, nearmetal, ranks_json

FAMILIES = ("openmpi", "mpich")
BOUND = "/nm/host-mpi/lib/"


def _apptainer_or_skip():
    from nearmetal.runtimes import get

    if get("apptainer").path():
        return
    why = ("Apptainer unavailable: no apptainer or singularity on PATH and none built by set-up "
           "(set NEARMETAL_APPTAINER_SRC to its source release and run scripts/setup.sh)")
    if os.environ.get("NEARMETAL_REQUIRE_APPTAINER") == "1":
        pytest.fail(f"NEARMETAL_REQUIRE_APPTAINER=1: {why}")
    pytest.skip(why)


@pytest.fixture(scope="module", autouse=True)
def apptainer():
    _apptainer_or_skip()


@pytest.fixture(scope="module")
def sif_image(default_image):
    """The default image with its SIF beside it (image build --format sif)."""
    from nearmetal import image

    img = image.build(fmt="sif", progress=False)
    assert img.sif and img.sif.is_file()
    return img


@pytest.fixture(scope="module")
def foreign():
    """(rootfs, SIF) of a user's image: Debian's MPI runtime libraries, no /nm, no /opt/nearmetal."""
    import foreign_image

    return foreign_image.build()


def _run(*args, env=None):
    out = nearmetal("run", "-n", "2", "--runtime", "apptainer", *args, env=env, timeout=300)
    assert out.returncode == 0, f"exit {out.returncode}\nstdout:\n{out.stdout}\nstderr:\n{out.stderr}"
    rows = ranks_json(out.stdout)
    assert [r["rank"] for r in rows] == [0, 1] and all(r["size"] == 2 for r in rows), out.stdout
    return rows


def _host_inode(mpi):
    return os.stat(mpi["library"]).st_ino


def _image_arg(img, kind):
    return str(img.sif) if kind == "sif" else img.name


@pytest.mark.parametrize("kind", ["dir", "sif"])
@pytest.mark.parametrize("family", FAMILIES)
def test_hybrid_maps_the_images_library(family, kind, host_mpis, sif_image):
    rows = _run("--mode", "hybrid", "--mpi", family, "--image", _image_arg(sif_image, kind), "--",
                "nm-mpi-info", "--json")
    for r in rows:
        assert not r["library"].startswith(BOUND), r
        assert r["inode"] != _host_inode(host_mpis[family]), "hybrid mapped the host's own file"
    if kind == "dir":  # the very file of the directory image
        from nearmetal.elf import LinkerView

        assert rows[0]["inode"] == os.stat(LinkerView(sif_image.rootfs).host_path(rows[0]["library"])).st_ino


@pytest.mark.parametrize("kind", ["dir", "sif"])
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("program", ["nm-mpi-info", "nm-mpi-info-rpath"])
def test_bind_maps_the_hosts_library(family, kind, program, host_mpis, sif_image):
    rows = _run("--mode", "bind", "--mpi", family, "--image", _image_arg(sif_image, kind), "--", program, "--json")
    for r in rows:
        assert r["library"].startswith(BOUND), r
        assert r["inode"] == _host_inode(host_mpis[family]), "the bound path is not the host's library file"


def test_sif_digest_is_recorded(sif_image):
    h = hashlib.sha256(sif_image.sif.read_bytes()).hexdigest()
    assert sif_image.meta["sif_digest"] == f"sha256:{h}"
    assert "sif" in sif_image.meta["formats"]
    listing = nearmetal("image", "list", check=True).stdout
    assert any(line.startswith(sif_image.name) and "sif" in line.split("\t")[3] for line in listing.splitlines())


@pytest.mark.parametrize("mode", ["hybrid", "bind"])
@pytest.mark.parametrize("family", FAMILIES)
def test_a_sif_nearmetal_did_not_build(family, mode, host_mpis, foreign):
    """Debian's MPI runtime libraries and a program in /usr/local/bin, no /nm mount point:
    Apptainer creates /nm/host-mpi for bind; hybrid runs the image's own library."""
    import foreign_image

    rootfs, sif = foreign
    assert not (rootfs / "nm").exists() and not (rootfs / "opt/nearmetal").exists()
    rows = _run("--mode", mode, "--mpi", family, "--image", str(sif), "--", foreign_image.program_name(family),
                "--json")
    for r in rows:
        assert r["library"].startswith(BOUND) == (mode == "bind"), r
        assert (r["inode"] == _host_inode(host_mpis[family])) == (mode == "bind"), r


def test_a_foreign_sif_is_inspected_like_an_image(foreign, host_mpis):
    rootfs, sif = foreign
    out = nearmetal("doctor", "--json", "--image", str(sif), timeout=300)
    assert out.returncode == 0, out.stderr
    img = json.loads(out.stdout)["image"]
    assert img["name"].startswith("user-app-") and img["distro"] == "bookworm" and img["glibc"] == "2.36"
    assert img["path"] == str(sif) and os.path.isdir(img["inspected"])
    # the user's own MPI programs, found in the image's program directories
    assert {p["path"]: p["mpi_abi"] for p in img["programs"]} == {
        "/usr/local/bin/user-mpi-info-mpich": "mpich", "/usr/local/bin/user-mpi-info-openmpi": "openmpi"}
    assert {m["family"]: m["soname"] for m in img["mpi"]} == {"openmpi": "libmpi.so.40", "mpich": "libmpich.so.12"}
    assert {m["family"]: m["version"] for m in img["mpi"]} == {f: host_mpis[f]["version"] for f in FAMILIES}
    # the user's SIF itself is never written to
    assert not any(p.name != "user-app.sif" for p in sif.parent.glob("user-app*"))


@pytest.mark.parametrize("family", FAMILIES)
def test_drop_caps_is_applied_and_said(family, default_image):
    from nearmetal.runtimes.apptainer import needs_drop_caps

    out = nearmetal("run", "--dry-run", "--mode", "hybrid", "--runtime", "apptainer", "--mpi", family, "--",
                    "nm-mpi-info")
    assert out.returncode == 0, out.stderr
    said = "APPTAINER_DROP_CAPS=CAP_SYS_RESOURCE" in out.stdout
    assert said == needs_drop_caps(), out.stdout  # as root inside a container here: True


def test_bad_images_are_one_line_errors(tmp_path, default_image):
    missing = assert_one_line_error(nearmetal("run", "--mode", "hybrid", "--runtime", "apptainer",
                                              "--image", str(tmp_path / "nope.sif"), "--", "nm-mpi-info"))
    assert "no such file" in missing
    junk = tmp_path / "junk.sif"
    junk.write_bytes(os.urandom(4096))
    assert "is not a SIF image" in assert_one_line_error(
        nearmetal("run", "--mode", "hybrid", "--runtime", "apptainer", "--image", str(junk), "--", "nm-mpi-info"))
    # a real SIF cut short: its root file system ends past the end of the file
    from nearmetal import image

    sif = image.build(fmt="sif", progress=False).sif
    cut = tmp_path / "cut.sif"
    with open(sif, "rb") as src, open(cut, "wb") as dst:
        dst.write(src.read(1 << 20))
    assert "truncated SIF" in assert_one_line_error(
        nearmetal("run", "--mode", "bind", "--runtime", "apptainer", "--image", str(cut), "--", "nm-mpi-info"))


def test_hybrid_without_an_mpi_in_the_image_is_refused(tmp_path):
    """doctor's smoke rootfs (/bin/true and its libraries) made into a SIF: no MPI inside."""
    from nearmetal.doctor import smoke_rootfs
    from nearmetal.runtimes import get

    rt = get("apptainer")
    sif = tmp_path / "no-mpi.sif"
    subprocess.run([rt.path(), "build", str(sif), str(smoke_rootfs())], check=True, capture_output=True,
                   env=rt.env_for_tools())
    err = assert_one_line_error(nearmetal("run", "--mode", "hybrid", "--runtime", "apptainer", "--mpi", "mpich",
                                          "--image", str(sif), "--", "/bin/true"))
    assert "hybrid mode needs mpich inside the image" in err and "has no MPI" in err


# -- containment options, per named variant, in a real study ---------------------------------

STUDY = """
[study]
name = "apptainer-options"
repetitions = 2
warmup = 0
timeout = 120
[baseline]
variant = "plain"
[[variant]]
name = "plain"
mode = "hybrid"
runtime = "apptainer"
mpi = "{mpi}"
[[variant]]
name = "contain"
mode = "hybrid"
runtime = "apptainer"
mpi = "{mpi}"
runtime_args = ["--contain", "--no-home"]
[[variant]]
name = "cleanenv"
mode = "bind"
runtime = "apptainer"
mpi = "{mpi}"
runtime_args = ["--cleanenv"]
[[variant]]
name = "userns"
mode = "bind"
runtime = "apptainer"
mpi = "{mpi}"
runtime_args = ["--userns"]
[[benchmark]]
kernel = "latency"
args = ["-m", "8:8"]
"""


@pytest.mark.parametrize("family", FAMILIES)
def test_containment_options_per_named_variant(family, tmp_path, default_image):
    study = tmp_path / "s.toml"
    study.write_text(STUDY.format(mpi=family))
    db = tmp_path / "s.db"
    out = nearmetal("study", str(study), "--db", str(db), "--out", str(tmp_path / "out"), "--no-progress",
                    timeout=600)
    assert out.returncode == 0, out.stderr
    con = sqlite3.connect(db)
    rows = con.execute("SELECT r.variant, r.status, c.context_json FROM runs r "
                       "JOIN contexts c ON c.id = r.context_id").fetchall()
    assert {name for name, _, _ in rows} == {"plain", "contain", "cleanenv", "userns"}
    assert all(status == "ok" for _, status, _ in rows), rows
    for name, _, ctx in rows:
        runtime = json.loads(ctx)["runtime"]
        assert runtime["name"] == "apptainer"
        assert runtime["options"] == {"plain": [], "contain": ["--contain", "--no-home"], "cleanenv": ["--cleanenv"],
                                      "userns": ["--userns"]}[name]
        assert runtime["userns"] == (name == "userns")
        from nearmetal.runtimes.apptainer import needs_drop_caps

        assert (runtime["drop_caps"] == "CAP_SYS_RESOURCE") == needs_drop_caps()


# -- probes: start-up of a directory image and of a SIF -----------------------------------------

@pytest.mark.parametrize("kind", ["dir", "sif"])
def test_startup_and_metadata_probes(kind, sif_image):
    for kernel in ("startup", "metadata"):
        out = nearmetal("bench", kernel, "--json", "-n", "2", "--mode", "hybrid", "--runtime", "apptainer",
                        "--mpi", "mpich", "--image", _image_arg(sif_image, kind), timeout=300)
        assert out.returncode == 0, out.stderr
        recs = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
        assert recs and all(r["params"]["runtime"] == "apptainer" for r in recs)
        if kernel == "startup":
            walls = [r["value"] for r in recs if r["metric"] == "wall_to_main" and r["params"]["rank"] == "max"]
            assert len(walls) == 1 and 0 < walls[0] < 60


# -- Slurm: srun ... apptainer exec per rank, heterogeneous steps too ------------------------

@pytest.fixture(scope="module")
def slurm_env(tmp_path_factory):
    yield from local_slurm_env(tmp_path_factory, nodes=3)


@pytest.mark.parametrize("mode", ["hybrid", "bind"])
@pytest.mark.parametrize("family", FAMILIES)
def test_through_slurm(slurm_env, default_image, family, mode):
    out = nearmetal("run", "--scheduler", "slurm", "--runtime", "apptainer", "--mpi", family, "--mode", mode,
                    "-n", "2", "--", "nm-mpi-info", "--json", env=slurm_env, timeout=180)
    assert out.returncode == 0, out.stderr
    rows = ranks_json(out.stdout)
    assert [r["size"] for r in rows] == [2, 2]
    assert all(r["library"].startswith(BOUND) == (mode == "bind") for r in rows)


def test_heterogeneous_step_through_slurm(slurm_env, default_image):
    out = nearmetal("run", "--scheduler", "slurm", "--runtime", "apptainer", "--mpi", "mpich", "-n", "1",
                    "--mode", "hybrid", "--", "nm-mpi-info", "--json", ":", "-n", "2", "--mode", "bind", "--",
                    "nm-mpi-info", "--json", env=slurm_env, timeout=180)
    assert out.returncode == 0, out.stderr
    rows = ranks_json(out.stdout)
    assert [r["size"] for r in rows] == [3, 3, 3]
    assert [r["library"].startswith(BOUND) for r in rows] == [False, True, True]


def test_doctor_shows_apptainer_working():
    out = nearmetal("doctor", "--json", timeout=300)
    assert out.returncode == 0, out.stderr
    entry = {r["name"]: r for r in json.loads(out.stdout)["runtimes"]}["apptainer"]
    assert entry["works"] and entry["version"], entry


# -- --workdir: the ranks start in DIR, mounted read-write at /nm/work ---------------------------

@pytest.mark.parametrize("kind", ["dir", "sif"])
@pytest.mark.parametrize("mode", ["hybrid", "bind"])
@pytest.mark.parametrize("family", FAMILIES)
def test_ranks_start_in_the_mounted_workdir(family, mode, kind, sif_image):
    import tempfile
    from pathlib import Path

    from test_workdir import IOBENCH, _check_iobench_files

    # outside /tmp, which Apptainer ranks see anyway: only the /nm/work mount can reach it
    workdir = Path(tempfile.mkdtemp(prefix="nm-appt-workdir-", dir="/var/tmp"))
    try:
        out = nearmetal("run", "-n", "2", "--runtime", "apptainer", "--mode", mode, "--mpi", family,
                        "--image", _image_arg(sif_image, kind), "--workdir", workdir, "--", *IOBENCH, timeout=300)
        assert out.returncode == 0, out.stderr
        _check_iobench_files(out, workdir, "/nm/work")
    finally:
        subprocess.run(["rm", "-rf", str(workdir)], check=False)
