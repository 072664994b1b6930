"""`gpus` as a study dimension and a [[variant]] key: the --gpus forms, checked by the code
the command line uses (gpu/select.py), in variant ids and baselines, handed to each cell's
RunRequest; and on a machine without a GPU (a fake, empty /proc and /dev) the cells of GPU
benchmarks left out in one line, a study of nothing else refused in one line. The machine's
GPUs come from discovery.gpu run on a fake tree (tests/gpu_tree.py)."""

import argparse

import pytest

import gpu_tree
from nearmetal.discovery import gpu as discovery
from nearmetal.errors import NearmetalError
from nearmetal.study.plan import study_file as config_mod
from nearmetal.study.plan import gpu_cells
from nearmetal.study.plan.plan import baseline_of, cells, make_plan, variant_id

pytestmark = pytest.mark.unit

BASE = """\
[study]
name = "g"
repetitions = 2
warmup = 0
seed = 3
"""

GPU_STUDY = BASE + """
[matrix]
mode = ["native", "hybrid"]
runtime = ["charliecloud"]
mpi = ["openmpi"]
gpus = ["all"]
[[benchmark]]
kernel = "startup"
"""


def parse(body):
    return config_mod.parse(body, source="s.toml")


@pytest.fixture
def no_gpu(tmp_path, monkeypatch):
    """This machine as a fake one without any NVIDIA driver."""
    bare = tmp_path / "bare"
    (bare / "dev").mkdir(parents=True)
    monkeypatch.setattr(gpu_cells, "machine_gpus", lambda: discovery.discover(
        root=str(bare), which=gpu_tree.which_none, run=lambda argv: "", load=None)["gpus"])


@pytest.fixture
def two_gpus(tmp_path, monkeypatch):
    root = gpu_tree.make(tmp_path / "machine")
    monkeypatch.setattr(gpu_cells, "machine_gpus", lambda: discovery.discover(
        root=str(root), which=gpu_tree.which_none, run=lambda argv: "", load=None)["gpus"])


@pytest.mark.parametrize("given,stored", [('"all"', "all"), ("2", "2"), ('"2"', "2"), ('"0, 1"', "0,1"),
                                          ('"1,"', "1,"), (f'"{gpu_tree.UUID1},0"', f"{gpu_tree.UUID1},0")])
def test_every_gpus_form_is_a_matrix_value_in_one_spelling(given, stored, two_gpus):
    cfg = parse(GPU_STUDY.replace('gpus = ["all"]', f"gpus = [{given}]"))
    ids = sorted({variant_id(c.variant) for c in cells(cfg)})
    assert ids == [f"hybrid/charliecloud/openmpi/default+gpus-{stored}", f"native/openmpi+gpus-{stored}"]


@pytest.mark.parametrize("bad", ['"0"', "0", '"x"', '"1,1"', '"none"', "true", "[1]"])
def test_a_bad_gpus_value_is_refused_in_one_line_with_the_command_lines_words(bad):
    from nearmetal.cli_parser import _gpus

    for where, body in (("matrix.gpus[0]", GPU_STUDY.replace('gpus = ["all"]', f"gpus = [{bad}]")),
                        ("benchmark[0].gpus[0]", GPU_STUDY + f"gpus = [{bad}]\n"),
                        ("variant[0].gpus", BASE + f'[[variant]]\nname = "v"\nmode = "native"\nmpi = "openmpi"\n'
                                                  f'gpus = {bad}\n[[benchmark]]\nkernel = "startup"\n')):
        with pytest.raises(NearmetalError) as e:
            parse(body)
        text = str(e.value)
        assert "\n" not in text and "s.toml" in text and where in text, text
        if bad.startswith('"') and bad != '""':
            with pytest.raises(argparse.ArgumentTypeError) as cli:
                _gpus(bad.strip('"'))
            assert str(cli.value) in text  # the same words as `run --gpus`


