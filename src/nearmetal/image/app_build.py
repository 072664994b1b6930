"""Your application from its source, built by one script natively and inside an image.

`image build --name NAME --recipe build.sh --source DIR` runs build.sh once per MPI family
of the image, twice: on the host (into $NEARMETAL_HOME/apps/NAME/FAMILY) and inside the
image (into /opt/nearmetal/app/FAMILY, with the image's compilers and MPI), so native and
container builds come from one source. The script's interface (docs/applications.md):

    CC CXX FC            the C, C++ and Fortran compilers (gcc, g++, gfortran)
    MPICC MPICXX MPIFC   the family's compiler wrappers (its profile's mpicc, ...)
    PREFIX               where to install (programs into $PREFIX/bin)
    NM_MPI_FAMILY        the family's name (families/)
    NM_SOURCE            the source directory: build out of tree or copy it (in the image
                         it is a read-only mount; natively it is your directory itself)
    working directory    an empty build directory

A run then finds PROGRAM (a bare name) in the build for its MPI family: native runs in
apps/*/FAMILY/bin, container runs in /opt/nearmetal/app/FAMILY/bin, before PATH.
"""

import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

from ..errors import NearmetalError

from ..program_paths import APP_PREFIX as IN_IMAGE  # noqa: E402
LOG_TAIL = 12


# The source is digested (every file's name and contents) to tell whether a build is up to
# date: bounded, so that `--source /` or a source tree holding a dataset is a one-line error.
MAX_SOURCE_FILES = 200_000
MAX_SOURCE_BYTES = 4 << 30
MAX_RECIPE_BYTES = 1 << 20
_NOT_SOURCES = ("/", "/proc", "/sys", "/dev", "/run")


def check(recipe, source):
    """(recipe, source) as absolute paths, or (None, None); one-line errors for bad input."""
    if recipe is None and source is None:
        return None, None
    if recipe is None or source is None:
        raise NearmetalError("--recipe and --source go together: the script and the source it builds")
    recipe, source = os.path.abspath(recipe), os.path.abspath(source)
    if not os.path.isfile(recipe):
        raise NearmetalError(f"--recipe {recipe}: no such file")
    if not os.path.isdir(source):
        raise NearmetalError(f"--source {source}: not a directory")
    if os.path.realpath(source) in _NOT_SOURCES:
        raise NearmetalError(f"--source {source}: a system directory, not an application's source")
    return recipe, source


def digest(recipe, source):
    """sha256 over the script and every file of the source (names and contents; a symbolic
    link's target as text, never followed). A one-line error for a device, FIFO or socket in
    the source, and for a source beyond MAX_SOURCE_FILES or MAX_SOURCE_BYTES."""
    h = hashlib.sha256()
    _hash_file(h, recipe, "--recipe", MAX_RECIPE_BYTES, MAX_RECIPE_BYTES, follow=True)
    files = total = 0
    try:
        for root, dirs, names in os.walk(source, onerror=_raise):  # does not follow links to directories
            links = sorted(d for d in dirs if os.path.islink(os.path.join(root, d)))
            dirs[:] = sorted(d for d in dirs if d != ".git" and d not in links)
            for name in sorted(names + links):
                full = os.path.join(root, name)
                files += 1
                if files > MAX_SOURCE_FILES:
                    raise NearmetalError(f"--source {source}: more than {MAX_SOURCE_FILES} files: is it the "
                                         f"application's source?")
                h.update(os.path.relpath(full, source).encode("utf-8", "surrogateescape") + b"\0")
                mode = os.lstat(full).st_mode
                if stat.S_ISLNK(mode):
                    h.update(b"\0symlink\0" + os.fsencode(os.readlink(full)))
                elif stat.S_ISREG(mode):
                    total += _hash_file(h, full, "--source", MAX_SOURCE_BYTES - total, MAX_SOURCE_BYTES,
                                        follow=False)
                else:
                    raise NearmetalError(f"--source: {full} is a device, FIFO or socket, not a source file")
    except OSError as e:
        raise NearmetalError(f"--source: {getattr(e, 'filename', None) or source}: {e.strerror or e}") from None
    return h.hexdigest()


def _raise(e):
    raise e


