"""Tests of nearmetal.elf against the real dynamic linker of this machine.

Oracles: ``ldd`` (which runs ld.so in trace mode), running programs compiled
here and reading their /proc/self/maps, ``ldconfig -p`` and ``getconf``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from nearmetal.elf import (
    FLAGS_X86_64,
    GLIBC_SONAMES,
    ElfInfo,
    LinkerView,
    glibc_requirement,
    glibc_version,
    is_glibc,
    parse_glibc_version,
    parse_ld_so_cache,
    read_elf,
    read_ld_so_cache,
)
from nearmetal.errors import NearmetalError

# nearmetal's set-up installs everything these tests use (MPICH, Open MPI, gcc, binutils):
# a missing tool is a failed set-up, so the tests fail rather than skip.

LIBDIR = Path("/usr/lib/x86_64-linux-gnu")
LIBMPICH = LIBDIR / "libmpich.so.12"
LIBMPI = LIBDIR / "libmpi.so.40"

def needs_mpich(test):
    return test


needs_ldd = needs_mpich


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LD_")}
    env.update(extra)
    return env


_LDD_LINE = re.compile(r"^\s*(\S+)\s+=>\s+(.+?)(?:\s+\(0x[0-9a-f]+\))?\s*$")


def ldd(path: Path | str, **env: str) -> dict[str, str]:
    """``ldd``'s answer: needed name -> path ("not found" kept as such)."""
    out = subprocess.run(
        ["ldd", str(path)], env=clean_env(**env), capture_output=True, text=True, check=True
    ).stdout
    result = {}
    for line in out.splitlines():
        m = _LDD_LINE.match(line)
        if m:
            result[m.group(1)] = m.group(2)
    return result


def ldd_non_glibc(path: Path | str, **env: str) -> dict[str, str]:
    return {name: p for name, p in ldd(path, **env).items() if not is_glibc(name)}


def gcc(*args: str | Path) -> None:
    subprocess.run(["gcc", *map(str, args)], check=True, capture_output=True)


DEMO_C = 'const char *demo_id(void) { return "%s"; }\n'
MID_C = "const char *demo_id(void);\nconst char *mid_id(void) { return demo_id(); }\n"
PROG_C = r"""
#include <stdio.h>
#include <string.h>
const char *%s(void);
int main(void) {
    char line[4096];
    FILE *f = fopen("/proc/self/maps", "r");
    %s();
    while (fgets(line, sizeof line, f)) {
        char *p = strchr(line, '/');
        if (p && strstr(p, "/libdemo.so")) { fputs(p, stdout); break; }
    }
    return 0;
}
"""


def loaded_libdemo(prog: Path, **env: str) -> str:
    """Run *prog* and return the path of the libdemo it actually mapped."""
    out = subprocess.run([str(prog)], env=clean_env(**env), capture_output=True, text=True, check=True)
    return out.stdout.strip()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """libdemo.so.1 built into two directories, A and B, plus sources."""
    if shutil.which("gcc") is None:
        pytest.fail("needs gcc")
    top = tmp_path_factory.mktemp("demo")
    paths = {"top": top}
    for name in ("A", "B"):
        d = top / name
        d.mkdir()
        src = top / f"demo{name}.c"
        src.write_text(DEMO_C % name)
        gcc("-shared", "-fPIC", "-Wl,-soname,libdemo.so.1", "-o", d / "libdemo.so.1", src)
        paths[name] = d
    (top / "prog.c").write_text(PROG_C % ("demo_id", "demo_id"))
    (top / "progmid.c").write_text(PROG_C % ("mid_id", "mid_id"))
    (top / "mid.c").write_text(MID_C)
    return paths


def build_prog(demo: dict[str, Path], out: Path, *ldflags: str, source: str = "prog.c", link: Path | None = None) -> Path:
    gcc("-o", out, demo["top"] / source, link or demo["A"] / "libdemo.so.1", *ldflags)
    return out


# --------------------------------------------------------------------------
# small pure functions
# --------------------------------------------------------------------------


