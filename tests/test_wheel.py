"""The package boundary: a wheel built from this checkout carries the kernels' C sources and
the `nearmetal` script, and the copy it installs — not the checkout — builds the kernels
into $NEARMETAL_HOME (writing nothing into the installed package) and runs them.

No network: the wheel is built without build isolation (setuptools from the `test` extra)
and installed with --no-deps --no-index into a fresh virtual environment made without pip.
The third-party dependencies (pyelftools, rich, ...) are borrowed from the environment
running the tests through a plain path entry in a .pth file: a plain entry's own .pth files
are not processed, so the editable install's pointer to the checkout's src/ stays out, and
the test checks that `nearmetal` and its kernel sources resolve inside the fresh environment.
"""

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile

import pytest

from conftest import REPO

pytestmark = pytest.mark.integration

CSRC = REPO / "src" / "nearmetal" / "kernels" / "csrc"
# What the build reads: pyproject.toml, its readme, its script-files and the packages.
BUILD_INPUTS = ("pyproject.toml", "README.md", "bin", "src")
FAMILY = "openmpi"


def _kernel_sources(root):
    """Files under the kernels' source directory, by the rule image.py copies them into an
    image: no dot entries, no build/ directories, no objects."""
    out = set()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != "build" and not d.startswith(".")]
        for f in filenames:
            if not f.startswith(".") and not f.endswith((".o", ".so")):
                out.add(os.path.relpath(os.path.join(dirpath, f), root))
    return out


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The wheel, built from a copy of the checkout (setuptools writes build/ and *.egg-info
    next to its sources; other work in the checkout must not see or feed them)."""
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", ".*")
    for name in BUILD_INPUTS:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, src / name, ignore=ignore)
        else:
            src.mkdir(exist_ok=True)
            shutil.copy2(REPO / name, src / name)
    dist = base / "dist"
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                          "-q", "-w", str(dist), str(src)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"building the wheel failed (setuptools>=70.1 from the test extra?):\n{out.stderr}"
    wheels = list(dist.glob("nearmetal-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_wheel_carries_kernel_sources_script_and_runtime_deps(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        meta = next(z.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    prefix = "nearmetal/kernels/csrc/"
    packaged = {n[len(prefix):] for n in names if n.startswith(prefix)}
    assert packaged == _kernel_sources(CSRC), "the wheel must carry exactly the kernels' sources"
    assert {"Makefile", "nm-mpi-info.c", "common/osu.c", "iobench/iobench.mk", "data/metadata/gen.c"} <= packaged
    assert "nearmetal/supervise/nm-supervise.c" in names
    assert "nearmetal/runtimes/nm-envfwd.c" in names  # apptainer --cleanenv: built on first use
    from nearmetal.trace.build import HEADERS, SOURCES  # nm-trace.so: built on first `trace`
    assert {f"nearmetal/trace/csrc/{f}" for f in SOURCES + HEADERS} <= names
    from nearmetal.evidence import build as evidence_build  # nm-evidence.so: built on a study's first run

    assert {f"nearmetal/evidence/csrc/{f}" for f in evidence_build.SOURCES + evidence_build.HEADERS} <= names
    assert any(n.endswith(".data/scripts/nearmetal") for n in names), "bin/nearmetal must be installed"
    runtime = [line.split(":", 1)[1].strip() for line in meta.splitlines()
               if line.startswith("Requires-Dist:") and "extra ==" not in line]
    names_only = {r.split(">")[0].split("=")[0].split("<")[0].split(";")[0].strip().lower() for r in runtime}
    assert "pyelftools" in names_only
    assert not names_only & {"click", "jsonschema", "pytest", "setuptools"}, runtime


def _snapshot(root):
    """Every file of the installed package but byte code: path -> (size, mtime)."""
    snap = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for f in filenames:
            st = os.stat(os.path.join(dirpath, f))
            snap[os.path.relpath(os.path.join(dirpath, f), root)] = (st.st_size, st.st_mtime_ns)
    return snap


def test_installed_wheel_builds_and_runs_kernels(wheel, tmp_path, host_mpis):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    out = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", "--no-index",
                          str(wheel)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    with open(os.path.join(site, "_nearmetal_test_deps.pth"), "w") as f:
        f.write("".join(d + "\n" for d in sorted(deps)))

    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "NEARMETAL_HOME")}
    env.update(NEARMETAL_HOME=str(home), PYTHONNOUSERSITE="1", PYTHONDONTWRITEBYTECODE="1",
               PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    script = venv / "bin" / "nearmetal"
    assert script.read_text().startswith(f"#!{py}"), "the script must run the fresh environment's interpreter"

    def run(*argv, timeout=300):
        return subprocess.run([str(a) for a in argv], capture_output=True, text=True, env=env, cwd=tmp_path,
                              timeout=timeout, stdin=subprocess.DEVNULL)

    where = run(py, "-c", "import sys, nearmetal, nearmetal.home as h; "
                "print(nearmetal.__file__); print(h.KERNELS_SRC_STR); print(sys.argv[1] in sys.path)", REPO / "src")
    assert where.returncode == 0, where.stderr
    pkg_file, kernels_src, checkout_on_path = where.stdout.split("\n")[:3]
    pkg = os.path.join(site, "nearmetal")
    assert pkg_file == os.path.join(pkg, "__init__.py")
    assert kernels_src == os.path.join(pkg, "kernels", "csrc")
    assert checkout_on_path == "False"

    before = _snapshot(pkg)
    built = run(script, "kernels", "build", "--mpi", FAMILY)
    assert built.returncode == 0, built.stderr
    bindir = home / "host" / FAMILY / "bin"
    assert f"{FAMILY}: {bindir}" in built.stdout
    assert os.access(bindir / "nm-mpi-info", os.X_OK)
    assert _snapshot(pkg) == before, "building the kernels wrote into the installed package"

    ran = run(script, "run", "-n", 2, "--mpi", FAMILY, "--", "nm-mpi-info", timeout=120)
    assert ran.returncode == 0, ran.stderr
    lines = sorted(line for line in ran.stdout.splitlines() if line.startswith("rank="))
    assert [line.split()[:2] for line in lines] == [["rank=0", "size=2"], ["rank=1", "size=2"]], ran.stdout
    assert _snapshot(pkg) == before
