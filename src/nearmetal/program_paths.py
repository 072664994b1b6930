"""Finding the program a rank runs, on the host or inside an image."""

import os

from .errors import NearmetalError

# Where a bare program name is looked up inside an image (after nearmetal's own kernels).
CONTAINER_PATH = ("/usr/local/bin", "/usr/bin", "/bin", "/usr/local/sbin", "/usr/sbin", "/sbin")


def is_kernel(name):
    return "/" not in name and name.startswith("nm-")


def host_program(name, family):
    """A host path for PROGRAM: nearmetal kernels come from the host kernel build."""
    if is_kernel(name):
        from .kernels.build import host_bin

        bindir = host_bin(family)
        path = os.path.join(bindir, name)
        if os.access(path, os.X_OK):
            return path
        known = ", ".join(sorted(os.listdir(bindir)))
        raise NearmetalError(f"no nearmetal kernel '{name}' for {family} (known: {known})")
    if "/" in name:
        if not os.path.isfile(name):
            raise NearmetalError(f"program not found: {name}")
        if not os.access(name, os.X_OK):
            raise NearmetalError(f"program is not executable: {name}")
        return os.path.abspath(name)
    built = app_program(name, family)
    if built:
        return built
    import shutil

    found = shutil.which(name)
    if not found:
        raise NearmetalError(f"program not found on PATH: {name}")
    return found


# Where `image build --recipe` installs an application's build in an image, per family
# (image/app_build.py); on the host it is $NEARMETAL_HOME/apps/IMAGE/FAMILY.
APP_PREFIX = "/opt/nearmetal/app"


def app_program(name, family):
    """The native `--recipe` build of a program called `name` for `family`, or None; a
    one-line error when several applications built one of that name. (os only: `run`'s
    hot path.)"""
    from .home import home_str

    root = os.path.join(home_str(), "apps")
    try:
        apps = sorted(os.listdir(root))
    except OSError:
        return None
    hits = [os.path.join(root, a, family, "bin", name) for a in apps]
    hits = [h for h in hits if os.path.isfile(h) and os.access(h, os.X_OK)]
    if len(hits) > 1:
        raise NearmetalError(f"program '{name}' was built natively by several recipes ({', '.join(hits)}): give its path")
    return hits[0] if hits else None


# for `run`, `bench` and a study's command alike: the argv words work in each (`-- sh -c ./x`, ["sh", "-c", "./x"])
RELATIVE = ("program path inside the image must be absolute: {name} (a container starts the image's own programs, by "
            "a name on its PATH or an absolute path: build yours into an image with `nearmetal image build --recipe`, "
            "or show the container its directory (--workdir DIR; a study file's workdir) and start it there through a "
            "shell: sh -c {name}; a script: sh {name})")


def check_absolute(name):
    """A program path a container can start: absolute, or a bare name on its PATH."""
    if "/" in name and not name.startswith("/"):
        raise NearmetalError(RELATIVE.format(name=name))


def container_program(image, name, family):
    """(path inside the image, host path of that file) for PROGRAM in IMAGE."""
    from .elf import LinkerView

    view = LinkerView(image.rootfs)
    if is_kernel(name):
        candidates = [f"{image.kernel_bin(family)}/{name}"]
    elif "/" in name:
        check_absolute(name)
        candidates = [name]
    else:
        candidates = [f"{APP_PREFIX}/{family}/bin/{name}"] + [f"{d}/{name}" for d in CONTAINER_PATH]
    for cand in candidates:
        host = view.host_path(cand)
        if host.is_file():
            if not os.access(host, os.X_OK):
                raise NearmetalError(f"program is not executable in image '{image.name}': {cand}")
            return cand, host
    raise NearmetalError(f"program not found in image '{image.name}': {name}")


def mpi_abi(view, in_image_path):
    """The MPI ABI family a program links against (through any depth), or None."""
    from .elf import read_elf
    from .families import abi_of

    info = read_elf(view.host_path(in_image_path))
    for soname in info.needed:
        if abi_of(soname):
            return abi_of(soname), soname
    try:
        for lib in view.closure(in_image_path):
            if abi_of(lib.soname):
                return abi_of(lib.soname), lib.soname
    except NearmetalError:
        pass
    return None, None