def test_parse_glibc_version() -> None:
    assert parse_glibc_version("GLIBC_2.34") == (2, 34)
    assert parse_glibc_version("GLIBC_2.2.5") == (2, 2)
    assert parse_glibc_version("GLIBC_PRIVATE") is None
    assert parse_glibc_version("GLIBCXX_3.4.29") is None
    assert parse_glibc_version("GCC_3.0") is None


def test_is_glibc() -> None:
    for name in ("libc.so.6", "libm.so.6", "libpthread.so.0", "libnss_files.so.2", "libnss_sss.so.2",
                 "ld-linux-x86-64.so.2", "ld-linux.so.2", "libmvec.so.1", "libmemusage.so",
                 "/lib/x86_64-linux-gnu/libc.so.6"):
        assert is_glibc(name), name
    for name in ("libmpi.so.40", "libucp.so.0", "libstdc++.so.6", "libgcc_s.so.1", "libnsl.so.2", "libz.so.1"):
        assert not is_glibc(name), name
    assert "libc.so.6" in GLIBC_SONAMES


# --------------------------------------------------------------------------
# read_elf
# --------------------------------------------------------------------------


def test_read_elf_libc() -> None:
    info = read_elf(LIBDIR / "libc.so.6")
    assert info.soname == "libc.so.6"
    assert info.elf_class == 64 and info.machine == "EM_X86_64"
    assert {"GLIBC_2.2.5", "GLIBC_2.34", "GLIBC_PRIVATE"} <= info.version_defs
    assert "libc.so.6" not in info.version_defs  # the base definition is the file's name
    assert "ld-linux-x86-64.so.2" in info.needed


@needs_mpich
def test_read_elf_libmpich_against_readelf() -> None:
    info = read_elf(str(LIBMPICH))
    assert info.path == str(LIBMPICH)
    assert info.soname == "libmpich.so.12"
    assert info.interp is None
    out = subprocess.run(["readelf", "-dW", str(LIBMPICH)], capture_output=True, text=True, check=True).stdout
    assert list(info.needed) == re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", out)
    vout = subprocess.run(["readelf", "-VW", str(LIBMPICH)], capture_output=True, text=True, check=True).stdout
    libc_block = vout.split(".gnu.version_r", 1)[1].split("File: libc.so.6", 1)[1].split("File:")[0]
    assert info.version_needs["libc.so.6"] == frozenset(re.findall(r"Name: (GLIBC_[\w.]+)\s+Flags", libc_block))
    assert set(info.version_needs) == set(re.findall(r"File: (\S+)", vout.split(".gnu.version_r", 1)[1]))


def test_read_elf_program_interp() -> None:
    info = read_elf("/bin/sh")
    assert info.interp == "/lib64/ld-linux-x86-64.so.2"


def test_read_elf_errors(tmp_path: Path) -> None:
    text = tmp_path / "notelf.so"
    text.write_text("INPUT(-lc)\n")
    with pytest.raises(NearmetalError, match="not an ELF"):
        read_elf(text)
    with pytest.raises(NearmetalError, match="cannot read"):
        read_elf(tmp_path / "missing.so")
    with pytest.raises(NearmetalError):
        read_elf(tmp_path)
    trunc = tmp_path / "trunc.so"
    trunc.write_bytes((LIBDIR / "libc.so.6").read_bytes()[:100])
    with pytest.raises(NearmetalError):
        read_elf(trunc)


@needs_mpich
def test_read_elf_cache_keeps_given_path(tmp_path: Path) -> None:
    link = tmp_path / "libmpich-alias.so"
    link.symlink_to(LIBMPICH)
    a = read_elf(LIBMPICH)
    b = read_elf(link)
    assert b.path == str(link) and a.path == str(LIBMPICH)
    assert a.needed == b.needed and a.version_needs == b.version_needs


# --------------------------------------------------------------------------
# ld.so.cache
# --------------------------------------------------------------------------


