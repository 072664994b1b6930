"""What an image is made of: the Debian release, the packages (from the MPI family profiles),
nearmetal's kernel sources, and the digest over all of them that decides whether a build
can be skipped."""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

from .. import families
from ..errors import NearmetalError
from ..home import KERNELS_SRC

DISTROS = ("bookworm", "trixie", "bullseye")
# Bump when the recipe changes in a way that changes the image.
RECIPE_VERSION = 3
BASE_PACKAGES = ("gcc", "make", "pkg-config", "libc6-dev")
# Serial readers (ncdump, h5dump) to inspect what a run wrote.
IO_TOOLS = ("netcdf-bin", "hdf5-tools")
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# Bind-mount targets every image has: a SquashFS image cannot get them at run time
# (nm/host-gpu: the driver libraries of --gpus, gpu/stage.py).
MOUNT_POINTS = ("nm/host-mpi", "nm/work", "nm/host-gpu")
NAME_RE = re.compile(r"[a-z0-9][a-z0-9._-]{0,99}\Z")  # \Z, not $: "name\n" must not pass
# Debian policy 5.6.1: lowercase letters, digits, + - . ; at least two characters, a letter or
# digit first. An optional :ARCH is not taken: images are of the host's architecture.
PACKAGE_RE = re.compile(r"^[a-z0-9][a-z0-9+.-]{1,99}$")
MAX_EXTRA_PACKAGES = 200


def default_name(distro: str, mpis, generic=False) -> str:
    """nm-DISTRO-MPI1-MPI2, the MPI families sorted by name; nm-DISTRO-generic-MPI1-MPI2 for
    the generic variant (generic.py)."""
    return "-".join(["nm", distro, *(["generic"] if generic else []), *sorted(set(mpis))])


def host_distro() -> str:
    """VERSION_CODENAME from /etc/os-release ("" when there is none)."""
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return ""
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "VERSION_CODENAME":
            return value.strip().strip('"').strip("'")
    return ""


def check_inputs(distro, mpis, fmt, name, format_names, generic=False):
    """(distro, sorted MPI families, formats with "dir" first, name), or a one-line error.
    mpis=None: every MPI family; generic: the default name is the generic variant's."""
    if distro is None:
        distro = host_distro()
        if distro not in DISTROS:
            distro = "bookworm"
    if distro not in DISTROS:
        raise NearmetalError(f"unknown distro '{distro}' (choose from: {', '.join(DISTROS)})")
    if mpis is None:
        mpis = families.names()
    elif isinstance(mpis, str):
        mpis = [mpis]
    mpis = sorted(set(mpis))
    if not mpis:
        raise NearmetalError(f"no MPI given (choose from: {', '.join(families.names())})")
    for mpi in mpis:
        if mpi not in families.names():
            raise NearmetalError(f"unknown MPI '{mpi}' (choose from: {', '.join(families.names())})")
    fmts = [fmt] if isinstance(fmt, str) or fmt is None else list(fmt)
    formats = ["dir"]
    for f in fmts:
        f = f or "dir"
        if f not in format_names:
            raise NearmetalError(f"unknown image format '{f}' (choose from: {', '.join(format_names)})")
        if f not in formats:
            formats.append(f)
    name = name or default_name(distro, mpis, generic)
    if not NAME_RE.match(name) or name.endswith((".sqfs", ".lock", ".log")):
        raise NearmetalError(f"bad image name '{name}': use lowercase letters, digits, '.', '_' and '-'")
    return distro, mpis, formats, name


def packages(mpis, extra=()) -> list[str]:
    """The packages a build installs: the toolchain, each MPI family's, then the user's extra
    ones (`image build --packages`: an application from Debian), each once."""
    out = list(BASE_PACKAGES)
    for mpi in mpis:
        out += families.get(mpi).image_packages
    return out + [p for p in dict.fromkeys(extra) if p not in out]


def check_packages(extra, name_given) -> list[str]:
    """The user's extra packages, checked (names only: apt says whether they exist); a
    one-line error otherwise. They make a different image, which needs a name of its own."""
    extra = [p.strip() for p in (extra or ())]
    if "" in extra:  # ',,,' or 'gromacs,': a slip, not a request for nothing
        raise NearmetalError("--packages: an empty package name (write P1,P2 with no empty entries)")
    if len(extra) > MAX_EXTRA_PACKAGES:
        raise NearmetalError(f"--packages: at most {MAX_EXTRA_PACKAGES} packages")
    for p in extra:
        if not PACKAGE_RE.match(p):
            raise NearmetalError(f"--packages: '{p}' is not a Debian package name (lowercase letters, digits, "
                                 f"'+', '-', '.')")
    if extra and not name_given:
        raise NearmetalError("--packages makes an image of its own: give it a --name (the default image stays "
                             "as it is)")
    return extra


