"""A [[benchmark]] that runs any program: `command = [...]` instead of `kernel = ...`, with
the figures of merit of a `preset` and/or its own `[[benchmark.fom]]` tables, an optional
`success` pattern, and `inputs` staged into the run's working directory (apps/,
docs/applications.md).

The working directory of a program benchmark's cell is fixed (so its launch is planned
once) and made fresh before every run: emptied, then the inputs copied in. It is
WORKDIR/nm-runs/<cell> under the benchmark's (or the study's) workdir, else beside the
study's database; in containers it is mounted read-write and is the ranks' cwd.
"""

import os
import shutil
import stat

from pydantic import BaseModel, StrictBool, StrictStr, field_validator, model_validator

from ...apps.fom import Fom, pattern, relative_path
from ...errors import NearmetalError
from . import input_tree


def _exec_sized(v):
    from .fields import _fits_exec

    return _fits_exec(v)


class ProgramFields(BaseModel):
    """The keys of a program benchmark (mixed into config.Benchmark)."""

    command: list[StrictStr] | None = None
    preset: StrictStr | None = None
    fom: list[Fom] = []
    success: StrictStr | None = None
    inputs: list[StrictStr] = []
    # true: its other runs go on when its first run's FOMs or success line do not match, or a
    # run of a cell was no MPI job (None: [study] keep_going; study/execute/stops.py)
    keep_going: StrictBool | None = None

    @field_validator("command")
    @classmethod
    def _command(cls, v):
        if v is not None:
            if not v or not v[0].strip():
                raise ValueError("expected the program and its arguments, e.g. [\"gmx_mpi\", \"mdrun\"]")
            for a in v:
                _exec_sized(a)
        return v

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, v):
        from ...apps import presets

        if v is not None:   # a built-in, or a valid NAME.toml (apps/preset_file.py)
            presets.check(v)
        return v

    @field_validator("success")
    @classmethod
    def _pattern(cls, v):
        return pattern(v)

    @field_validator("inputs")
    @classmethod
    def _inputs(cls, v):
        for p in v:
            if not p or "\x00" in p or len(p) > 4096:
                raise ValueError(f"not a usable path: {p!r:.80}")
        names = [os.path.basename(p.rstrip("/")) for p in v]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"two inputs would be staged under the same name: {sorted(dup)[0]!r:.60}")
        return [os.path.abspath(os.path.expanduser(p)) for p in v]

    @model_validator(mode="after")
    def _kernel_or_command(self):
        kernel = getattr(self, "kernel", None)
        if (kernel is None) == (self.command is None):
            raise ValueError("give either kernel = \"NAME\" (a nearmetal kernel) or command = [\"PROGRAM\", ...] "
                             "(any program), not both or neither")
        if kernel is not None:
            extra = [k for k in ("preset", "success", "keep_going") if getattr(self, k) is not None]
            extra += [k for k in ("fom", "inputs") if getattr(self, k)]
            if extra:
                raise ValueError(f"{extra[0]} applies to command = [...] benchmarks, not to a kernel")
        return self

    def is_program(self):
        return self.command is not None

    def files_read(self):
        return files_read(self)


def foms_of(bench):
    """(preset or None, own FOMs) of anything with .preset and .fom (a benchmark, a one-off)."""
    from ...apps import presets

    return (presets.get(bench.preset) if bench.preset else None), list(bench.fom)


def all_foms(bench):
    """A program benchmark's figures of merit in order: its preset's, then its own."""
    preset, own = foms_of(bench)
    return list(getattr(preset, "foms", ()) if preset else ()) + own


def files_read(bench):
    """The files (in the run's working directory) the benchmark's FOMs read."""
    preset, own = foms_of(bench)
    names = list(preset.files()) if preset else []
    return tuple(dict.fromkeys(names + [f.file for f in own if f.file]))


def check_inputs(cfg, planned=None):
    """Every staged input exists (checked before anything runs): a one-line error otherwise.
    planned: the ids of the benchmarks that have cells here (None: all)."""
    for i, bench in enumerate(cfg.benchmark):
        if planned is not None and id(bench) not in planned:
            continue
        for path in getattr(bench, "inputs", []):
            if not os.path.exists(path):
                raise NearmetalError(f"benchmark[{i}] ({bench.label}): input {path} does not exist")
            try:
                input_tree.check(path)
            except NearmetalError as e:
                raise NearmetalError(f"benchmark[{i}] ({bench.label}): {e}") from None


def working_dir(config, bench, variant, cell_key, store, db_path=None):
    """(the ranks' working directory or None, whether it is nearmetal's own run directory):
    a program's fresh one per run, and one an unprivileged account (a `user` variant) can
    enter where the study names none; else the benchmark's or the study's `workdir`. Beside
    the store's database; without a store (--dry-run), beside db_path, the one it would use."""
    named = config.workdir_of(bench)
    if not (bench.is_program() or (variant.get("user") and not named)):
        return named, False
    beside = str(store.path) if store else os.path.abspath(db_path or "results/study.db")
    return run_dir(named or os.path.dirname(beside), cell_key), True


