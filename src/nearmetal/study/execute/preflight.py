"""Before any run of a study, and in its --dry-run: what would fail every run of a cell is
refused in one line, at once, instead of after the native runs have been spent.

- an image that cannot be found: a misspelt name (one close to an image there: the images
  there are and the closest name) or a path that is not an image. A name nearmetal knows how
  to build (a seed study's other Debian releases), or one like no image there (an image the
  study file asks to be built first, as seed 001's nm-gromacs), is said, not refused: its
  cells fail saying how to get it, as the study file may intend;
- a container runtime that is not installed (with `[study] missing_runtimes = "skip"` its
  cells are left out of the plan instead, and the plan says so: runner._say_left_out), or
  that does not start a container here (doctor's check: a container of /bin/true);
- a program that is not in the image (a container runs the image's own: a host-side or
  relative path cannot start there; run a staged script through its interpreter,
  command = ["sh", "run.sh"]), checked in each image that is there, for each MPI;
- a host program of a native cell built against the other MPI's ABI: its launcher would
  start it as N separate 1-rank jobs that end "ok" with one rank's numbers. One that is not on
  this machine is said, not refused (seed 001 asks for gromacs): its cells fail saying so;
- GPUs this machine does not have: a `gpus` count above its GPUs, an index or UUID it lacks
  (a machine without any GPU leaves GPU benchmarks out of the plan instead: plan/gpu_cells.py).

An unknown preset or kernel is refused earlier, when the file is validated. Runtimes are
checked only where the runs start on this machine (scheduler "local"): a batch scheduler's
nodes may have other ones.
"""

import os
from collections import Counter

from ...errors import NearmetalError
from ...models import in_container
from ..config.inputs import one_line


def check(cfg, source="<study>", say=None):
    """Raise one NearmetalError naming every problem found (joined by '; also '); say(line)
    each image not built yet."""
    found, notes = problems(cfg)
    for line in notes if say else ():
        say(line)
    if found:
        raise NearmetalError(one_line(f"{source}: cannot run: {'; also '.join(found)}"))


def problems(cfg):
    """(problems, notes): the problems (one phrase each) that would keep every run of some
    cells from starting (or make them measure the wrong thing), and a note for each image that
    is not built yet and each native program that is not here."""
    from ... import schedulers
    from ..plan.plan import cells

    planned = cells(cfg)
    contained = [c for c in planned if in_container(c.variant["mode"])]
    out, notes = [], []
    for spec, n in Counter(c.variant.get("image") or "default" for c in contained).items():
        why, build = image_problem(spec)
        if why:
            out.append(f"image '{spec}' of {_cells(n)}: {why}")
        elif build:
            notes.append(f"image '{spec}' is not here: its {_cells(n)} {_fail(n)} until {build}")
    out += program_problems(contained)
    if schedulers.get(cfg.study.scheduler).job_is_child:  # the host's programs are this machine's
        wrong, missing = host_program_problems([c for c in planned if not in_container(c.variant["mode"])])
        out += wrong
        notes += missing
        for name, n in Counter(c.variant["runtime"] for c in contained if c.variant.get("runtime")).items():
            why = runtime_problem(name)
            if why:
                out.append(f"runtime {name} of {_cells(n)}: {why}")
        out += gpus_problems(planned)
    return out, notes


def program_problems(contained):
    """One phrase per program a container cell would start but that its image (one that is
    there; the others are said above) does not hold, as the run itself would refuse it."""
    from ... import kernels
    from ...discovery.mpi import split
    from ... import program_paths as programs
    from ...resolve import Host

    wanted = Counter()
    for c in contained:
        bench = c.benchmark
        program = bench.command[0] if bench.is_program() else kernels.get(bench.kernel).program
        family, _prefix = split(c.variant["mpi"])  # FAMILY@/PREFIX: an installation of that family
        wanted[(c.variant.get("image") or "default", program, family)] += 1
    host, out = Host(), []
    for (spec, program, family), n in wanted.items():
        try:
            programs.check_absolute(program)  # refused whatever the image
            try:
                image = host.image(None if spec == "default" else spec)
            except NearmetalError:
                continue  # not there: image_problem said so
            programs.container_program(image, program, family)
        except NearmetalError as e:
            out.append(f"{e} ({_cells(n)}, {family})")
    return out