def ldconfig_p(cache: Path | None = None) -> list[tuple[str, str, str]]:
    cmd = ["ldconfig", "-p"] + (["-C", str(cache)] if cache else [])
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return re.findall(r"^\t(\S+) \(([^)]*)\) => (\S+)$", out, flags=re.M)


def test_parse_ld_so_cache_matches_ldconfig() -> None:
    expected = [(name, path) for name, kind, path in ldconfig_p() if kind.startswith("libc6,x86-64")]
    assert expected, "ldconfig -p listed nothing"
    assert parse_ld_so_cache("/etc/ld.so.cache", x86_64_only=True) == expected
    assert len(parse_ld_so_cache("/etc/ld.so.cache")) == len(ldconfig_p())
    assert all(e.flags == FLAGS_X86_64 for e in read_ld_so_cache("/etc/ld.so.cache") if e.is_x86_64)


def test_parse_ld_so_cache_missing(tmp_path: Path) -> None:
    assert parse_ld_so_cache(tmp_path / "nope") == []
    bad = tmp_path / "bad.cache"
    bad.write_bytes(b"garbage" * 10)
    with pytest.raises(NearmetalError):
        parse_ld_so_cache(bad)


def test_parse_ld_so_cache_formats(tmp_path: Path, demo: dict[str, Path]) -> None:
    """Old (ld.so-1.7.0), compat (old + new) and new formats give the same entries."""
    results = {}
    for fmt in ("new", "compat", "old"):
        cache = tmp_path / f"{fmt}.cache"
        r = subprocess.run(
            ["ldconfig", "-c", fmt, "-C", str(cache), "-f", "/dev/null", str(demo["B"])],
            capture_output=True, text=True,
        )
        if r.returncode != 0 or not cache.exists():
            pytest.fail(f"ldconfig cannot write a {fmt} cache here: {r.stderr.strip()}")
        results[fmt] = parse_ld_so_cache(cache)
        expected = [(n, p) for n, _kind, p in ldconfig_p(cache)]
        assert results[fmt] == expected, fmt
    assert results["new"] == results["compat"] == results["old"]
    assert ("libdemo.so.1", str(demo["B"] / "libdemo.so.1")) in results["new"]
    assert (tmp_path / "old.cache").read_bytes().startswith(b"ld.so-1.7.0")
    assert b"glibc-ld.so.cache1.1" not in (tmp_path / "old.cache").read_bytes()


# --------------------------------------------------------------------------
# host closures vs ldd
# --------------------------------------------------------------------------


@needs_ldd
@pytest.mark.parametrize("lib", [LIBMPICH, LIBMPI], ids=lambda p: p.name)
def test_closure_matches_ldd(lib: Path) -> None:
    if not lib.exists():
        pytest.fail(f"{lib} not installed")
    closure = LinkerView("/").closure(str(lib))
    expected = ldd_non_glibc(lib)
    assert {c.soname: c.path for c in closure} == expected
    assert {os.path.realpath(c.host_path) for c in closure} == {os.path.realpath(p) for p in expected.values()}
    assert all(not is_glibc(c.soname) for c in closure)
    assert all(c.info.path == c.path for c in closure)


@pytest.mark.parametrize("lib", [LIBMPICH, LIBMPI], ids=lambda p: p.name)
def test_closure_is_topological(lib: Path) -> None:
    if not lib.exists():
        pytest.fail(f"{lib} not installed")
    closure = LinkerView("/").closure(str(lib))
    position = {c.soname: i for i, c in enumerate(closure)}
    assert len(position) == len(closure), "a soname appears twice"
    for i, c in enumerate(closure):
        for dep in c.info.needed:
            if not is_glibc(dep):
                assert position[dep] < i, f"{c.soname} listed before its dependency {dep}"


