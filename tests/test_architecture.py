"""Where knowledge lives: a runtime and its image format are the only code that names podman,
the image package learns everything MPI-specific from the family profiles, and image
formats are backends of a registry that the command line offers."""

import ast
import functools
import re
from dataclasses import fields
from pathlib import Path

import pytest

import nearmetal
from nearmetal import families
from nearmetal.cli_parser import build_parser
from nearmetal.image import Image, ImageRef
from nearmetal.image.formats import FORMATS
from nearmetal.runtimes import RUNTIMES

pytestmark = pytest.mark.unit  # reads source files and imports modules: no process, no container

SRC = Path(nearmetal.__file__).parent


@functools.lru_cache(maxsize=None)
def _parsed(path, stamp):
    return ast.parse(path.read_text(), filename=str(path))


@functools.lru_cache(maxsize=None)
def _walked(path, stamp):
    return tuple(ast.walk(_parsed(path, stamp)))


def _stamp(path):
    st = path.stat()
    return st.st_mtime_ns, st.st_size


def _tree(path):
    """A module's syntax tree, parsed once for all the tests that read it (keyed by its
    modification time and size: a file a test writes and changes is parsed again)."""
    return _parsed(path, _stamp(path))


def _nodes(path):
    """Every node of a module's tree (ast.walk's order), listed once for all the tests."""
    return _walked(path, _stamp(path))


def _string_constants(path):
    """Every string literal of a module (docstrings and f-string parts included)."""
    return [node.value for node in _nodes(path) if isinstance(node, ast.Constant) and isinstance(node.value, str)]


def _modules(under=SRC):
    return sorted(under.rglob("*.py"))


def test_only_the_podman_runtime_and_format_name_podman():
    allowed = {"runtimes/podman.py", "runtimes/__init__.py",  # the runtimes' default order
               "image/formats/podman.py"}
    naming = {str(p.relative_to(SRC)) for p in _modules() if "podman" in _string_constants(p)}
    strays = {p for p in naming if p not in allowed and not re.fullmatch(r"runtimes/_podman\w*\.py", p)}
    assert not strays, f'"podman" as a value outside the podman runtime and format: {sorted(strays)}'


def test_image_package_names_no_mpi_family():
    word = re.compile(r"\b(" + "|".join(map(re.escape, families.names())) + r")\b")
    found = {f"{p.relative_to(SRC)}: {text!r}"
             for p in _modules(SRC / "image") for text in _string_constants(p) if word.search(text)}
    assert not found, "the image package must ask the family profiles (nearmetal.families):\n" + "\n".join(sorted(found))


def test_every_family_profile_says_what_an_image_installs():
    for name in families.names():
        family = families.get(name)
        assert family.image_packages and family.pkgconfig and family.image_launchers, name
        assert family.library_re().match(family.sonames[0]), (name, family.library_pattern)


def test_image_formats_are_a_registry_with_the_directory_first():
    names = FORMATS.names()
    assert names[0] == "dir" and {"squashfs", "podman"} <= set(names)
    # one ImageRef per format, no field per format
    assert {f.name for f in fields(Image)} == {"name", "rootfs", "distro", "mpis", "meta", "refs"}
    suffixes = []
    for name in names:
        fmt = FORMATS.get(name)
        assert fmt.name == name and fmt.title and fmt.layout in ("directory", "file", "storage"), name
        if fmt.suffix:
            suffixes.append(fmt.suffix)
        if fmt.image_attr:  # an older attribute name reads the format's location
            image = Image("x", Path("/r"), refs=[ImageRef(name, Path(f"/x/{name}"))])
            assert getattr(image, fmt.image_attr) == Path(f"/x/{name}"), (name, fmt.image_attr)
    assert len(suffixes) == len(set(suffixes)) and {".sqfs", ".sif"} <= set(suffixes)


def test_a_runtime_starts_registered_image_formats():
    wanted = {cls.name: tuple(cls.formats) for cls in RUNTIMES.all()}
    assert wanted["podman"] == ("podman",)
    assert wanted["charliecloud"] == ("dir", "squashfs") and wanted["bwrap"] == ("dir",)  # the rootfs or .sqfs itself
    assert wanted["apptainer"][0] == "dir" and {"sif", "squashfs"} <= set(wanted["apptainer"])
    for runtime, fmts in wanted.items():
        assert fmts and set(fmts) <= set(FORMATS.names()), (runtime, fmts)


