"""image build --recipe --source: one script builds the user's MPI program from one source
natively and inside the image, once per MPI family; runs find the native build natively and
the image's build in containers; the witness shows which library each ran."""

import json

import pytest

from conftest import assert_one_line_error, nearmetal
from nearmetal.witness import parse

pytestmark = pytest.mark.integration

RING = r"""
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv)
{
    int rank, size, token = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 0; i < 100; i++) {
        if (rank == 0) {
            MPI_Send(&token, 1, MPI_INT, 1 % size, 0, MPI_COMM_WORLD);
            MPI_Recv(&token, 1, MPI_INT, size - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(&token, 1, MPI_INT, rank - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            token++;
            MPI_Send(&token, 1, MPI_INT, (rank + 1) % size, 0, MPI_COMM_WORLD);
        }
    }
    if (rank == 0)
        printf("ring: %d ranks, token %d\n", size, token);
    MPI_Finalize();
    return 0;
}
"""

BUILD = """#!/bin/sh
set -eu
case "$PREFIX" in /opt/nearmetal/app/*)  # in the image the source is a read-only mount
  ! touch "$NM_SOURCE/.probe" 2>/dev/null || { echo "the source is writable"; exit 3; } ;; esac
mkdir -p "$PREFIX/bin"
"$MPICC" -O2 -o "$PREFIX/bin/app-ring" "$NM_SOURCE/ring.c"
echo "$NM_MPI_FAMILY $MPICC $MPICXX $CC" > "$PREFIX/built-with"
"""


@pytest.fixture(scope="module")
def recipe_image(tmp_path_factory):
    src = tmp_path_factory.mktemp("ring-src")
    (src / "ring.c").write_text(RING)
    script = tmp_path_factory.mktemp("ring-recipe") / "build.sh"
    script.write_text(BUILD)
    out = nearmetal("image", "build", "--name", "nm-test-recipe", "--mpi", "openmpi,mpich", "--recipe", str(script),
                    "--source", str(src), timeout=1800)
    assert out.returncode == 0, out.stderr[-3000:]
    again = nearmetal("image", "build", "--name", "nm-test-recipe", "--mpi", "openmpi,mpich", timeout=600)
    assert again.returncode == 0 and "is up to date" in again.stdout + again.stderr  # the recipe is kept
    return "nm-test-recipe"


@pytest.mark.parametrize("family, soname", [("openmpi", "libmpi.so.40"), ("mpich", "libmpich.so.12")])
def test_one_source_native_and_in_the_image(recipe_image, family, soname):
    import os

    host_inode = str(os.stat(f"/lib/x86_64-linux-gnu/{soname}").st_ino)
    seen = {}
    for mode in ("native", "hybrid", "bind"):
        image = ["--image", recipe_image] if mode != "native" else []  # natively the recipe's host build, by name
        out = nearmetal("run", "--witness", "--mode", mode, *image, "--mpi", family, "-n", "2", "--", "app-ring")
        assert out.returncode == 0 and "ring: 2 ranks, token 100" in out.stdout, out.stderr[-2000:]
        seen[mode] = parse(out.stderr)
        assert len(seen[mode]) == 2
    assert all(w["program"].endswith(f"/apps/{recipe_image}/{family}/bin/app-ring") for w in seen["native"])
    assert all(w["program"] == f"/opt/nearmetal/app/{family}/bin/app-ring" for w in seen["hybrid"] + seen["bind"])
    # bind: the image's build of the program runs the host's library; hybrid: the image's own
    assert all(w["library"] == f"/nm/host-mpi/lib/{soname}" and w["inode"] == host_inode for w in seen["bind"])
    assert all(w["library"].endswith(soname) and w["inode"] != host_inode for w in seen["hybrid"])


def test_the_image_records_the_application(recipe_image):
    meta = json.loads(nearmetal("doctor", "--image", recipe_image, "--json").stdout)
    programs = [p["path"] for p in meta["image"]["programs"]]
    assert "/opt/nearmetal/app/openmpi/bin/app-ring" in programs and "/opt/nearmetal/app/mpich/bin/app-ring" in programs


def test_a_failing_recipe_shows_its_log_tail(tmp_path):
    (tmp_path / "src").mkdir()
    script = tmp_path / "build.sh"
    script.write_text("echo compiling\necho 'fatal error: foo.h: No such file or directory'\nexit 1\n")
    err = assert_one_line_error(nearmetal("image", "build", "--name", "nm-test-badrecipe", "--mpi", "mpich",
                                          "--recipe", str(script), "--source", str(tmp_path / "src")))
    assert "--recipe failed natively for mpich (exit 1)" in err and "foo.h: No such file or directory" in err


@pytest.mark.parametrize("argv, expect", [
    (["--name", "x", "--recipe", "/etc/hostname"], "--recipe and --source go together"),
    (["--name", "x", "--recipe", "/nonexistent.sh", "--source", "/tmp"], "no such file"),
    (["--name", "x", "--recipe", "/etc/hostname", "--source", "/etc/hostname"], "not a directory"),
    (["--recipe", "/etc/hostname", "--source", "/tmp"], "--recipe needs --name"),
])
def test_recipe_bad_input(argv, expect):
    assert expect in assert_one_line_error(nearmetal("image", "build", *argv))


def test_the_same_recipe_from_elsewhere_is_no_rebuild_and_a_gone_one_is_kept(recipe_image, tmp_path):
    import shutil

    from nearmetal import image

    before = image.resolve(recipe_image).meta
    src, script = tmp_path / "moved-src", tmp_path / "moved.sh"
    shutil.copytree(before["app"]["source"], src)
    shutil.copy(before["app"]["recipe"], script)
    out = nearmetal("image", "build", "--name", recipe_image, "--mpi", "openmpi,mpich", "--recipe", str(script),
                    "--source", str(src), timeout=600)
    assert out.returncode == 0 and "is up to date" in out.stdout + out.stderr, out.stderr[-2000:]
    after = image.resolve(recipe_image).meta
    assert after["app"]["recipe"] == str(script) and after["digest"] == before["digest"]
    shutil.rmtree(src)
    script.unlink()
    again = nearmetal("image", "build", "--name", recipe_image, "--mpi", "openmpi,mpich", timeout=600)
    assert again.returncode == 0 and "is up to date" in again.stdout + again.stderr  # nothing to rebuild
    changed = nearmetal("image", "build", "--name", recipe_image, "--mpi", "mpich", timeout=600)
    assert "give --recipe and --source again" in assert_one_line_error(changed)