@needs_ldd
def test_closure_of_plugins_matches_ldd() -> None:
    """Open MPI components (DT_RUNPATH) and UCX plugins, as dlopen would load them."""
    plugins = sorted((LIBDIR / "openmpi/lib/openmpi3").glob("mca_*.so"))[::6] + sorted((LIBDIR / "ucx").glob("*.so.0"))
    if not plugins:
        pytest.fail("no MPI plugins installed")
    view = LinkerView("/")
    for plugin in plugins:
        expected = ldd_non_glibc(plugin)
        if "not found" in expected.values():
            with pytest.raises(NearmetalError, match="cannot find"):
                view.closure(str(plugin))
            continue
        got = {c.soname: c.path for c in view.closure(str(plugin))}
        assert got == expected, plugin


@needs_mpich
def test_closure_with_glibc() -> None:
    closure = LinkerView("/").closure(str(LIBMPICH), skip_glibc=False)
    names = {c.soname for c in closure}
    assert {"libc.so.6", "libm.so.6"} <= names
    position = {c.soname: i for i, c in enumerate(closure)}
    for i, c in enumerate(closure):
        for dep in c.info.needed:
            assert position[dep] <= i or dep == c.soname


# --------------------------------------------------------------------------
# search order, checked against the real loader
# --------------------------------------------------------------------------


@needs_ldd
@pytest.mark.parametrize(
    "dtags, llp, expect_dir, expect_via",
    [
        ("--disable-new-dtags", None, "A", "rpath"),
        ("--disable-new-dtags", "B", "A", "rpath"),  # RPATH beats LD_LIBRARY_PATH
        ("--enable-new-dtags", None, "A", "runpath"),
        ("--enable-new-dtags", "B", "B", "LD_LIBRARY_PATH"),  # LD_LIBRARY_PATH beats RUNPATH
    ],
)
def test_rpath_runpath_ld_library_path(
    demo: dict[str, Path], tmp_path: Path, dtags: str, llp: str | None, expect_dir: str, expect_via: str
) -> None:
    prog = build_prog(demo, tmp_path / "prog", f"-Wl,{dtags}", f"-Wl,-rpath,{demo['A']}")
    info = read_elf(prog)
    if dtags == "--disable-new-dtags":
        assert info.rpath == (str(demo["A"]),) and info.runpath == ()
    else:
        assert info.runpath == (str(demo["A"]),) and info.rpath == ()

    env = {"LD_LIBRARY_PATH": str(demo[llp])} if llp else {}
    view = LinkerView("/", ld_library_path=[str(demo[llp])] if llp else [])
    (lib,) = [c for c in view.closure(str(prog)) if c.soname == "libdemo.so.1"]
    assert lib.path == str(demo[expect_dir] / "libdemo.so.1")
    assert lib.found_via == expect_via
    # The real loader agrees, both in trace mode and for real.
    assert ldd(prog, **env)["libdemo.so.1"] == lib.path
    assert loaded_libdemo(prog, **env) == os.path.realpath(lib.path)


@needs_ldd
@pytest.mark.parametrize("mid_dtags", ["--disable-new-dtags", "--enable-new-dtags"])
def test_executable_rpath_applies_to_dependencies(demo: dict[str, Path], tmp_path: Path, mid_dtags: str) -> None:
    """The executable's DT_RPATH is searched for a library's needs, unless that library has a DT_RUNPATH."""
    mid_dir = tmp_path / "mid"
    mid_dir.mkdir()
    gcc("-shared", "-fPIC", "-Wl,-soname,libmid.so.1", f"-Wl,{mid_dtags}", f"-Wl,-rpath,{demo['B']}",
        "-o", mid_dir / "libmid.so.1", demo["top"] / "mid.c", demo["B"] / "libdemo.so.1")
    # prog needs only libmid; its DT_RPATH lists mid_dir and A.
    prog = tmp_path / "prog"
    gcc("-o", prog, demo["top"] / "progmid.c", mid_dir / "libmid.so.1", "-Wl,--disable-new-dtags",
        f"-Wl,-rpath,{mid_dir}:{demo['A']}", "-Wl,--allow-shlib-undefined")
    assert "libdemo.so.1" not in read_elf(prog).needed
    closure = {c.soname: c for c in LinkerView("/").closure(str(prog))}
    # libmid has DT_RPATH B: searched first.  With DT_RUNPATH B: the
    # executable's RPATH (A) is not used for libmid's needs, B (runpath) is.
    assert closure["libdemo.so.1"].path == str(demo["B"] / "libdemo.so.1")
    assert ldd(prog)["libdemo.so.1"] == closure["libdemo.so.1"].path
    assert loaded_libdemo(prog) == os.path.realpath(closure["libdemo.so.1"].path)

    # Now a libmid with no search path of its own: the executable's RPATH wins.
    gcc("-shared", "-fPIC", "-Wl,-soname,libmid.so.1", "-o", mid_dir / "libmid.so.1",
        demo["top"] / "mid.c", demo["B"] / "libdemo.so.1")
    closure = {c.soname: c for c in LinkerView("/", ld_library_path=[str(demo["B"])]).closure(str(prog))}
    assert closure["libdemo.so.1"].path == str(demo["A"] / "libdemo.so.1")
    assert closure["libdemo.so.1"].found_via == "rpath"
    assert ldd(prog, LD_LIBRARY_PATH=str(demo["B"]))["libdemo.so.1"] == closure["libdemo.so.1"].path