def test_image_build_offers_exactly_the_registered_formats(capsys):
    parser = build_parser()
    for name in FORMATS.names():
        assert parser.parse_args(["image", "build", "--format", name]).format == name
    assert parser.parse_args(["image", "build"]).format == "dir"
    with pytest.raises(SystemExit):
        parser.parse_args(["image", "build", "--format", "docker"])
    assert "invalid choice: 'docker'" in capsys.readouterr().err


def test_image_modules_stay_small():
    sizes = {str(p.relative_to(SRC)): len(p.read_text().splitlines()) for p in _modules(SRC / "image")}
    assert all(n <= 400 for n in sizes.values()), sizes


def test_mpi_family_names_live_only_in_the_profiles_and_launchers():
    names = set(families.names())
    naming = {str(p.relative_to(SRC)) for p in _modules() if names & set(_string_constants(p))}
    strays = {p for p in naming if not p.startswith(("families/", "launchers/"))}
    assert not strays, f"MPI family names as values outside families/ and launchers/: {sorted(strays)}"


def test_no_module_outside_the_schedulers_branches_on_a_scheduler_name():
    """`x == "slurm"` (or != / in) outside schedulers/ and launchers/ would be a scheduler branch."""
    from nearmetal.schedulers import names

    found = []
    for path in _modules():
        rel = str(path.relative_to(SRC))
        if rel.startswith(("schedulers/", "launchers/")):
            continue
        for node in _nodes(path):
            if isinstance(node, ast.Compare):
                consts = {c.value for c in [node.left, *node.comparators] if isinstance(c, ast.Constant)}
                if consts & set(names()):
                    found.append(f"{rel}:{node.lineno}")
    assert not found, f"comparisons with a scheduler's name: {found}"


def test_modules_stay_small():
    big = {str(p.relative_to(SRC)): n for p in _modules() if (n := len(p.read_text().splitlines())) > 430}
    assert not big, f"modules over ~430 lines: {big}"


def _docstrings(path):
    return {id(node.body[0].value) for node in _nodes(path)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def test_user_facing_text_explains_instead_of_citing_a_seed():
    """Warnings, errors and help say the mechanism in their own words; seeds (the studies
    nearmetal reproduces) are cited in docs, docstrings and the findings' references."""
    seed = re.compile(r"\bseeds? ?\d{3}\b", re.I)
    found = []
    for path in _modules():
        docs = _docstrings(path)
        found += [f"{path.relative_to(SRC)}:{node.lineno}" for node in _nodes(path)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
                  and seed.search(node.value)]
    assert not found, f"user-facing strings citing a seed: {found}"


# Comparisons whose string is not a backend's name, though spelled like one (the source text).
# And the few that are about one MPI model itself, not whether it runs in a container: the
# explainer of hybrid mode's own MPI (its ablation is bind), and the wording of answers
# measured against the default baseline, native ("natively"; no "vs Native" suffix).
NOT_A_BACKEND = {"study/config/ids.py": {"os.path.basename(shown) in ('usr', 'local')"},  # /usr/local path parts
                 "explain/explainers/mpi_library.py": {"slow.variant.get('mode') == 'hybrid'",
                                                       "base.variant.get('mode') != 'hybrid'"},
                 "analysis/answer_text.py": {"bd.get('mode') != 'native'"},
                 "analysis/answers.py": {"(meta or {}).get('mode') == 'native'"}}


def _backend_names():
    """{name: packages of the backends called so}: runtimes, image formats, networks, schedulers, MPI models."""
    from nearmetal import models, networks, schedulers

    out = {}
    for package, registry in (("runtimes", RUNTIMES), ("image/formats", FORMATS), ("networks", networks.NETWORKS),
                              ("schedulers", schedulers.SCHEDULERS), ("models", models.MODELS)):
        for name in registry.names():
            out.setdefault(name, []).append(package)
    return out


def _compared_strings(node):
    """The string constants a comparison tests against: `x == "a"`, `x in ("a", "b")`."""
    out = set()
    for side in [node.left, *node.comparators]:
        items = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
        out |= {c.value for c in items if isinstance(c, ast.Constant) and isinstance(c.value, str)}
    return out


def _own_module(rel, name, packages):
    """A backend's own module (or its private helpers, `_NAME*.py`), or its registry (`__init__.py`)."""
    path = Path(rel)
    return any(str(path.parent) == package and (path.stem in (name, "__init__") or path.stem.startswith(f"_{name}"))
               for package in packages)


def test_no_module_branches_on_a_backend_name():
    """`x == "host"`, `fmt != "dir"`, `runtime in ("podman", ...)` outside that backend's module
    and its registry would be a branch the backend should own (an attribute or method)."""
    names = _backend_names()
    assert {"charliecloud", "podman", "dir", "squashfs", "sif", "host", "isolated", "local", "slurm"} <= set(names)
    found = []
    for path in _modules():
        rel = str(path.relative_to(SRC))
        for node in _nodes(path):
            if not isinstance(node, ast.Compare) or ast.unparse(node) in NOT_A_BACKEND.get(rel, ()):
                continue
            for name in _compared_strings(node) & set(names):
                if not _own_module(rel, name, names[name]):
                    found.append(f"{rel}:{node.lineno} {name}: {ast.unparse(node)}")
    assert not found, "comparisons with a backend's name outside its module:\n" + "\n".join(found)


def test_the_backend_name_check_sees_what_it_must(tmp_path):
    """The check above finds each kind of comparison (a check that finds nothing proves nothing)."""
    names = _backend_names()
    code = ("a == 'host'\nb != 'squashfs'\nc in ('x', 'podman')\nd not in ['slurm']\ne == 'hostname'\n"
            "f = {'dir': 1}\n")
    hits = [_compared_strings(n) & set(names) for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Compare)]
    assert hits == [{"host"}, {"squashfs"}, {"podman"}, {"slurm"}, set()]
    assert _own_module("networks/host.py", "host", names["host"]) and _own_module("networks/__init__.py", "host", ["networks"])
    assert _own_module("runtimes/_podman_storage.py", "podman", names["podman"])
    assert not _own_module("study/execute/executor.py", "host", names["host"])
    assert not _own_module("runtimes/bwrap.py", "squashfs", names["squashfs"])