def _hash_file(h, path, what, limit, cap, follow):
    """Hash a regular file's contents into h (its size returned), a one-line error past limit
    bytes (cap: the limit as the user sees it); O_NONBLOCK and fstat: a FIFO or device is
    refused, never read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | (0 if follow else os.O_NOFOLLOW))
    except OSError as e:
        raise NearmetalError(f"{what} {path}: {e.strerror or e}") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NearmetalError(f"{what} {path}: not a regular file")
        size = 0
        while chunk := f.read(1 << 20):
            size += len(chunk)
            if size > limit:
                raise NearmetalError(f"{what} {path}: more than {cap >> 20} MiB to digest, the limit: "
                                     f"is it the application's {'script' if what == '--recipe' else 'source'}?")
            h.update(chunk)
    return size


def script_env(family, mpicc, prefix, source, base=None):
    """The documented variables for one build (over a minimal base environment)."""
    env = dict(base or {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"})
    head, base_name = os.path.split(mpicc)  # mpicc.FAMILY -> mpicxx.FAMILY, mpifort.FAMILY (Debian)
    env.update(CC="gcc", CXX="g++", FC="gfortran", MPICC=mpicc,
               MPICXX=os.path.join(head, base_name.replace("mpicc", "mpicxx", 1)),
               MPIFC=os.path.join(head, base_name.replace("mpicc", "mpifort", 1)),
               PREFIX=prefix, NM_MPI_FAMILY=family, NM_SOURCE=source)
    return env


def _tail(path):
    try:
        lines = Path(path).read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(l.strip() for l in lines[-LOG_TAIL:] if l.strip())[-600:]


def _programs(bin_dir):
    try:
        return sorted(p.name for p in Path(bin_dir).iterdir() if p.is_file() and os.access(p, os.X_OK))
    except OSError:
        return []


def host_root(name):
    from ..home import subdir

    return subdir("apps") / name


def build_native(name, mpis, recipe, source, say=print):
    """Build with the host's MPIs (those of `mpis` found here); {family: [programs]}."""
    from ..discovery.mpi import discover
    from .chroot import supervised

    found = discover()
    built = {}
    root = host_root(name)
    for family in mpis:
        if family not in found:
            say(f"nearmetal: [{name}] no host {family}: its native build is skipped")
            continue
        prefix = root / family
        shutil.rmtree(prefix, ignore_errors=True)
        prefix.mkdir(parents=True)
        log = root / f"{family}.build.log"
        with tempfile.TemporaryDirectory(prefix=f"nm-app-{family}-") as work, open(log, "w") as out:
            env = script_env(family, found[family]["compiler"], str(prefix), source,
                             base={k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "USER")})
            # under nm-supervise: interrupted, the build's make and compilers end with it
            done = subprocess.run(supervised(["bash", recipe]), cwd=work, env=env, stdin=subprocess.DEVNULL,
                                  stdout=out, stderr=subprocess.STDOUT)
        if done.returncode != 0:
            raise NearmetalError(f"--recipe failed natively for {family} (exit {done.returncode}): {_tail(log)} "
                                 f"(log: {log})")
        built[family] = _programs(prefix / "bin")
        if not built[family]:
            raise NearmetalError(f"--recipe built nothing into $PREFIX/bin natively for {family} (log: {log})")
    return built


def build_in_image(rootfs, mpis, recipe, source, log, wrappers):
    """Inside the image's chroot (its /proc and /dev mounted): the source bind-mounted
    read-only, the script run once per family; {family: [programs]}."""
    from . import chroot

    app = Path(rootfs) / IN_IMAGE.lstrip("/")
    (app / "src").mkdir(parents=True)
    shutil.copy2(recipe, app / "build.sh")
    chroot.run(["mount", "--bind", source, str(app / "src")], log, "mounting the source in the image")
    chroot.run(["mount", "-o", "remount,ro,bind", str(app / "src")], log, "making the source read-only")
    built = {}
    try:
        for family in mpis:
            prefix, work = f"{IN_IMAGE}/{family}", f"{IN_IMAGE}/build-{family}"
            (app / f"build-{family}").mkdir()
            env = script_env(family, wrappers[family], prefix, f"{IN_IMAGE}/src")
            argv = ["env", "-C", work, *[f"{k}={v}" for k, v in env.items()], "bash", f"{IN_IMAGE}/build.sh"]
            start = log.tell()
            try:
                chroot.in_chroot(rootfs, argv, log, f"--recipe in the image for {family}")
            except NearmetalError:
                raise NearmetalError(f"--recipe failed in the image for {family}: {log.last_line(start)} "
                                     f"(log: {log.path})") from None
            shutil.rmtree(app / f"build-{family}", ignore_errors=True)
            built[family] = _programs(app / family / "bin")
            if not built[family]:
                raise NearmetalError(f"--recipe built nothing into $PREFIX/bin in the image for {family} (log: {log.path})")
    finally:
        chroot.run(["umount", str(app / "src")], log, "unmounting the source")
    return built
