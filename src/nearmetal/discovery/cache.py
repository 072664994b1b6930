"""A small on-disk cache for discovery results, invalidated when the files they came from change.

Discovery runs several subprocesses (hundreds of ms); `nearmetal run` must add only
milliseconds over the launcher, so it reads the cached answer instead.
"""

import json
import os

CACHE_VERSION = 1


def _stamp(paths):
    out = []
    for p in sorted(set(paths)):
        try:
            st = os.stat(p)
            out.append([p, st.st_mtime_ns, st.st_size])
        except OSError:
            out.append([p, None, None])
    return out


def cached(name, input_paths, compute):
    from ..home import home

    path = home() / "cache" / f"{name}.json"
    key = {"version": CACHE_VERSION, "inputs": _stamp(input_paths), "path": os.environ.get("PATH", "")}
    try:
        with open(path) as f:
            data = json.load(f)
        if data.get("key") == key:
            return data["value"]
    except (OSError, ValueError):
        pass
    value = compute()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    with open(tmp, "w") as f:
        json.dump({"key": key, "value": value}, f, indent=1)
    os.replace(tmp, path)
    return value
