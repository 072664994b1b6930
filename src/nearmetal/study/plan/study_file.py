"""A study file as planning takes it: validated by the config stage (config/config.py), then
checked for what planning would refuse (plan.check) and, for a file about to run, for what
its runs would need (rank counts its kernels can use, images, working directories, inputs).
Here and not in config/, because the config stage imports nothing of the stages after it."""

from pathlib import Path

from ...errors import NearmetalError
from ..config.config import check_images, check_inputs, check_paths, one_line, read_text, validated
from .plan import cells, check, check_kernel_ranks

QUICKSTART = Path(__file__).parents[1] / "config" / "quickstart.toml"


def parse(text, source="<study>"):
    """A validated StudyConfig from a study's text (also a stored study's): every problem of
    the file at once, then what planning would refuse (zips, the baseline, the study's
    size), all named by key path. Touches no file system."""
    cfg = validated(text, source)
    try:
        check(cfg)
    except NearmetalError as e:
        raise NearmetalError(one_line(f"{source}: {e}")) from None
    return cfg


def load(path):
    """(StudyConfig, text) of a study file; nothing is created (check_paths only probes)."""
    text = read_text(path, "study file")
    source = one_line(str(path))
    cfg = parse(text, source=source)
    check_runnable(cfg, source)
    return cfg, text


def check_runnable(cfg, source="<study>"):
    """Before any run starts: rank counts the kernels can use, images that can be looked up,
    usable working directories."""
    try:
        check_kernel_ranks(cfg)
    except NearmetalError as e:
        raise NearmetalError(one_line(f"{source}: {e}")) from None
    here = cells(cfg)
    if not here:  # GPU benchmarks only, and no GPU on this machine (study/plan/gpu_cells.py)
        from .gpu_cells import note

        raise NearmetalError(one_line(f"{source}: {note(cfg, len(cells(cfg, here=False)))}: nothing to plan"))
    places = [("matrix.image", cfg.matrix.image)]
    places += [(f"benchmark[{i}].image", b.image) for i, b in enumerate(cfg.benchmark) if b.image]
    places += [(f"variant[{i}].image", [v.image]) for i, v in enumerate(cfg.variant) if v.image]
    check_images(places, source)
    check_paths(cfg, source)
    try:
        check_inputs(cfg, {id(c.benchmark) for c in here})  # a left-out benchmark's inputs are not needed
    except NearmetalError as e:
        raise NearmetalError(one_line(f"{source}: {e}")) from None


def builtin_quickstart():
    text = QUICKSTART.read_text()
    return parse(text, source="built-in quickstart"), text