def host_program_problems(native):
    """(wrong, missing): one phrase per program a native cell of a program benchmark would start
    that its MPI's launcher cannot start as one job (built against the other MPI's ABI: `run`
    refuses it too), and one note per program that is not on this machine. A relative path is
    left to the run (a file staged into the working directory), and so are nearmetal's kernels
    (built for every MPI before the runs)."""
    from ...program_paths import host_program, is_kernel
    from ...resolve import Host, host_program_abi_problem

    wanted = Counter()
    for c in native:
        program = c.benchmark.command[0] if c.benchmark.is_program() else None
        if program and not is_kernel(program) and ("/" not in program or os.path.isabs(program)):
            wanted[(program, c.variant["mpi"])] += 1
    host, wrong, missing = Host(), [], []
    for (program, mpi), n in wanted.items():
        try:
            installation = host.installation(mpi)
        except NearmetalError:
            continue  # the run names the missing MPI
        try:
            path = host_program(program, installation["family"])
        except NearmetalError as e:
            missing.append(f"{e}: its {_cells(n)} ({mpi}) {_fail(n)} until it is installed")
            continue
        problem = host_program_abi_problem(program, installation, host, remedy=f'give its cells mpi = "{{}}"',
                                           path=path)
        if problem:
            wrong.append(f"{problem} ({_cells(n)}, {mpi})")
    return wrong, missing


def gpus_problems(planned):
    """One phrase per `gpus` value this machine's GPUs cannot give (a count above what it has,
    an index or UUID it lacks): gpu/select.py's reason, as `run --gpus` gives it. On a machine
    without any GPU the cells of GPU benchmarks are not planned at all (plan/gpu_cells.py)."""
    from ...gpu.select import choose
    from ..plan.gpu_cells import asks, machine_gpus

    wanted = Counter(c.variant["gpus"] for c in planned if asks(c))
    found = machine_gpus() if wanted else []
    out = []
    for value, n in wanted.items():
        try:
            choose(value, found)
        except NearmetalError as e:
            out.append(f"gpus '{value}' of {_cells(n)}: {str(e).split(': ', 1)[-1]}")
    return out


def _fail(n):
    return "fails" if n == 1 else "fail"


def _cells(n):
    return f"{n} cell{'s' if n != 1 else ''}"


def image_problem(spec):
    """(why, None) when the image a study names cannot be found; (None, how to get it) when
    it is one nearmetal knows how to build or a name like no image here (one to be built or
    imported); (None, None) when it is there."""
    from ...image import default_name, host_distro, list_images
    from ...image.recipe import NAME_RE, build_command
    from ...families import names as families
    from ...resolve import Host

    try:
        Host().image(None if spec == "default" else spec)
        return None, None
    except NearmetalError as e:
        build = build_command(default_name(host_distro(), families()) if spec == "default" else spec)
        if build:
            return None, f"`{build}`"
        if "/" in spec or spec == "default" or not NAME_RE.match(spec):
            return str(e), None  # a path: that error says what is wrong with it
    from ...closest import closest, known_names

    names = ["default", *(i.name for i in list_images())]  # "default": the machine's default image
    if closest(spec, names):  # a misspelling of one that is there
        return f"no such image ({known_names(spec, names, 'images')})", None
    return None, (f"it is built (`nearmetal image build --name {spec} ...`) or imported "
                  f"({known_names(spec, names, 'images')})")


def runtime_problem(name):
    """Why a container runtime cannot start the study's containers here, or None."""
    from ... import doctor, runtimes

    rt = runtimes.get(name)
    if not rt.path():
        hint = f" ({rt.install_hint})" if rt.install_hint else ""
        return (f"{rt.binary} is not installed{hint}; [study] missing_runtimes = \"skip\" leaves such cells out "
                f"instead")
    works, detail = doctor.runtime_starts(rt)
    return None if works else f"it does not start a container here: {detail} (`nearmetal doctor` checks each runtime)"
