"""The generic image variant (`image build --generic`, image/generic.py) without building one:
its name, its digest, the command line and its refusals, and the step's file work on a
synthetic root file system in tmp_path (the real build, and what its MPIs then use between
ranks, is tests/test_generic_image.py)."""

import pytest

from nearmetal import cli, image
from nearmetal.cli_parser import build_parser
from nearmetal.errors import NearmetalError
from nearmetal.image import generic, recipe
from nearmetal.image.formats import FORMATS

pytestmark = pytest.mark.unit

FAMILIES = ("openmpi", "mpich")


# ------------------------------------------------------------------ name, digest, inputs


def test_the_generic_variant_is_named_after_the_default_with_generic_after_the_distro():
    assert image.default_name("bookworm", FAMILIES) == "nm-bookworm-mpich-openmpi"
    assert image.default_name("bookworm", FAMILIES, generic=True) == "nm-bookworm-generic-mpich-openmpi"
    assert image.default_name("trixie", ("mpich",), True) == "nm-trixie-generic-mpich"
    names = FORMATS.names()
    assert recipe.check_inputs("bookworm", FAMILIES, "dir", None, names, generic=True)[3] == \
        "nm-bookworm-generic-mpich-openmpi"
    assert recipe.check_inputs("bookworm", ["mpich"], "dir", None, names)[3] == "nm-bookworm-mpich"
    assert recipe.check_inputs("bookworm", FAMILIES, "dir", "my-generic", names, generic=True)[3] == "my-generic"
    for bad in ("my-image\n", "My-image", "-x", "a" * 101):  # "$" once let a trailing newline through
        with pytest.raises(NearmetalError, match="bad image name"):
            recipe.check_inputs("bookworm", FAMILIES, "dir", bad, names)


def test_the_digest_changes_with_the_option_and_with_what_the_step_does(monkeypatch):
    packages = recipe.packages(FAMILIES)
    tuned = recipe.digest("bookworm", FAMILIES, packages)
    assert recipe.digest("bookworm", FAMILIES, packages, False) == tuned  # images built before are not rebuilt
    made = recipe.digest("bookworm", FAMILIES, packages, True)
    assert made != tuned and len(made) == 64
    assert recipe.digest("bookworm", FAMILIES, packages, True) == made
    monkeypatch.setattr(generic, "UCX_CONF_TEXT", generic.UCX_CONF_TEXT + "# changed\n")
    assert recipe.digest("bookworm", FAMILIES, packages, True) != made
    monkeypatch.undo()
    monkeypatch.setattr(generic, "MCA_REMOVE", generic.MCA_REMOVE[:-1])
    assert recipe.digest("bookworm", FAMILIES, packages, True) != made


def test_the_recipe_is_constant_text():
    r = generic.recipe()
    assert r["ucx_conf"].splitlines()[-1] == "UCX_TLS=^sm"
    assert all(line.startswith("#") for line in r["ucx_conf"].splitlines()[:-1])
    assert "mca_btl_vader.so" in r["mca_remove"] and "libuct_cma.so*" in r["ucx_remove"]


@pytest.mark.parametrize("name, is_generic, words", [
    ("nm-bookworm-mpich-openmpi", True, "'nm-bookworm-mpich-openmpi' is a default image's name"),
    ("nm-trixie-mpich", True, "'nm-trixie-mpich' is a default image's name"),
    ("nm-bullseye-openmpi", True, "is a default image's name"),
    ("nm-bookworm-generic-mpich-openmpi", False, "that name is the generic variant's: add --generic"),
    ("nm-trixie-generic-mpich", False, "that name is the generic variant's"),
])
def test_a_name_that_says_the_other_variant_is_refused(name, is_generic, words):
    with pytest.raises(NearmetalError, match=words) as err:
        recipe.check_generic(name, is_generic)
    assert "\n" not in str(err.value)


def test_other_names_take_either_variant():
    assert recipe.check_generic("nm-bookworm-generic-mpich-openmpi", True) is True
    assert recipe.check_generic("my-portable", True) is True
    assert recipe.check_generic("my-portable", None) is False
    assert recipe.check_generic("nm-bookworm-mpich-openmpi", False) is False


