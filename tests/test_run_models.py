"""Real MPI ranks in real containers: which MPI library each model really maps.

native maps the host library; hybrid the image's own (same path string inside, but a
different file: another inode); bind the host's file through the bound path
/nm/host-mpi/lib (a hard link of the host file: the host's inode).
"""

import os

import pytest

from conftest import nearmetal, ranks_json

FAMILIES = ("openmpi", "mpich")
RUNTIMES = ("charliecloud", "bwrap", "podman")
BOUND = "/nm/host-mpi/lib/"


def _run(*args):
    out = nearmetal("run", "-n", "2", *args, timeout=300)
    assert out.returncode == 0, f"exit {out.returncode}\nstdout:\n{out.stdout}\nstderr:\n{out.stderr}"
    rows = ranks_json(out.stdout)
    assert [r["rank"] for r in rows] == [0, 1], out.stdout
    assert all(r["size"] == 2 for r in rows)
    return rows


def _host_inode(mpi):
    return os.stat(mpi["library"]).st_ino


@pytest.mark.parametrize("family", FAMILIES)
def test_native_maps_host_library(family, host_mpis):
    rows = _run("--mode", "native", "--mpi", family, "--", "nm-mpi-info", "--json")
    for r in rows:
        assert os.path.realpath(r["library"]) == os.path.realpath(host_mpis[family]["library"])
        assert r["inode"] == _host_inode(host_mpis[family])


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("family", FAMILIES)
def test_hybrid_maps_container_library(family, runtime, host_mpis, default_image):
    rows = _run("--mode", "hybrid", "--runtime", runtime, "--mpi", family, "--image", default_image.name,
                "--", "nm-mpi-info", "--json")
    for r in rows:
        assert not r["library"].startswith(BOUND), r
        assert r["inode"] != _host_inode(host_mpis[family]), "hybrid mapped the host's own file"
    if runtime != "podman":  # podman runs from its own storage copy of the rootfs
        from nearmetal.elf import LinkerView

        in_image = LinkerView(default_image.rootfs).host_path(rows[0]["library"])
        assert rows[0]["inode"] == os.stat(in_image).st_ino


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("program", ["nm-mpi-info", "nm-mpi-info-rpath"])
def test_bind_maps_host_library(family, runtime, program, host_mpis, default_image):
    rows = _run("--mode", "bind", "--runtime", runtime, "--mpi", family, "--image", default_image.name,
                "--", program, "--json")
    for r in rows:
        assert r["library"].startswith(BOUND), r
        assert r["inode"] == _host_inode(host_mpis[family]), "bound path is not the host's library file"


def test_bind_rpath_program_goes_through_ld_so_preload(default_image):
    out = nearmetal("run", "--dry-run", "--mode", "bind", "--mpi", "mpich", "--image", default_image.name,
                    "--", "nm-mpi-info-rpath")
    assert out.returncode == 0, out.stderr
    assert "--preload" in out.stdout and "DT_RPATH" in out.stdout
    plain = nearmetal("run", "--dry-run", "--mode", "bind", "--mpi", "mpich", "--image", default_image.name,
                      "--", "nm-mpi-info")
    assert "--preload" not in plain.stdout and "LD_LIBRARY_PATH=/nm/host-mpi/lib" in plain.stdout


@pytest.mark.parametrize("mode", ["hybrid", "bind"])
def test_charliecloud_squashfs_image(mode, host_mpis, default_image):
    assert default_image.sqfs and default_image.sqfs.exists()
    rows = _run("--mode", mode, "--runtime", "charliecloud", "--mpi", "mpich", "--image", str(default_image.sqfs),
                "--", "nm-mpi-info", "--json")
    bound = all(r["library"].startswith(BOUND) for r in rows)
    assert bound == (mode == "bind")


def test_trixie_image_bind_runs_host_mpi(trixie_image, host_mpis):
    """Newer glibc and newer MPICH inside: bind must run the host's MPICH, hybrid the image's."""
    host_version = host_mpis["mpich"]["version"]
    bind = _run("--mode", "bind", "--mpi", "mpich", "--image", trixie_image.name, "--", "nm-mpi-info", "--json")
    hybrid = _run("--mode", "hybrid", "--mpi", "mpich", "--image", trixie_image.name, "--", "nm-mpi-info", "--json")
    image_version = trixie_image.meta["mpi"]["mpich"]["version"]
    assert image_version != host_version
    assert host_version in bind[0]["version"] and image_version not in bind[0]["version"]
    assert image_version in hybrid[0]["version"]


