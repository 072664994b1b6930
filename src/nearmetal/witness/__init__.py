"""The witness: which MPI library each rank of *any* program really ran (nm-witness.c).

`run --witness` (and a study with `witness = true`) preloads nm-witness.so into every rank;
at exit each MPI rank writes one `nm-witness: rank=... library=... inode=... version=...`
line to stderr. The library is built on the host with only symbols glibc has had since
2.2.5, so it loads in images nearmetal did not build, and is placed under /tmp, which every
runtime shows at the same path (no mount point needed in the image): natively and in a
container the ranks preload the same file, read-only.
"""

import os

from ..home import home_str

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nm-witness.c")
FLAGS = ["-O2", "-Wall", "-shared", "-fPIC", "-fno-stack-protector", "-U_FORTIFY_SOURCE"]
PREFIX = "nm-witness: "


def library():
    """The path, under /tmp, of a built nm-witness.so no older than its source."""
    from ..supervise import build_tool

    built = build_tool(os.path.join(home_str(), "tools", "nm-witness.so"), SOURCE, flags=FLAGS)
    shared = os.path.join("/tmp", f"nearmetal-{os.getuid()}")
    os.makedirs(shared, mode=0o700, exist_ok=True)
    st = os.lstat(shared)
    if not os.path.isdir(shared) or os.path.islink(shared) or st.st_uid != os.getuid():
        from ..errors import NearmetalError

        raise NearmetalError(f"{shared} is not a directory of this user's: refusing to place the witness there")
    target = os.path.join(shared, f"nm-witness-{int(os.stat(built).st_mtime)}.so")
    if not os.path.exists(target):
        import shutil

        tmp = f"{target}.{os.getpid()}"
        shutil.copyfile(built, tmp)
        os.chmod(tmp, 0o555)
        os.replace(tmp, target)
    return target


def rank_env(env=None):
    """The ranks' environment with the witness preloaded (after any LD_PRELOAD of theirs)."""
    env = dict(env or {})
    env["LD_PRELOAD"] = " ".join(p for p in (env.get("LD_PRELOAD", ""), library()) if p)
    return env


def parse(stderr):
    """[{rank, pid, program, library, inode, version}] from the ranks' witness lines."""
    out = []
    for line in (stderr or "").splitlines():
        if not line.startswith(PREFIX):
            continue
        fields, key = {}, None
        for part in line[len(PREFIX):].split(" "):
            k, eq, v = part.partition("=")
            if eq and k in ("rank", "pid", "program", "library", "inode", "version"):
                key, fields[k] = k, v
            elif key:
                fields[key] += " " + part  # a version string has spaces
        out.append(fields)
    return sorted(out, key=lambda f: (len(f.get("rank", "")), f.get("rank", "")))