def test_a_missing_default_image_names_the_command_that_builds_it(nm_home):
    assert recipe.build_command("nm-bookworm-generic-mpich-openmpi") == \
        "nearmetal image build --generic --distro bookworm --mpi mpich,openmpi"
    assert recipe.build_command("nm-trixie-mpich") == "nearmetal image build --distro trixie --mpi mpich"
    assert recipe.build_command("my-portable") is None
    with pytest.raises(NearmetalError, match=r"^no image 'nm-bullseye-generic-openmpi': build it with "
                                             r"`nearmetal image build --generic --distro bullseye --mpi openmpi`$"):
        image.resolve("nm-bullseye-generic-openmpi")
    with pytest.raises(NearmetalError, match=r"`nearmetal image build \.\.\.` or give a path$"):
        image.resolve("my-portable")


# ------------------------------------------------------------------ command line


@pytest.mark.parametrize("flag, key", [("--generic", "generic"), ("--portable-kernels", "portable_kernels")])
def test_image_build_takes_the_image_options_and_passes_them_on(flag, key, monkeypatch, capsys):
    """--generic, and --portable-kernels (tests/test_unit_portable_kernels.py): given, True;
    not given, None (as the named image is)."""
    parser = build_parser("image")
    assert getattr(parser.parse_args(["image", "build", flag]), key) is True
    assert getattr(parser.parse_args(["image", "build"]), key) is None
    with pytest.raises(SystemExit):
        parser.parse_args(["image", "build", f"{flag}=yes"])
    capsys.readouterr()
    seen = {}

    def fake_build(**kwargs):  # the builder itself is tested with real builds
        seen.update(kwargs)
        raise NearmetalError("stop here")

    monkeypatch.setattr(image, "build", fake_build)
    assert cli.main(["image", "build", flag, "--mpi", "mpich", "--name", "anywhere"]) == 2
    assert seen[key] is True and seen["mpis"] == ("mpich",) and seen["name"] == "anywhere"
    assert cli.main(["image", "build", "--mpi", "mpich"]) == 2
    assert seen[key] is None


