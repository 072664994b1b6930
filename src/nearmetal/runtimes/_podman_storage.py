"""nearmetal's private Podman storage: its own root, runroot and containers.conf.

Images built with `nearmetal image build --format podman` live here, never in the
system's default storage. Every podman call nearmetal makes uses podman_argv() as
its prefix and podman_env() added to its environment.

Storage driver: "overlay" (native kernel overlayfs; podman runs as root here). It
shares the image layer between containers, where "vfs" copies the whole rootfs
(~800 MB) for every container started. Override with $NEARMETAL_PODMAN_DRIVER (e.g.
"vfs" where overlayfs is unavailable); one storage root holds one driver only, so the
driver is part of the root's path.
"""

import os
from pathlib import Path

from ..errors import NearmetalError
from ..home import subdir

DEFAULT_DRIVER = "overlay"

# podman 4.3's default ulimits (nofile 1048576) fail with runc/crun in this setup:
# "error setting rlimit type 7: operation not permitted".
CONTAINERS_CONF = """\
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
"""


_DRIVER_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")


def storage_driver() -> str:
    """The driver's name goes into directory names and podman's argv: a plain name only."""
    driver = os.environ.get("NEARMETAL_PODMAN_DRIVER") or DEFAULT_DRIVER
    if not set(driver) <= _DRIVER_CHARS:
        raise NearmetalError(f"NEARMETAL_PODMAN_DRIVER={driver!r}: expected a storage driver name "
                             f"(lower-case letters, digits, _; e.g. overlay, vfs)")
    return driver


def _base() -> Path:
    return subdir("podman")


def storage_paths() -> tuple[Path, Path]:
    """(root, runroot) of the private storage for the current driver."""
    base = _base()
    driver = storage_driver()
    suffix = "" if driver == DEFAULT_DRIVER else f"-{driver}"
    return base / f"root{suffix}", base / f"runroot{suffix}"


def account_storage_paths(account) -> tuple[str, str]:
    """(root, runroot) of an account's own storage (run --user: rootless podman cannot use
    root's): where nearmetal run by that account keeps it, under its home. Created by podman
    itself, as the account: root never makes directories in an account's home."""
    driver = storage_driver()
    suffix = "" if driver == DEFAULT_DRIVER else f"-{driver}"
    base = os.path.join(account.home, ".cache", "nearmetal", "podman")
    return os.path.join(base, f"root{suffix}"), os.path.join(base, f"runroot{suffix}")


def podman_argv(account=None) -> list[str]:
    """The podman command prefix: ["podman", "--root", R, "--runroot", RR, "--storage-driver", D];
    with an account (run --user), that account's own storage."""
    if account is not None:
        root, runroot = account_storage_paths(account)
    else:
        root, runroot = storage_paths()
        root.mkdir(parents=True, exist_ok=True)
        runroot.mkdir(parents=True, exist_ok=True)
    return ["podman", "--root", str(root), "--runroot", str(runroot), "--storage-driver", storage_driver()]


def account_has_image(account, ref) -> bool:
    """Whether `ref` is in the account's storage: read from the storage's image list
    (containers/storage's overlay-images/images.json), so that no podman (and no pause
    process of the account's) starts to ask."""
    import json

    root, _ = account_storage_paths(account)
    try:
        with open(os.path.join(root, f"{storage_driver()}-images", "images.json")) as f:
            images = json.load(f)
    except (OSError, ValueError):
        return False
    return any(ref in (i.get("names") or []) for i in images if isinstance(i, dict))


def conf_path() -> Path:
    """Write (if changed) and return nearmetal's containers.conf."""
    path = _base() / "containers.conf"
    try:
        if path.read_text() == CONTAINERS_CONF:
            return path
    except OSError:
        pass
    tmp = path.with_name(f".containers.conf.{os.getpid()}")
    tmp.write_text(CONTAINERS_CONF)
    os.replace(tmp, path)
    return path


def podman_env() -> dict[str, str]:
    """Environment additions for every podman call nearmetal makes."""
    return {"CONTAINERS_CONF": str(conf_path())}