def test_gpus_can_be_zipped_and_excluded_and_the_empty_value_asks_for_none(two_gpus):
    cfg = parse(BASE + """
[matrix]
mode = ["hybrid"]
runtime = ["bwrap"]
mpi = ["mpich"]
gpus = ["", "1", "all"]
exclude = [{gpus = 1}]
[baseline]
mode = "hybrid"
runtime = "bwrap"
[[benchmark]]
kernel = "startup"
""")
    assert [variant_id(c.variant) for c in cells(cfg)] == ["hybrid/bwrap/mpich/default",
                                                          "hybrid/bwrap/mpich/default+gpus-all"]
    assert "gpus" not in cells(cfg)[0].variant  # off: not in the stored variant, as before


def test_a_gpu_variants_baseline_has_the_same_gpus_and_a_named_variant_carries_its_own(two_gpus):
    cfg = parse(GPU_STUDY.replace('gpus = ["all"]', 'gpus = ["all", "1,"]') + '[[variant]]\nname = "nv"\nmode = "hybrid"\nruntime = "apptainer"\nmpi = "openmpi"\n'
                            'gpus = "1,"\n')
    by_id = {variant_id(c.variant): c.variant for c in cells(cfg)}
    assert by_id["nv"]["gpus"] == "1," and by_id["nv"]["runtime"] == "apptainer"
    hybrid = by_id["hybrid/charliecloud/openmpi/default+gpus-all"]
    assert variant_id(baseline_of(cfg, hybrid)) == "native/openmpi+gpus-all"
    assert variant_id(baseline_of(cfg, by_id["nv"])) == "native/openmpi+gpus-1,"


def test_on_a_machine_without_a_gpu_the_cells_of_gpu_benchmarks_are_left_out(no_gpu):
    cfg = parse(GPU_STUDY + """gpus = ["", "all"]
[[benchmark]]
kernel = "allgather"
gpus = [""]
""")
    assert len(cells(cfg, here=False)) == 6
    kept = cells(cfg)  # startup's no-GPU cells too: they are there to be compared with its GPU cells
    assert {c.benchmark.label for c in kept} == {"allgather"} and len(kept) == 2
    assert {r.cell.benchmark.label for r in make_plan(cfg, 1)} == {"allgather"}
    said = []
    from nearmetal.study.execute.runner import _say_left_out

    _say_left_out(cfg, said.append)
    assert said == ["this machine has no NVIDIA GPU (no driver in /proc/driver/nvidia, no NVML, no nvidia-smi): the "
                    "4 cells of GPU benchmarks are left out of study 'g'"]


def test_with_gpus_every_cell_is_planned(two_gpus):
    cfg = parse(GPU_STUDY)
    assert len(cells(cfg)) == 2 and len(make_plan(cfg, 1)) == 4


def test_a_study_of_gpu_benchmarks_alone_is_refused_in_one_line_before_its_inputs_are_looked_at(no_gpu, tmp_path):
    path = tmp_path / "gpu.toml"
    path.write_text(GPU_STUDY + """
[[benchmark]]
name = "stream"
command = ["./nm-gpu-stream"]
inputs = ["/nonexistent/gpu-kernels/nm-gpu-stream"]
""")
    with pytest.raises(NearmetalError) as e:
        config_mod.load(path)
    text = str(e.value)
    assert "\n" not in text and text.startswith(str(path))
    assert "no NVIDIA GPU" in text and "the 4 cells of GPU benchmarks are left out of study 'g'" in text
    assert text.endswith("nothing to plan")


def test_a_gpu_studys_inputs_are_checked_where_it_can_run(two_gpus, tmp_path):
    path = tmp_path / "gpu.toml"
    path.write_text(GPU_STUDY + '[[benchmark]]\nname = "s"\ncommand = ["./x"]\ninputs = ["/nonexistent/x"]\n')
    with pytest.raises(NearmetalError, match="input /nonexistent/x does not exist"):
        config_mod.load(path)


