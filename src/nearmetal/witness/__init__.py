"""The witness: which MPI library each rank of *any* program really ran (nm-witness.c).

`run --witness` (and a study with `witness = true`) preloads nm-witness.so into every rank;
at exit each MPI rank writes one `nm-witness: rank=... library=... inode=... version=...`
line to stderr. The library is built on the host with only symbols glibc has had since
2.2.5, so it loads in images nearmetal did not build, and is placed under /tmp, which every
runtime shows at the same path (no mount point needed in the image): natively and in a
container the ranks preload the same file, read-only.
"""

import os

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nm-witness.c")
PREFIX = "nm-witness: "


def library():
    """The path, under /tmp, of a built nm-witness.so no older than its source."""
    from ..supervise import preloaded_library

    return preloaded_library("nm-witness", SOURCE)


FIELDS = ("rank", "pid", "program", "library", "inode", "version")


def preloaded(env, library_path):
    """The ranks' environment with library_path preloaded (after any LD_PRELOAD of theirs)."""
    env = dict(env or {})
    env["LD_PRELOAD"] = " ".join(p for p in (env.get("LD_PRELOAD", ""), library_path) if p)
    return env


def rank_env(env=None):
    """The ranks' environment with the witness preloaded (after any LD_PRELOAD of theirs)."""
    return preloaded(env, library())


def parse_lines(stderr, prefix, fields):
    """[{field: value}] from the ranks' `PREFIX field=value ...` lines, sorted by rank: the
    first occurrence of a field wins, and a value runs on over spaces (a version string, a
    path) until the next field."""
    out = []
    for line in (stderr or "").splitlines():
        if not line.startswith(prefix):
            continue
        found, key = {}, None
        for part in line[len(prefix):].split(" "):
            k, eq, v = part.partition("=")
            if eq and k in fields and k not in found:
                key, found[k] = k, v
            elif key:
                found[key] += " " + part
        out.append(found)
    return sorted(out, key=lambda f: (len(f.get("rank", "")), f.get("rank", "")))


def parse(stderr):
    """[{rank, pid, program, library, inode, version}] from the ranks' witness lines."""
    return parse_lines(stderr, PREFIX, FIELDS)