@needs_ldd
@pytest.mark.parametrize("token", ["$ORIGIN", "${ORIGIN}"])
@pytest.mark.parametrize("dtags", ["--disable-new-dtags", "--enable-new-dtags"])
def test_origin_expansion(demo: dict[str, Path], tmp_path: Path, token: str, dtags: str) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "lib").mkdir()
    shutil.copy2(demo["B"] / "libdemo.so.1", tmp_path / "lib" / "libdemo.so.1")
    prog = build_prog(demo, tmp_path / "bin" / "prog", f"-Wl,{dtags}", f"-Wl,-rpath,{token}/../lib")
    info = read_elf(prog)
    assert (info.rpath or info.runpath) == (f"{token}/../lib",)
    (lib,) = LinkerView("/").closure(str(prog))
    # Like ld.so, the path is not cleaned up lexically.
    assert lib.path == f"{tmp_path}/bin/../lib/libdemo.so.1"
    assert lib.host_path == tmp_path / "lib" / "libdemo.so.1"
    assert ldd(prog)["libdemo.so.1"] == lib.path
    assert loaded_libdemo(prog) == os.path.realpath(lib.path)


@needs_ldd
def test_origin_of_symlinked_library_is_where_it_was_found(demo: dict[str, Path], tmp_path: Path) -> None:
    """ld.so takes a library's $ORIGIN from the path it found it at, not from its realpath."""
    real, found = tmp_path / "real", tmp_path / "found"
    for d in (real / "sub", found / "sub"):
        d.mkdir(parents=True)
    shutil.copy2(demo["A"] / "libdemo.so.1", real / "sub" / "libdemo.so.1")
    shutil.copy2(demo["B"] / "libdemo.so.1", found / "sub" / "libdemo.so.1")
    gcc("-shared", "-fPIC", "-Wl,-soname,libmid.so.1", "-Wl,--disable-new-dtags", "-Wl,-rpath,$ORIGIN/sub",
        "-o", real / "libmid.so.1", demo["top"] / "mid.c", real / "sub" / "libdemo.so.1")
    (found / "libmid.so.1").symlink_to(real / "libmid.so.1")
    prog = tmp_path / "prog"
    gcc("-o", prog, demo["top"] / "progmid.c", found / "libmid.so.1", f"-Wl,-rpath,{found}",
        "-Wl,--allow-shlib-undefined")
    closure = {c.soname: c for c in LinkerView("/").closure(str(prog))}
    assert closure["libmid.so.1"].path == str(found / "libmid.so.1")
    assert closure["libdemo.so.1"].path == str(found / "sub" / "libdemo.so.1")
    assert ldd(prog)["libdemo.so.1"] == closure["libdemo.so.1"].path
    assert loaded_libdemo(prog) == os.path.realpath(closure["libdemo.so.1"].path)