def test_discovery_is_not_asked_for_a_study_without_gpus(monkeypatch):
    monkeypatch.setattr(gpu_cells, "machine_gpus", lambda: pytest.fail("discovery asked"))
    cfg = parse(BASE + '[matrix]\nmode = ["native"]\nmpi = ["mpich"]\n[[benchmark]]\nkernel = "startup"\n')
    assert len(make_plan(cfg, 1)) == 2


def test_a_cells_run_request_carries_its_gpus(two_gpus, monkeypatch):
    """cell_launch.compose hands the variant's gpus to run.plan as --gpus would."""
    import nearmetal.run as run_mod
    from nearmetal.study.execute.cell_launch import compose
    from nearmetal.study.execute.image_variant import Placer

    seen = []

    def planned(req, more=(), check_paths=True, host=None):
        seen.append(req.gpus)
        raise NearmetalError("planned")

    monkeypatch.setattr(run_mod, "plan", planned)
    cfg = parse(GPU_STUDY.replace('gpus = ["all"]', 'gpus = ["", "0,"]'))
    for cell in cells(cfg):
        assert str(compose(cfg, cell, Placer(dry=True), None).error) == "planned"
    assert sorted(seen, key=str) == ["0,", "0,", None, None]


def test_seed_001s_gpu_study_plans_every_cell_on_a_gpu_machine(two_gpus, monkeypatch):
    """examples/seeds/001-gpus.toml on the fake two-GPU machine: every runtime's cells planned,
    GPU STREAM with the GPUs everywhere,
    start-up with and without them; its FOM reads nm-gpu-stream's triad row. Every runtime counts
    as installed: whether Apptainer is here must not decide what this test sees."""
    from pathlib import Path

    import shutil

    which = shutil.which
    runtimes = {"ch-run", "bwrap", "podman", "apptainer"}
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: f"/usr/bin/{name}" if name in runtimes
                        else which(name, *a, **k))
    from nearmetal.study.plan.gpu_cells import left_out

    root = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(root)
    cfg = config_mod.parse((root / "examples/seeds/001-gpus.toml").read_text(), source="001-gpus.toml")
    every = cells(cfg, here=False)
    assert left_out(cfg, every) == [] and len(cells(cfg)) == len(every)
    ids = {c.benchmark.label: sorted(variant_id(c.variant) for c in every if c.benchmark.label == label)
           for label in ("gpu-stream", "startup") for c in every if c.benchmark.label == label}
    assert all(i.endswith("+gpus-all") for i in ids["gpu-stream"])
    assert {i.endswith("+gpus-all") for i in ids["startup"]} == {True, False}
    assert {f.variant for f in cfg.finding} <= set(ids["gpu-stream"]) | set(ids["startup"])
    (fom,) = next(b for b in cfg.benchmark if b.label == "gpu-stream").fom
    import re

    out = "# gpu=0000:18:00.0 name=NVIDIA_H100 cuda=12.4 visible=0\nCopy:   0  2901.3  0.1  0.1  0.1\n" \
          "Triad:  0  3012.5  0.000540  0.000535  0.000551\n"
    assert re.search(fom.regex.removeprefix("(?m)"), out, re.M).group(1) == "3012.5"


def test_gpus_the_machine_lacks_are_refused_before_any_run(two_gpus):
    """A count above the machine's two GPUs and an index it lacks: refused by the study's
    preflight (and so by --dry-run) in one line with select.py's reasons, not by every run."""
    from nearmetal.study.execute import preflight

    native = GPU_STUDY.replace('mode = ["native", "hybrid"]', 'mode = ["native"]')
    assert preflight.problems(parse(native.replace('gpus = ["all"]', 'gpus = ["all", "2", "1,"]'))) == ([], [])
    with pytest.raises(NearmetalError) as e:
        preflight.check(parse(native.replace('gpus = ["all"]', 'gpus = ["3", "0,5", "1,"]')), "s.toml")
    assert str(e.value) == ("s.toml: cannot run: gpus '3' of 1 cell: this machine has 2 GPUs; also gpus '0,5' of "
                            "1 cell: no GPU 5 on this machine (GPUs: 0, 1)")