def check_portable_kernels(name, portable, name_given) -> bool:
    """Whether the image's compute kernels are built portable (-march=x86-64, SSE2) rather than
    for this CPU; a one-line error for such an image without a name of its own: the default
    images' kernels are the tuned ones every study compares against."""
    if portable and (not name_given or name in _default_names(False) | _default_names(True)):
        raise NearmetalError("--portable-kernels makes an image of its own: give it a --name that is not a default "
                             "image's (the default images keep kernels built for this CPU)")
    return bool(portable)


def _default_names(generic):
    """Every default image name of the tuned (generic=False) or the generic variant: each
    distro with each set of MPI families."""
    import itertools

    names = families.names()
    subsets = [c for k in range(1, len(names) + 1) for c in itertools.combinations(names, k)]
    return {default_name(d, m, generic) for d in DISTROS for m in subsets}


def check_generic(name, generic) -> bool:
    """Whether the image is the generic variant; a one-line error when the name says otherwise:
    a generic image under a default (tuned) image's name, which runs without --image use, or a
    tuned one under a generic default name."""
    if generic and name in _default_names(False):
        raise NearmetalError(f"--generic: '{name}' is a default image's name, and a default image keeps its MPI's "
                             f"shared memory; give the generic image another --name")
    if not generic and name in _default_names(True):
        raise NearmetalError(f"image '{name}': that name is the generic variant's: add --generic")
    return bool(generic)


def build_command(name: str) -> str | None:
    """The `nearmetal image build` line that makes the image of a default name (the tuned or the
    generic variant of a distro and MPIs), or None for any other name."""
    import itertools

    names = families.names()
    for distro, generic in itertools.product(DISTROS, (False, True)):
        for k in range(1, len(names) + 1):
            for mpis in itertools.combinations(names, k):
                if name == default_name(distro, mpis, generic):
                    return " ".join(["nearmetal image build", *(["--generic"] if generic else []), "--distro", distro,
                                     "--mpi", ",".join(sorted(mpis))])
    return None


def io_packages(mpis) -> list[str]:
    """The I/O packages wanted for these MPIs; those the distro lacks are left out at build time."""
    return [p for mpi in mpis for p in families.get(mpi).image_io_packages] + list(IO_TOOLS)


def kernel_prefix(mpi: str) -> str:
    """Where the kernels built against one MPI family are installed inside the image."""
    return f"/opt/nearmetal/{mpi}"


def kernel_bin(mpi: str) -> str:
    return f"{kernel_prefix(mpi)}/bin"


def kernel_files() -> list[Path]:
    """The kernel sources (not build outputs) under home.KERNELS_SRC: what is copied into
    and built in the image."""
    if not KERNELS_SRC.is_dir():
        raise NearmetalError(f"kernel sources not found at {KERNELS_SRC}")
    files = []
    for path in sorted(KERNELS_SRC.rglob("*")):
        rel = path.relative_to(KERNELS_SRC)
        if any(part.startswith(".") or part == "build" for part in rel.parts):
            continue
        if path.is_file() and not path.is_symlink() and path.suffix not in (".o", ".so"):
            files.append(path)
    return files


def kernel_programs(src=None) -> list[str]:
    """Programs the kernels Makefile builds; `src` = the copy inside the image being built, so
    the list matches the sources that were copied (home.KERNELS_SRC may change meanwhile)."""
    from ..kernels.build import programs

    return programs(src) if src is not None else programs()


def digest(distro, mpis, package_list, generic=False, portable_kernels=False) -> str:
    """sha256 over everything that makes the image: equal digests, equal images. The generic
    variant adds what its step does (generic.recipe()), portable kernels their build; other
    images' digests are unchanged."""
    import hashlib
    import json

    inputs = {"recipe": RECIPE_VERSION, "distro": distro, "mpis": list(mpis), "packages": list(package_list),
              "io_packages": io_packages(mpis),
              "kernels": {str(p.relative_to(KERNELS_SRC)): hashlib.sha256(p.read_bytes()).hexdigest()
                          for p in kernel_files()}}
    if generic:
        from .generic import recipe as generic_recipe

        inputs["generic"] = generic_recipe()
    if portable_kernels:
        inputs["kernels_build"] = "portable"
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def mirror() -> str:
    """$NEARMETAL_MIRROR, else the Debian archive the host's apt uses, else deb.debian.org."""
    env = os.environ.get("NEARMETAL_MIRROR")
    if env:
        return env
    texts = []
    for path in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]:
        with contextlib.suppress(OSError):
            texts.append(path.read_text())
    for text in texts:
        for match in re.finditer(r"(?:URIs:|deb(?:\s+\[[^\]]*\])?)\s+(\S+)", text):
            uri = match.group(1).rstrip("/")
            if uri.startswith(("http://", "https://")) and uri.endswith("/debian"):
                return uri
    return DEFAULT_MIRROR