def run_dir(base, cell_key):
    """The fixed working directory of one cell's runs under base."""
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in cell_key)[:150]
    return os.path.join(base, "nm-runs", safe)


# Inputs up to this size (a file, or a directory's files together) are copied into every
# run's working directory; larger ones are not copied but shown read-only at the same name:
# natively a symbolic link to the input, in a container a read-only bind mount over a
# placeholder (the run's RunRequest.workdir_binds).
LARGE_INPUT = 64 << 20


def size_of(path):
    if not os.path.isdir(path):
        return os.path.getsize(path)
    return sum(os.lstat(os.path.join(root, f)).st_size for root, _, files in os.walk(path) for f in files)


def large_inputs(inputs, limit=LARGE_INPUT):
    """The inputs (absolute paths) that are bound rather than copied."""
    return [p for p in inputs if os.path.exists(p) and size_of(p) > limit]


def hand_over(path, user, tree=False):
    """Give nearmetal's own run directory `path` (with `tree`, also what was just staged in it)
    to the account `user` the ranks run as (a `user` variant), so its program can write beside
    its inputs, which are copies. The account may have written there before: a symbolic link
    at `path` is refused, nothing under it is followed, a file with other hard links is not
    touched, and the directory itself is handed over last (bottom-up), so nothing can be
    swapped in below it meanwhile."""
    if not user:
        return
    from ...privilege import account

    acct = account(user)  # as planning checks it: exists, not root, and nearmetal is root
    try:
        top = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as e:
        raise NearmetalError(f"run directory {path}: {e.strerror} (a symbolic link is refused)") from None
    try:
        if tree:
            for _, dirs, files, fd in os.fwalk(".", topdown=False, follow_symlinks=False, dir_fd=top):
                for name in dirs + files:
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                        continue  # a hard link to a file elsewhere: not nearmetal's copy
                    os.chown(name, acct.uid, acct.gid, dir_fd=fd, follow_symlinks=False)
        os.fchown(top, acct.uid, acct.gid)
    finally:
        os.close(top)


def stage(path, inputs, in_container=False, limit=LARGE_INPUT, user=None):
    """Make path a fresh working directory holding copies of inputs (files and directories,
    symlinks copied as links, at most `limit` bytes each: input_tree.copy), large ones linked (natively) or as placeholders for their
    bind mounts (in a container); with `user`, all of it the account's (hand_over). Called
    before every run of a program benchmark."""
    if os.path.islink(path):
        raise NearmetalError(f"working directory {path} is a symbolic link: refusing to empty it")
    try:
        if os.path.isdir(path):
            shutil.rmtree(path)  # fd-based: a link inside is removed, not followed
        os.makedirs(path)
    except OSError as e:
        raise NearmetalError(f"cannot make a fresh working directory {path}: {e.strerror or e}") from None
    large = set(large_inputs(inputs, limit))
    for src in inputs:
        dst = os.path.join(path, os.path.basename(src.rstrip("/")))
        try:
            if src in large and not in_container:
                os.symlink(src, dst)
            elif src in large:  # the mount point of its read-only bind
                os.mkdir(dst) if os.path.isdir(src) else open(dst, "w").close()
            else:
                input_tree.copy(src, dst, limit)
        except OSError as e:
            raise NearmetalError(f"cannot stage input {src}: {e.strerror or e}") from None
    hand_over(path, user, tree=True)


def read_outputs(workdir, names, stdout, stderr):
    """{"output": stdout + stderr, name: text of each file the FOMs read that exists}."""
    from ...apps.fom import MAX_FILE_BYTES

    texts = {"output": (stdout or "") + ("\n" if stdout and not stdout.endswith("\n") else "") + (stderr or "")}
    for name in names:
        path = os.path.join(workdir or ".", relative_path(name, "file"))
        try:  # a file the ranks (maybe another account) wrote: not a link, not a FIFO that never ends
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        with os.fdopen(fd, "rb") as f:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                texts[name] = f.read(MAX_FILE_BYTES).decode("utf-8", "replace")
    return texts


def records(bench, texts, wall):
    """The run's records: its preset's and its own FOMs, and its wall time (seconds)."""
    from ...apps.fom import check_success, records as fom_records

    preset, own = foms_of(bench)
    check_success(bench.success, texts)
    out = preset.records(texts) if preset else []
    out += fom_records(own, texts)
    out.append({"metric": "wall_time", "unit": "s", "value": float(wall), "point": {}})
    return out