@needs_ldd
def test_wrong_machine_is_skipped(demo: dict[str, Path], tmp_path: Path) -> None:
    """A same-named library for another machine is passed over, as ld.so does."""
    bad = tmp_path / "bad"
    bad.mkdir()
    data = bytearray((demo["A"] / "libdemo.so.1").read_bytes())
    data[18:20] = (183).to_bytes(2, "little")  # EM_AARCH64
    (bad / "libdemo.so.1").write_bytes(bytes(data))
    assert read_elf(bad / "libdemo.so.1").machine == "EM_AARCH64"
    prog = build_prog(demo, tmp_path / "prog")
    llp = f"{bad}:{demo['B']}"
    (lib,) = LinkerView("/", ld_library_path=[llp]).closure(str(prog))
    assert lib.path == str(demo["B"] / "libdemo.so.1") and lib.found_via == "LD_LIBRARY_PATH"
    assert ldd(prog, LD_LIBRARY_PATH=llp)["libdemo.so.1"] == lib.path
    assert loaded_libdemo(prog, LD_LIBRARY_PATH=llp) == os.path.realpath(lib.path)
    with pytest.raises(NearmetalError, match="wrong architecture"):
        LinkerView("/").closure(str(bad / "libdemo.so.1"))


def test_missing_dependency_message(demo: dict[str, Path], tmp_path: Path) -> None:
    prog = build_prog(demo, tmp_path / "prog", f"-Wl,-rpath,{tmp_path / 'nowhere'}")
    with pytest.raises(NearmetalError) as excinfo:
        LinkerView("/").closure(str(prog))
    msg = str(excinfo.value)
    assert msg.startswith(f"cannot find libdemo.so.1 needed by {prog} (searched: ")
    assert str(tmp_path / "nowhere") in msg and "ld.so.cache" in msg and "\n" not in msg


def test_preload(demo: dict[str, Path], tmp_path: Path) -> None:
    prog = build_prog(demo, tmp_path / "prog", f"-Wl,-rpath,{demo['A']}")
    view = LinkerView("/", preload=[str(demo["B"] / "libdemo.so.1")])
    (lib,) = view.closure(str(prog))
    assert lib.path == str(demo["B"] / "libdemo.so.1") and lib.found_via == "preloaded"
    out = loaded_libdemo(prog, LD_PRELOAD=str(demo["B"] / "libdemo.so.1"))
    assert out == os.path.realpath(lib.path)


# --------------------------------------------------------------------------
# a container rootfs
# --------------------------------------------------------------------------


@pytest.fixture
def rootfs(demo: dict[str, Path], tmp_path: Path) -> Path:
    """A fake Debian-like rootfs: usrmerge, absolute symlinks, a fake libnuma."""
    root = tmp_path / "rootfs"
    libdir = root / "usr/lib/x86_64-linux-gnu"
    libdir.mkdir(parents=True)
    (root / "usr/bin").mkdir()
    (root / "etc").mkdir()
    (root / "lib").symlink_to("usr/lib")
    (root / "lib64").symlink_to("usr/lib64")  # dangling, like a minimal image might have
    # Our own "libnuma" with the real one's soname and file name: the host has
    # /usr/lib/x86_64-linux-gnu/libnuma.so.1.0.0 too, and must not be used.
    gcc("-shared", "-fPIC", "-Wl,-soname,libnuma.so.1", "-o", libdir / "libnuma.so.1.0.0", demo["top"] / "demoA.c")
    (libdir / "libnuma.so.1").symlink_to("/usr/lib/x86_64-linux-gnu/libnuma.so.1.0.0")
    gcc("-o", root / "usr/bin/prog", demo["top"] / "prog.c", libdir / "libnuma.so.1.0.0")
    (root / "escape").symlink_to("../../../../../../../../etc")
    (root / "abs-escape").symlink_to("/../../etc/../..")
    return root


