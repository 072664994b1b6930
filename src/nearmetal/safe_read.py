"""Reading files nearmetal did not write itself (trace directories handed over, meta.json)
with bounded memory and time: never through a symbolic link, never a FIFO, device or
directory, never more than a stated number of bytes, JSON never deeper than a stated depth.

    read_regular(path, limit, what)     the file's bytes (one-line NearmetalError otherwise)
    read_head(path, n, what)            its first n bytes (None: no such file)
    load_json(path, limit, depth, what) a JSON file, bounded in size and nesting
"""

import errno
import json
import os
import stat

from .errors import NearmetalError, one_line

MIB = 1 << 20


def _size(n):
    return f"{n // MIB} MiB" if n >= MIB else f"{n} bytes"


def _refuse(what, path, why):
    raise NearmetalError(f"{what} {one_line(os.fspath(path))}: {why}")


def read_regular(path, limit, what="file"):
    """The bytes of the regular file at `path`, at most `limit` of them (a larger file is
    refused, the limit named). O_NONBLOCK: a FIFO planted there cannot block the open;
    O_NOFOLLOW: a link (to /dev/zero, to itself) is refused, not followed."""
    try:
        st = os.lstat(path)  # before opening: opening some devices has effects of its own
    except OSError as e:
        _refuse(what, path, f"cannot read it: {e.strerror}")
    if not stat.S_ISREG(st.st_mode):
        _refuse(what, path, _kind(st.st_mode) + ": only regular files are read")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        why = "a symbolic link: only regular files are read" if e.errno == errno.ELOOP else \
            f"cannot read it: {e.strerror}"
        _refuse(what, path, why)
    with os.fdopen(fd, "rb", buffering=0) as f:
        st = os.fstat(fd)  # what was opened, whatever was swapped in since the lstat
        if not stat.S_ISREG(st.st_mode):
            _refuse(what, path, _kind(st.st_mode) + ": only regular files are read")
        if st.st_size > limit:
            _refuse(what, path, f"{st.st_size} bytes, over the limit of {_size(limit)} per file")
        buf = bytearray(st.st_size)
        view, got = memoryview(buf), 0
        try:
            while got < len(buf):  # the size fstat gave, not what a growing file offers later
                k = f.readinto(view[got:])
                if not k:
                    break
                got += k
        except OSError as e:
            _refuse(what, path, f"cannot read it: {e.strerror}")
        finally:
            view.release()
    del buf[got:]
    return buf


def read_head(path, n, what="file"):
    """The first n bytes of the regular file at `path`, None when there is none; a one-line
    NearmetalError for anything else (O_NONBLOCK: a FIFO cannot block the open), OSError
    for what cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb", buffering=0) as f:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            _refuse(what, path, _kind(mode) + ": only regular files are read")
        return f.read(n)


def _kind(mode):
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def depth(value):
    """How deeply a parsed JSON value nests (a scalar: 0), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        children = v.values() if isinstance(v, dict) else v if isinstance(v, list) else None
        if children is None:
            continue
        deepest = max(deepest, d)
        stack.extend((c, d + 1) for c in children)
    return deepest


def load_json(path, limit, max_depth, what="JSON file"):
    """The JSON value in the file at `path` (read as read_regular does), refused when it is
    not UTF-8 JSON or nests deeper than `max_depth` (renderers of it recurse)."""
    data = read_regular(path, limit, what)
    try:
        value = json.loads(data.decode("utf-8"))
    except RecursionError:
        _refuse(what, path, f"nested deeper than {max_depth} levels")
    except (UnicodeDecodeError, ValueError) as e:
        _refuse(what, path, f"not valid JSON: {e}")
    if depth(value) > max_depth:
        _refuse(what, path, f"nested deeper than {max_depth} levels")
    return value