def _kernel_branches(path, names):
    """`p.get("kernel") == "startup"`-like comparisons in a module (either side, `in` too), and
    `kernel.startswith("phases")`: a kernel's name tested where a trait of its KernelSpec
    (shape, per_launch, foms, ...) should be asked instead."""
    found = []
    for node in _nodes(path):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            about_kernel = any("kernel" in ast.unparse(s).lower() and "traits(" not in ast.unparse(s) for s in sides)
            if about_kernel and _compared_strings(node) & names:
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("startswith", "endswith", "removesuffix", "removeprefix")
              and "kernel" in ast.unparse(node.func.value).lower()
              and any(isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.strip("-") in names
                      for a in node.args)):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_outside_the_kernels_branches_on_a_kernel_name():
    """The analysis and the report learn what a kernel is from its KernelSpec, so a new kernel
    is its parser module; only kernels/ and io/ (iobench's own analysis) name kernels."""
    from nearmetal import kernels
    from nearmetal.kernels.parsers.gpu import SPECS

    names = set(kernels.REGISTRY) | set(SPECS) | {kernels.PROGRAM.name, "imported"}
    found = [f"{path.relative_to(SRC)}:{hit}" for path in _modules()
             if path.relative_to(SRC).parts[0] not in ("kernels", "io") for hit in _kernel_branches(path, names)]
    assert not found, "comparisons with a kernel's name outside kernels/:\n" + "\n".join(found)


def test_the_kernel_name_check_sees_what_it_must(tmp_path):
    code = tmp_path / "m.py"
    code.write_text("a = p.get('kernel') == 'startup'\nb = t['kernel'] != 'command'\nc = b.kernel in ('pairs',)\n"
                    "d = p.get('metric') == 'latency'\ne = p.get('kernel') == 'my-app'\n"
                    "f = kernels.traits(p.get('kernel')).shape == 'pairs'\ng = 'startup' == p['kernel']\n"
                    "h = p['kernel'].startswith('phases')\ni = kernel.removeprefix('startup-')\n"
                    "j = kernel.removesuffix('-portable')\n")  # a build's suffix is no kernel's name: not a branch
    hits = _kernel_branches(code, {"startup", "command", "pairs", "latency", "phases"})
    assert [h.split(":")[0] for h in hits] == ["1", "2", "3", "7", "8", "9"]