def test_environment_reaches_ranks(default_image):
    for mode in ("native", "bind"):
        args = ["--mode", mode, "--mpi", "mpich", "--env", "NM_PROBE=hello world"]
        if mode != "native":
            args += ["--image", default_image.name]
        # Each rank outlives the start of its peer: ch-run's namespace join fails when the
        # first rank of a node has already exited (a known Charliecloud limit for short
        # non-MPI ranks; MPI ranks wait for each other in MPI_Init).
        out = nearmetal("run", "-n", "2", *args, "--", "/bin/sh", "-c", "env; sleep 1", timeout=300)
        assert out.returncode == 0, out.stderr
        assert out.stdout.count("NM_PROBE=hello world") == 2


def test_exit_code_is_the_programs(default_image):
    out = nearmetal("run", "-n", "1", "--mpi", "mpich", "--", "/bin/sh", "-c", "exit 7")
    assert out.returncode == 7
    out = nearmetal("run", "-n", "1", "--mode", "hybrid", "--runtime", "bwrap", "--mpi", "mpich",
                    "--image", default_image.name, "--", "/bin/sh", "-c", "exit 5")
    assert out.returncode == 5


def test_dry_run_prints_argv_and_runs_nothing(tmp_path):
    marker = tmp_path / "ran"
    out = nearmetal("run", "--dry-run", "--mpi", "openmpi", "--", "/usr/bin/touch", str(marker))
    assert out.returncode == 0, out.stderr
    assert not marker.exists()
    last = out.stdout.strip().splitlines()[-1]
    assert "mpirun" in last and "-np 2" in last and str(marker) in last


def test_verbose_prints_command(tmp_path):
    out = nearmetal("run", "-v", "--mpi", "mpich", "-n", "1", "--", "/bin/true")
    assert out.returncode == 0
    assert "mpiexec" in out.stderr and "/bin/true" in out.stderr


@pytest.mark.parametrize("mode", ["native", "hybrid", "bind"])
@pytest.mark.parametrize("family", FAMILIES)
def test_mpmd_coupled_components_share_comm_world(family, mode, default_image):
    """MPMD locally: atmosphere native, ocean in MODE; one MPI_COMM_WORLD, verified exchanges."""
    out = nearmetal("run", "--mpi", family, "-n", "1", "--", "nm-coupled", "--role", "atm", "--couplings", "4",
                    ":", "-n", "2", "--mode", mode, "--", "nm-coupled", "--role", "ocn", "--couplings", "4",
                    timeout=300)
    assert out.returncode == 0, out.stderr
    assert "world_size=3" in out.stdout and "atm_ranks=1" in out.stdout and "mode=mpmd" in out.stdout


def test_mpmd_bad_component_syntax_is_a_clear_error(default_image):
    out = nearmetal("run", "--mpi", "mpich", "-n", "1", "--", "nm-mpi-info", ":", "--bogus", "--", "nm-mpi-info")
    assert out.returncode != 0 and "Traceback" not in out.stderr
    out = nearmetal("run", "--mpi", "mpich", "-n", "1", "--", "nm-mpi-info", ":", ":", "nm-mpi-info")
    assert "empty MPMD component" in out.stderr and out.returncode != 0


@pytest.mark.parametrize("mode", ["native", "bind"])
def test_the_library_named_is_the_mpi_not_a_preloaded_tool(mode, tmp_path, host_mpis, default_image):
    """With evidence on (every study, run --evidence, trace) nm-evidence.so is preloaded and
    defines MPI_Init: nm-mpi-info named it as 'the MPI library', the same for native and bind."""
    image = ["--runtime", "charliecloud", "--image", default_image.name] if mode == "bind" else []
    rows = _run("--mode", mode, "--mpi", "openmpi", *image, "--evidence", str(tmp_path / "ev"), "--",
                "nm-mpi-info", "--json")
    for r in rows:
        assert "nm-evidence" not in r["library"] and os.path.basename(r["library"]).startswith("libmpi.so"), r
        assert r["inode"] == _host_inode(host_mpis["openmpi"]), r
