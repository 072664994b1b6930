"""Provenance of a program benchmark's runs, stored in the run's context and shown in the
report's environment: which file ran (as the ranks saw it), its SHA-256, the program's
version as it reports it (from the preset), and the SHA-256 of each staged input (a
directory: of its files' names and contents, in order). The image's digest is already part
of every container run's context."""

import hashlib
import os
import stat


def file_digest(path, follow=True):
    """SHA-256 of a regular file (None for anything else: a device or FIFO is never read),
    remembered while its size and mtime are unchanged (a large application is hashed once,
    not once per cell)."""
    from ...discovery.cache import per_file

    def compute():
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | (0 if follow else os.O_NOFOLLOW))
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            h = hashlib.sha256()
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        return "sha256:" + h.hexdigest()

    try:
        return per_file("sha256", path, compute)
    except OSError:
        return None


def input_digest(path):
    """A staged input's digest: a file's, or a tree's names and contents in order, a
    symbolic link inside it as its target's text (never followed, as it is staged)."""
    if os.path.isfile(path):
        return file_digest(path)
    h = hashlib.sha256()
    for root, dirs, files in os.walk(path):  # links to directories are listed, not entered
        dirs.sort()
        for name in sorted(files + [d for d in dirs if os.path.islink(os.path.join(root, d))]):
            full = os.path.join(root, name)
            h.update(os.path.relpath(full, path).encode("utf-8", "surrogateescape") + b"\0")
            if os.path.islink(full):
                h.update(b"link:" + os.fsencode(os.readlink(full)) + b"\0")
            else:
                h.update((file_digest(full, follow=False) or "unreadable").encode() + b"\0")
    return "sha256:" + h.hexdigest()


def program_file(resolved, program):
    """(path the ranks run, its file on the host) of a program benchmark's command[0]."""
    from ...errors import NearmetalError
    from ...program_paths import container_program, host_program

    family = resolved.installation["family"]
    try:
        if resolved.in_container:
            return container_program(resolved.image, program, family)
        path = host_program(program, family)
        return path, path
    except NearmetalError:
        return program, None


def of_program(resolved, bench, texts):
    """The "program" entry of a cell's context."""
    from ..config.program import foms_of

    path, host_file = program_file(resolved, bench.command[0])
    preset, _ = foms_of(bench)
    out = {"path": path, "sha256": file_digest(str(host_file)) if host_file else None,
           "version": preset.program_version(texts) if preset else None}
    if bench.inputs:
        out["inputs"] = {os.path.basename(p.rstrip("/")): input_digest(p) for p in bench.inputs}
    return out