def test_rootfs_host_path(rootfs: Path) -> None:
    view = LinkerView(rootfs)
    libdir = rootfs / "usr/lib/x86_64-linux-gnu"
    assert view.host_path("/lib/x86_64-linux-gnu/libnuma.so.1") == libdir / "libnuma.so.1.0.0"
    assert view.host_path("/usr/lib/x86_64-linux-gnu/libnuma.so.1") == libdir / "libnuma.so.1.0.0"
    assert view.host_path("/escape/passwd") == rootfs / "etc/passwd"
    assert view.host_path("/../../../etc/passwd") == rootfs / "etc/passwd"
    assert view.host_path("/abs-escape/etc") == rootfs / "etc"
    assert view.host_path("/lib64/ld-linux-x86-64.so.2") == rootfs / "usr/lib64/ld-linux-x86-64.so.2"
    assert view.host_path("/") == rootfs
    loop = rootfs / "loop"
    loop.symlink_to("/loop")
    with pytest.raises(NearmetalError, match="symbolic links"):
        view.host_path("/loop/x")


def test_rootfs_closure_stays_inside(rootfs: Path) -> None:
    view = LinkerView(rootfs)
    (lib,) = view.closure("/usr/bin/prog")
    assert lib.soname == "libnuma.so.1"
    assert lib.path == "/lib/x86_64-linux-gnu/libnuma.so.1"  # first default dir, as ld.so would report it
    assert lib.found_via == "default"  # the rootfs has no ld.so.cache
    assert lib.host_path == rootfs / "usr/lib/x86_64-linux-gnu/libnuma.so.1.0.0"
    assert lib.info.path == lib.path
    assert lib.info.soname == "libnuma.so.1"
    # It is our fake, not the host's real libnuma (which defines symbol versions).
    assert lib.info.version_defs == frozenset()
    assert os.path.realpath(lib.host_path).startswith(str(rootfs) + "/")

    # No glibc in this rootfs: found missing when glibc is not skipped, never
    # taken from the host.
    with pytest.raises(NearmetalError, match=r"cannot find libc\.so\.6 needed by /usr/bin/prog"):
        view.closure("/usr/bin/prog", skip_glibc=False)
    assert glibc_version(rootfs) is None

    # Give it a glibc (a copy of the host's): now it is complete.
    libdir = rootfs / "usr/lib/x86_64-linux-gnu"
    shutil.copy2(os.path.realpath("/lib/x86_64-linux-gnu/libc.so.6"), libdir / "libc.so.6")
    assert glibc_version(rootfs) == host_glibc()
    with pytest.raises(NearmetalError, match=r"cannot find ld-linux-x86-64\.so\.2 needed by /lib/x86_64-linux-gnu/libc\.so\.6"):
        view.closure("/usr/bin/prog", skip_glibc=False)
    shutil.copy2(os.path.realpath("/lib64/ld-linux-x86-64.so.2"), libdir / "ld-linux-x86-64.so.2")
    (rootfs / "usr/lib64").mkdir()
    (rootfs / "usr/lib64/ld-linux-x86-64.so.2").symlink_to("/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2")
    full = view.closure("/usr/bin/prog", skip_glibc=False)
    assert {c.soname: c.found_via for c in full} == {
        "ld-linux-x86-64.so.2": "preloaded",  # the program interpreter
        "libc.so.6": "default",
        "libnuma.so.1": "default",
    }
    assert all(os.path.realpath(c.host_path).startswith(str(rootfs) + "/") for c in full)

    # Remove the library: the host's copy must not be picked up.
    (rootfs / "usr/lib/x86_64-linux-gnu/libnuma.so.1.0.0").unlink()
    with pytest.raises(NearmetalError, match=r"cannot find libnuma\.so\.1 needed by /usr/bin/prog"):
        view.closure("/usr/bin/prog")