def test_every_command_prints_through_nearmetals_console():
    """rich's own Console exits 1 when a reader closes the pipe; console.py's says what happened
    (128 + SIGPIPE). Only console.py may import rich's."""
    found = [str(path.relative_to(SRC)) for path in _modules() if path.name != "console.py"
             for node in _nodes(path) if isinstance(node, ast.ImportFrom) and node.module == "rich.console"
             and any(alias.name == "Console" for alias in node.names)]
    assert not found, f"modules that print through rich's Console, not nearmetal.console's: {found}"


def test_the_study_pipelines_records_are_frozen():
    """What crosses a stage of the study pipeline (study/records.py) cannot be changed by the next."""
    from dataclasses import is_dataclass

    from nearmetal.study import records

    classes = [c for c in vars(records).values() if isinstance(c, type) and is_dataclass(c)]
    assert {c.__name__ for c in classes} >= {"Cell", "RunSpec", "Launched", "RunResult", "AnalysisSpec"}
    assert all(c.__dataclass_params__.frozen for c in classes), [c.__name__ for c in classes]


def test_a_run_request_is_changed_only_where_run_plan_says():
    """A RunRequest is never assigned to outside run.py (plan() completes MPMD components there,
    docs/architecture.md); elsewhere a request that differs is a new one (RunRequest.replace)."""
    from nearmetal.run import RunRequest

    names = set(RunRequest.__slots__)
    found = []
    for path in _modules():
        rel = str(path.relative_to(SRC))
        if rel == "run.py":
            continue
        for node in _nodes(path):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, (ast.AugAssign, ast.AnnAssign)) else []
            for t in targets:
                if (isinstance(t, ast.Attribute) and t.attr in names and isinstance(t.value, ast.Name)
                        and t.value.id in ("req", "request", "first", "r", "more")):
                    found.append(f"{rel}:{node.lineno} {t.value.id}.{t.attr}")
    assert not found, f"RunRequests changed outside run.plan: {found}"


# The study pipeline's stages in order: a stage may import those before it, never those after.
STAGES = ("config", "plan", "store", "execute")
LATER = {"config": {"plan", "store", "execute"}, "plan": {"store", "execute"}, "store": {"execute"}, "execute": set()}


def _imported(path, src=SRC):
    """The absolute module names a module imports (lazy imports inside functions included)."""
    package = ".".join(("nearmetal",) + path.relative_to(src).parent.parts)
    out = set()
    for node in _nodes(path):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(p for p in (base, node.module) if p) if node.level else node.module
            out.add(module)
            out |= {f"{module}.{a.name}" for a in node.names}  # `from . import plan` names a module
    return out


def _stage_strays(src):
    found = []
    for stage, later in LATER.items():
        for path in _modules(src / "study" / stage):
            for name in sorted(_imported(path, src)):
                parts = name.split(".")
                if parts[:2] == ["nearmetal", "study"] and len(parts) > 2 and parts[2] in later:
                    found.append(f"{path.relative_to(src)} imports {name}")
    # what comes after the analysis (explain reads its answers, the report renders it) is
    # imported neither by the analysis nor by the study pipeline before it
    after = ("nearmetal.report", "nearmetal.explain")
    for path in [*_modules(src / "analysis"), *_modules(src / "study")]:
        found += [f"{path.relative_to(src)} imports {name}" for name in sorted(_imported(path, src))
                  if name in after or name.startswith(tuple(f"{a}." for a in after))]
    return found


def test_the_study_stages_import_only_earlier_stages():
    """config -> plan -> store -> execute: study/config imports nothing of plan, store or
    execute, study/plan nothing of store or execute, study/store nothing of execute (lazy
    imports included); the analysis and the pipeline import nothing of explain or the report,
    which come after them."""
    assert {p.name for p in (SRC / "study").iterdir() if p.is_dir() and p.name != "__pycache__"} == set(STAGES)
    found = _stage_strays(SRC)
    assert not found, "a stage imports a later one:\n" + "\n".join(found)