@pytest.mark.parametrize("argv, words", [
    (["--generic", "--distro", "bookworm", "--name", "nm-bookworm-mpich-openmpi"], "is a default image's name"),
    (["--distro", "bookworm", "--name", "nm-bookworm-generic-mpich-openmpi"], "add --generic"),
    (["--generic", "--distro", "bookworm", "--name", "Bad Name"], "bad image name 'Bad Name'"),
])
def test_bad_generic_builds_are_one_line_errors_before_any_build(argv, words, nm_home, capsys):
    assert cli.main(["image", "build", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("nearmetal image build: error:") and words in err, err
    assert not any(p.name.startswith(".nm-") or p.is_dir() for p in (nm_home / "images").glob("*"))


# ------------------------------------------------------------------ the step's files (synthetic rootfs)


def _touch(path, data=b"x"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _mca_dir(rootfs, components=("self", "tcp", "vader", "sm", "openib")):
    d = rootfs / "usr/lib/x86_64-linux-gnu/ompi/lib/mca"
    for c in components:
        _touch(d / f"mca_btl_{c}.so")
    _touch(d / "mca_coll_sm.so")
    _touch(d / "mca_osc_sm.so")
    return d


def _ucx(rootfs, conf_string=b"../etc/ucx.conf"):
    libdir = rootfs / "usr/lib/x86_64-linux-gnu"
    _touch(libdir / "libucs.so.0", b"\x7fELF...\0ucx.conf\0/etc/ucx\0" + conf_string + b"\0HOME\0")
    mods = libdir / "ucx"
    _touch(mods / "libuct_cma.so.0.0.0")
    (mods / "libuct_cma.so.0").symlink_to("libuct_cma.so.0.0.0")
    (mods / "libuct_cma.so").symlink_to("libuct_cma.so.0")
    _touch(mods / "libuct_cma.a")
    _touch(mods / "libuct_ib.so.0.0.0")
    _touch(mods / "libuct_xpmem.so.0")
    return libdir


def test_the_shared_memory_components_go_and_self_tcp_and_the_rest_stay(tmp_path):
    d = _mca_dir(tmp_path, ("self", "tcp", "vader", "sm", "smcuda", "openib"))
    _touch(d / "mca_smsc_cma.so")
    assert generic.find_dirs(tmp_path, generic.MCA_MARKER) == [d]
    removed = generic.strip_components(d)
    assert sorted(p.name for p in removed) == ["mca_btl_sm.so", "mca_btl_smcuda.so", "mca_btl_vader.so",
                                               "mca_smsc_cma.so"]
    assert sorted(p.name for p in d.iterdir()) == ["mca_btl_openib.so", "mca_btl_self.so", "mca_btl_tcp.so",
                                                   "mca_coll_sm.so", "mca_osc_sm.so"]


@pytest.mark.parametrize("components, words", [
    (("self", "tcp", "openib"), "has none of mca_btl_vader.so, mca_btl_sm.so"),
    (("self", "vader"), "has no mca_btl_tcp.so: without it the MPI could not start over TCP"),
])
def test_a_component_directory_that_cannot_be_made_generic_is_refused_untouched(tmp_path, components, words):
    d = _mca_dir(tmp_path, components)
    before = sorted(p.name for p in d.iterdir())
    with pytest.raises(NearmetalError, match=words):
        generic.strip_components(d)
    assert sorted(p.name for p in d.iterdir()) == before


def test_the_ucx_shared_memory_modules_go_links_and_all(tmp_path):
    libdir = _ucx(tmp_path)
    assert generic.find_dirs(tmp_path, generic.UCX_LIBRARY) == [libdir]
    removed = generic.strip_files(libdir / "ucx", generic.UCX_REMOVE)
    assert sorted(p.name for p in removed) == ["libuct_cma.so", "libuct_cma.so.0", "libuct_cma.so.0.0.0",
                                               "libuct_xpmem.so.0"]
    assert sorted(p.name for p in (libdir / "ucx").iterdir()) == ["libuct_cma.a", "libuct_ib.so.0.0.0"]


def test_a_symlinked_lib_root_is_walked_once(tmp_path):
    libdir = _ucx(tmp_path)
    (tmp_path / "lib").symlink_to("usr/lib")  # merged /usr
    assert generic.find_dirs(tmp_path, generic.UCX_LIBRARY) == [libdir]


@pytest.mark.parametrize("conf_string, written", [
    (b"../etc/ucx.conf", "/usr/lib/etc/ucx.conf"),            # UCX 1.13 (bookworm)
    (b"../etc/ucx/ucx.conf", "/usr/lib/etc/ucx/ucx.conf"),    # UCX 1.18 (trixie)
])
def test_the_ucx_configuration_goes_where_that_libucs_reads_it(tmp_path, conf_string, written):
    libdir = _ucx(tmp_path, conf_string)
    assert generic.conf_path_in((libdir / "libucs.so.0").read_bytes()) == conf_string.decode()
    assert generic.write_ucx_conf(tmp_path, libdir) == written
    assert (tmp_path / written.lstrip("/")).read_text() == generic.UCX_CONF_TEXT
    assert not (tmp_path / "etc").exists()  # /etc/ucx/ucx.conf would be read by a host UCX bound in too


def test_a_ucx_without_a_library_relative_configuration_is_refused(tmp_path):
    libdir = _ucx(tmp_path, b"../share/other")
    assert generic.conf_path_in((libdir / "libucs.so.0").read_bytes()) is None
    with pytest.raises(NearmetalError, match="reads no library-relative configuration file"):
        generic.write_ucx_conf(tmp_path, libdir)


def test_the_ucx_configuration_never_follows_a_symbolic_link_out_of_the_image(tmp_path):
    rootfs = tmp_path / "rootfs"
    libdir = _ucx(rootfs)
    outside = tmp_path / "outside"
    outside.mkdir()
    (rootfs / "usr/lib/etc").symlink_to(outside)
    with pytest.raises(NearmetalError, match="goes through a symbolic link"):
        generic.write_ucx_conf(rootfs, libdir)
    assert list(outside.iterdir()) == []


# ------------------------------------------------------------------ which MPI is covered


NEEDS = {"/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3": {"libopen-pal.so.40"}}
OMPI_CLOSURE = {"libmpi.so.40", "libopen-rte.so.40", "libopen-pal.so.40", "libhwloc.so.15", "libevent_core-2.1.so.7"}
MPICH_CLOSURE = {"libmpich.so.12", "libucp.so.0", "libucs.so.0", "libuct.so.0", "libhwloc.so.15"}


def test_each_mpi_is_covered_by_what_its_program_loads():
    via = generic.coverage({"openmpi": OMPI_CLOSURE, "mpich": MPICH_CLOSURE}, NEEDS, has_ucx=True)
    assert via == {"openmpi": ["mca:/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3"], "mpich": ["ucx"]}
    # Open MPI with pml ucx linked in would be covered both ways
    both = generic.coverage({"openmpi": OMPI_CLOSURE | {"libucs.so.0"}}, NEEDS, has_ucx=True)
    assert both == {"openmpi": ["ucx", "mca:/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3"]}


@pytest.mark.parametrize("closures, needs, has_ucx", [
    ({"mpich": {"libmpich.so.12", "libhwloc.so.15"}}, NEEDS, True),   # ch3:nemesis: shared memory inside
    ({"mpich": MPICH_CLOSURE}, NEEDS, False),                          # its UCX was not the one configured
    ({"openmpi": OMPI_CLOSURE}, {"/x": {"libopen-pal.so.40", "libother.so.1"}}, False),
    ({"openmpi": OMPI_CLOSURE}, {"/x": set()}, False),                 # a directory that links nothing says nothing
])
def test_an_mpi_with_its_shared_memory_inside_its_library_is_refused(closures, needs, has_ucx):
    with pytest.raises(NearmetalError, match=r"the image's MPICH-3\.4 keeps its shared memory inside its own "
                                             r"library") as err:
        generic.coverage(closures, needs, has_ucx, titles={m: "MPICH-3.4" for m in closures})
    assert "\n" not in str(err.value)


def test_the_step_removes_and_records_in_image_paths(tmp_path, monkeypatch):
    """make_generic on a synthetic rootfs, the ELF reading (which MPI loads what) given as the
    real image's: that reading is checked by the real build (test_generic_image.py)."""
    d = _mca_dir(tmp_path)
    libdir = _ucx(tmp_path)
    in_image = "/" + str(d.relative_to(tmp_path))
    monkeypatch.setattr(generic, "_closures", lambda rootfs, mpis, kernel_bin: {"openmpi": OMPI_CLOSURE,
                                                                                "mpich": MPICH_CLOSURE})
    monkeypatch.setattr(generic, "_component_needs", lambda rootfs, dirs: {in_image: {"libopen-pal.so.40"}})

    from nearmetal.image.chroot import BuildLog

    log = BuildLog(tmp_path / "build.log", truncate=True)
    record = generic.make_generic(tmp_path, FAMILIES, recipe.kernel_bin, log)
    log.flush()

    class Log:
        text = (tmp_path / "build.log").read_text()

    assert record["removed"] == [f"{in_image}/mca_btl_sm.so", f"{in_image}/mca_btl_vader.so",
                                 "/usr/lib/x86_64-linux-gnu/ucx/libuct_cma.so",
                                 "/usr/lib/x86_64-linux-gnu/ucx/libuct_cma.so.0",
                                 "/usr/lib/x86_64-linux-gnu/ucx/libuct_cma.so.0.0.0",
                                 "/usr/lib/x86_64-linux-gnu/ucx/libuct_xpmem.so.0"]
    assert record["ucx_config"] == ["/usr/lib/etc/ucx.conf"] and record["ucx_tls"] == "^sm"
    assert record["by_mpi"] == {"openmpi": [f"mca:{in_image}"], "mpich": ["ucx"]}
    assert "# generic: removed " + in_image + "/mca_btl_vader.so" in Log.text
    assert not (d / "mca_btl_vader.so").exists() and (libdir / "libucs.so.0").exists()


def test_default_names_the_default_image_on_the_command_line_as_in_study_files(nm_home):
    """`--image default` was refused ("no image 'default'") where study files take it."""
    import json

    from nearmetal.families import names

    name = image.default_name(image.host_distro(), names())
    (nm_home / "images" / name / "rootfs").mkdir(parents=True)
    (nm_home / "images" / name / "image.json").write_text(json.dumps({"name": name, "distro": "bookworm"}))
    assert image.resolve("default").name == name
    (nm_home / "images" / "default" / "rootfs").mkdir(parents=True)  # an image named so is that image
    (nm_home / "images" / "default" / "image.json").write_text(json.dumps({"name": "default"}))
    assert image.resolve("default").name == "default"
