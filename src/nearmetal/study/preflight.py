"""Before any run of a study, and in its --dry-run: what would fail every run of a cell is
refused in one line, at once, instead of after the native runs have been spent.

- an image that cannot be found (a misspelt name: the images there are and the closest name);
- a container runtime that is not installed (with `[study] missing_runtimes = "skip"` its
  cells are left out of the plan instead, and the plan says so: runner._say_left_out), or
  that does not start a container here (doctor's check: a container of /bin/true).

An unknown preset or kernel is refused earlier, when the file is validated. Runtimes are
checked only where the runs start on this machine (scheduler "local"): a batch scheduler's
nodes may have other ones.
"""

from collections import Counter

from ..errors import NearmetalError
from .inputs import one_line


def check(cfg, source="<study>"):
    """Raise one NearmetalError naming every problem found (joined by '; also ')."""
    found = problems(cfg)
    if found:
        raise NearmetalError(one_line(f"{source}: cannot run: {'; also '.join(found)}"))


def problems(cfg):
    """The problems (one phrase each) that would keep every run of some cells from starting."""
    from .. import schedulers
    from .plan import cells

    contained = [c for c in cells(cfg) if c.variant["mode"] != "native"]
    out = []
    for spec, n in Counter(c.variant.get("image") or "default" for c in contained).items():
        why = image_problem(spec)
        if why:
            out.append(f"image '{spec}' of {_cells(n)}: {why}")
    if schedulers.get(cfg.study.scheduler).job_is_child:
        for name, n in Counter(c.variant["runtime"] for c in contained if c.variant.get("runtime")).items():
            why = runtime_problem(name)
            if why:
                out.append(f"runtime {name} of {_cells(n)}: {why}")
    return out


def _cells(n):
    return f"{n} cell{'s' if n != 1 else ''}"


def image_problem(spec):
    """Why the image a study names cannot be found, or None."""
    from ..image import list_images
    from ..image.recipe import NAME_RE, build_command
    from ..resolve import Host

    try:
        Host().image(None if spec == "default" else spec)
        return None
    except NearmetalError as e:
        if "/" in spec or not NAME_RE.match(spec) or build_command(spec):
            return str(e)  # a path, or a name nearmetal knows how to build: that error says what to do
    from ..closest import known_names

    names = ["default", *(i.name for i in list_images())]  # "default": the machine's default image
    return f"no such image ({known_names(spec, names, 'images')})"


def runtime_problem(name):
    """Why a container runtime cannot start the study's containers here, or None."""
    from .. import doctor, runtimes

    rt = runtimes.get(name)
    if not rt.path():
        hint = f" ({rt.install_hint})" if rt.install_hint else ""
        return (f"{rt.binary} is not installed{hint}; [study] missing_runtimes = \"skip\" leaves such cells out "
                f"instead")
    works, detail = doctor.runtime_starts(rt)
    return None if works else f"it does not start a container here: {detail} (`nearmetal doctor` checks each runtime)"
