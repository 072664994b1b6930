"""Images whose compute kernels are built portable (`image build --portable-kernels`) without
building one: the digest, the refusals, and the make line the build runs in the image (the
option's parsing: tests/test_unit_generic_image.py) (the real build is bench/explain_planted.py's simd cases; the Makefile's
KERNELS=portable itself is tests/test_kernels_compute.py)."""

import pytest

from nearmetal import cli
from nearmetal.image import builder, recipe

pytestmark = pytest.mark.unit

FAMILIES = ("mpich", "openmpi")


def test_the_digest_changes_with_the_option_only():
    packages = recipe.packages(FAMILIES)
    tuned = recipe.digest("bookworm", FAMILIES, packages)
    assert recipe.digest("bookworm", FAMILIES, packages, False, False) == tuned  # images built before stay
    portable = recipe.digest("bookworm", FAMILIES, packages, False, True)
    assert portable != tuned and portable != recipe.digest("bookworm", FAMILIES, packages, True, True)


@pytest.mark.parametrize("argv", [["--portable-kernels"], ["--portable-kernels", "--name", "nm-bookworm-mpich"],
                                  ["--portable-kernels", "--generic", "--name", "nm-bookworm-generic-openmpi"]])
def test_without_a_name_of_its_own_it_is_a_one_line_error_before_any_build(argv, nm_home, capsys):
    assert cli.main(["image", "build", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--portable-kernels makes an image of its own" in err, err
    assert not any((nm_home / "images").glob("*"))


def test_the_kernels_are_made_with_the_makefiles_portable_switch_for_each_mpi(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(builder.chroot, "in_chroot", lambda root, argv, log, what: calls.append(argv))
    monkeypatch.setattr(builder, "kernel_programs", lambda src: [])
    for portable in (False, True):
        calls.clear()
        builder._build_kernels(tmp_path / f"root{portable}", FAMILIES, log=None, portable=portable)
        assert [a[-1] for a in calls] == ["install", "install"]
        assert [("KERNELS=portable" in a) for a in calls] == [portable, portable]
        assert [next(x for x in a if x.startswith("MPI=")) for a in calls] == ["MPI=mpich", "MPI=openmpi"]