def test_the_stage_check_sees_what_it_must(tmp_path):
    """The check above finds each form of import of a later stage (a check that finds nothing proves nothing)."""
    for stage in STAGES:
        (tmp_path / "study" / stage).mkdir(parents=True)
    (tmp_path / "analysis").mkdir()
    (tmp_path / "study/config/a.py").write_text("def f():\n    from ..plan import plan\n")
    (tmp_path / "study/plan/b.py").write_text("from ..store.store import Store\nfrom ..config import fields\n")
    (tmp_path / "study/store/c.py").write_text("import nearmetal.study.execute.runner\nfrom ..plan.plan import cells\n")
    (tmp_path / "study/execute/d.py").write_text("from ..store import codec\nfrom ..plan import plan\n")
    (tmp_path / "analysis/e.py").write_text("def g():\n    from ..report.formatting import point_label\n")
    (tmp_path / "analysis/f.py").write_text("from ..explain.why import section\n")
    (tmp_path / "study/execute/g.py").write_text("import nearmetal.report\n")
    found = _stage_strays(tmp_path)
    assert found == ["study/config/a.py imports nearmetal.study.plan", "study/config/a.py imports nearmetal.study.plan.plan",
                     "study/plan/b.py imports nearmetal.study.store.store",
                     "study/plan/b.py imports nearmetal.study.store.store.Store",
                     "study/store/c.py imports nearmetal.study.execute.runner",
                     "analysis/e.py imports nearmetal.report.formatting",
                     "analysis/e.py imports nearmetal.report.formatting.point_label",
                     "analysis/f.py imports nearmetal.explain.why", "analysis/f.py imports nearmetal.explain.why.section",
                     "study/execute/g.py imports nearmetal.report"], found


def _defined_names(tree):
    """The names a module defines at its top level (None: it has a module __getattr__, anything goes)."""
    out = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == "__getattr__":
                return None
            out.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                out |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.If, ast.Try)):
            out |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            out |= {(a.asname or a.name) for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom))
                    for a in n.names}
    return out


def _unresolved_imports(root, files):
    """`from .x import y` (at any depth, in functions too) whose module or name does not exist."""
    found = []
    for path in files:
        package = path.relative_to(root.parent).parent.parts  # ("nearmetal", "models", ...)
        for node in _nodes(path):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                parts = list(package[:len(package) - (node.level - 1)]) + (node.module.split(".") if node.module else [])
            elif (node.module or "").split(".")[0] == root.name:
                parts = node.module.split(".")
            else:
                continue
            target = root.parent.joinpath(*parts)
            module = target / "__init__.py" if target.is_dir() else target.with_suffix(".py")
            where = f"{path.relative_to(root)}:{node.lineno}"
            if not module.is_file():
                found.append(f"{where} no module {'.'.join(parts)}")
                continue
            defined = _defined_names(_tree(module))
            for alias in node.names:
                submodule = target / f"{alias.name}.py" if target.is_dir() else None
                if alias.name == "*" or defined is None or alias.name in defined or (
                        submodule and (submodule.is_file() or (target / alias.name).is_dir())):
                    continue
                found.append(f"{where} {'.'.join(parts)} has no {alias.name}")
    return found


def test_every_import_of_the_package_names_what_exists():
    """An import inside a function runs only when its branch does: a module renamed or moved
    (models/fabric.py to models/_fabric.py) would fail there at run time, after every test that
    does not reach the branch has passed."""
    found = _unresolved_imports(SRC, _modules())
    assert not found, "imports of nothing:\n" + "\n".join(found)


def test_the_import_check_sees_what_it_must(tmp_path):
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text("X = 1\n")
    (root / "sub" / "__init__.py").write_text("from .. import X\n")
    (root / "sub" / "_helper.py").write_text("def f():\n    return 1\n")
    (root / "user.py").write_text("def g():\n    from .sub import _helper, helper\n    from .sub._helper import f, h\n"
                                  "    from . import X, Y\n    from pkg.sub import _helper\n    from .gone import z\n")
    assert _unresolved_imports(root, sorted(root.rglob("*.py"))) == [
        "user.py:2 pkg.sub has no helper", "user.py:3 pkg.sub._helper has no h", "user.py:4 pkg has no Y",
        "user.py:6 no module pkg.gone"]


def test_the_bench_record_schema_lists_the_registered_modes_and_mpis():
    """The published record schema names the values a record's params can hold: a model or an
    MPI family registered without it would write records the schema refuses."""
    import json

    from nearmetal import models

    schema = json.loads((SRC / "schemas" / "bench-record.schema.json").read_text())
    params = schema["properties"]["params"]["properties"]
    assert tuple(params["mode"]["enum"]) == models.names()
    assert tuple(params["mpi"]["enum"]) == families.names()