def test_rootfs_runpath_origin_and_ld_library_path(rootfs: Path, demo: dict[str, Path]) -> None:
    opt = rootfs / "opt/app"
    (opt / "bin").mkdir(parents=True)
    (opt / "lib").mkdir()
    shutil.copy2(demo["B"] / "libdemo.so.1", opt / "lib" / "libdemo.so.1")
    build_prog(demo, opt / "bin" / "prog", "-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN/../lib")
    # /opt/app/bin/app -> absolute symlink; $ORIGIN of the executable is its real directory.
    (rootfs / "usr/bin/app").symlink_to("/opt/app/bin/prog")
    (lib,) = LinkerView(rootfs).closure("/usr/bin/app")
    assert lib.path == "/opt/app/bin/../lib/libdemo.so.1" and lib.found_via == "runpath"
    assert lib.host_path == opt / "lib" / "libdemo.so.1"
    # LD_LIBRARY_PATH (in-root) beats RUNPATH.
    (rootfs / "other").mkdir()
    shutil.copy2(demo["A"] / "libdemo.so.1", rootfs / "other" / "libdemo.so.1")
    (lib,) = LinkerView(rootfs, ld_library_path=["/other"]).closure("/opt/app/bin/prog")
    assert lib.path == "/other/libdemo.so.1" and lib.found_via == "LD_LIBRARY_PATH"


def test_rootfs_ld_so_cache(rootfs: Path, demo: dict[str, Path]) -> None:
    """A cache made by the real ldconfig inside the rootfs is used, with in-root paths."""
    fake = rootfs / "opt/fake/lib"
    fake.mkdir(parents=True)
    shutil.copy2(demo["B"] / "libdemo.so.1", fake / "libdemo.so.1")
    (rootfs / "etc/ld.so.conf").write_text("/opt/fake/lib\n")
    subprocess.run(["ldconfig", "-r", str(rootfs)], check=True, capture_output=True)
    pairs = parse_ld_so_cache(rootfs / "etc/ld.so.cache", x86_64_only=True)
    assert ("libdemo.so.1", "/opt/fake/lib/libdemo.so.1") in pairs
    assert ("libnuma.so.1", "/lib/x86_64-linux-gnu/libnuma.so.1") in pairs or (
        "libnuma.so.1", "/usr/lib/x86_64-linux-gnu/libnuma.so.1") in pairs

    view = LinkerView(rootfs)
    prog = view.read_elf("/usr/bin/prog")
    lib = view.resolve("libdemo.so.1", prog)
    assert lib is not None and lib.found_via == "ld.so.cache"
    assert lib.path == "/opt/fake/lib/libdemo.so.1" and lib.host_path == fake / "libdemo.so.1"
    assert LinkerView(rootfs, use_cache=False).resolve("libdemo.so.1", prog) is None


# --------------------------------------------------------------------------
# glibc versions
# --------------------------------------------------------------------------


def host_glibc() -> tuple[int, int]:
    out = subprocess.run(["getconf", "GNU_LIBC_VERSION"], capture_output=True, text=True, check=True).stdout
    major, minor = re.fullmatch(r"glibc (\d+)\.(\d+)\S*\s*", out).groups()  # type: ignore[union-attr]
    return int(major), int(minor)


def test_glibc_version_host() -> None:
    assert glibc_version("/") == host_glibc()


@needs_mpich
def test_glibc_requirement_libmpich() -> None:
    closure = LinkerView("/").closure(str(LIBMPICH))
    req = glibc_requirement(closure)
    assert req is not None
    (major, minor), who = req
    assert major == 2 and minor <= host_glibc()[1]
    assert who in {c.path for c in closure}
    # It really is the maximum over the closure's GLIBC_ needs.
    tags = {parse_glibc_version(t) for c in closure for ts in c.info.version_needs.values() for t in ts}
    assert (major, minor) == max(t for t in tags if t)
    # Works on ElfInfo too; nothing needed -> None.
    assert glibc_requirement([c.info for c in closure]) == req
    assert glibc_requirement([]) is None


@needs_mpich
def test_elfinfo_is_hashable() -> None:
    info = read_elf(LIBMPICH)
    assert isinstance(info, ElfInfo)
    assert {info: 1}[info] == 1
