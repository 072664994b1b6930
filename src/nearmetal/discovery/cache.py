"""A small on-disk cache for discovery results, invalidated when the files they came from change.

Discovery runs several subprocesses (hundreds of ms); `nearmetal run` must add only
milliseconds over the launcher, so it reads the cached answer. The key is PATH, the
modification times of the PATH directories (installing or removing a package changes
them) and the size and mtime of every file the answer names.
"""

import marshal
import os

# marshal rather than json: json imports `re`, which alone costs ~6 ms at start-up.
CACHE_VERSION = 4


def _stamp(paths):
    out = []
    for p in paths:
        try:
            st = os.stat(p)
            # the inode too: a file replaced by an identical copy (a package reinstalled or
            # extracted again keeps size and mtime) is another file, which a staged hard link
            # would not follow
            out.append([p, st.st_mtime_ns, st.st_size, st.st_ino])
        except OSError:
            out.append([p, None, None, None])
    return out


def _key(files, inputs):
    path = os.environ.get("PATH", "")
    dirs = [d for d in path.split(os.pathsep) if d]
    return {"version": CACHE_VERSION, "path": path, "dirs": _stamp(dirs), "inputs": _stamp(inputs),
            "files": _stamp(sorted(set(files)))}


def cached(name, compute, files_of, inputs=()):
    """compute() once; reuse while PATH, the PATH directories, `inputs` (always checked,
    e.g. the probing code) and the files named by files_of(value) are unchanged."""
    from ..home import home_str

    path = os.path.join(home_str(), "cache", f"{name}.marshal")
    try:
        with open(path, "rb") as f:
            data = marshal.load(f)
        if data.get("key") == _key(data.get("files", []), inputs):
            return data["value"]
    except (OSError, ValueError, TypeError, EOFError, AttributeError):
        pass
    value = compute()
    files = files_of(value)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        marshal.dump({"key": _key(files, inputs), "files": files, "value": value}, f)
    os.replace(tmp, path)
    return value


def cached_plan(name, key, value=None, files=()):
    """Get (value=None) or put a cached plan. A hit needs the same key and unchanged files
    (size and mtime of every file the plan was computed from)."""
    import hashlib

    from ..home import home_str

    digest = hashlib.sha256(repr(key).encode()).hexdigest()[:24]
    path = os.path.join(home_str(), "cache", name, f"{digest}.marshal")
    if value is None:
        try:
            with open(path, "rb") as f:
                data = marshal.load(f)
        except (OSError, ValueError, TypeError, EOFError):
            return None
        if data.get("key") != repr(key) or data.get("stamps") != _stamp(data.get("files", [])):
            return None
        return data["value"]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    files = sorted(set(files))
    with open(tmp, "wb") as f:
        marshal.dump({"key": repr(key), "files": files, "stamps": _stamp(files), "value": value}, f)
    os.replace(tmp, path)
    return value


def per_file(name, path, compute, keep=256):
    """compute() for one file, remembered while its size and mtime are unchanged: e.g. the
    MPI a program links against, which `nearmetal run` would otherwise read with the ELF
    reader (pyelftools: ~40 ms to import) on every launch. One small table per name, the
    `keep` most recent files."""
    from ..home import home_str

    table_path = os.path.join(home_str(), "cache", f"{name}.marshal")
    path = os.path.realpath(path)
    stamp = _stamp([path])[0][1:]
    try:
        with open(table_path, "rb") as f:
            table = marshal.load(f)
        if not isinstance(table, dict):
            table = {}
    except (OSError, ValueError, TypeError, EOFError):
        table = {}
    hit = table.get(path)
    if isinstance(hit, list) and len(hit) == 2 and hit[0] == stamp and stamp[0] is not None:
        return hit[1]
    value = compute()
    table.pop(path, None)
    table[path] = [stamp, value]  # dicts keep insertion order: the oldest entries go first
    for old in list(table)[:max(0, len(table) - keep)]:
        del table[old]
    try:
        os.makedirs(os.path.dirname(table_path), exist_ok=True)
        tmp = f"{table_path}.tmp{os.getpid()}"
        with open(tmp, "wb") as f:
            marshal.dump(table, f)
        os.replace(tmp, table_path)
    except OSError:
        pass  # a cache that cannot be written only costs time
    return value
