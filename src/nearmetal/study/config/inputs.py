"""Reading untrusted input files and paths: study and I/O study files alike.

Everything here turns bad input into a one-line message naming the file and the key path,
never a traceback: files that are not regular or absurdly large are refused before they
are read, text that is not UTF-8 is refused with the offending byte, TOML nested beyond
reason (tomllib recurses) is refused, NUL bytes are refused wherever they hide, and
pydantic's errors are all shown, each with its key path, on one line.
"""

import os
import re
import stat
import tempfile
import tomllib

from ...errors import NearmetalError, one_line  # noqa: F401  (one_line: used here and re-exported)

MAX_FILE_BYTES = 4 << 20   # a study file of 4 MiB is already absurd; /dev/zero is infinite
MAX_DEPTH = 16             # the deepest legitimate key path is 4 levels (matrix.exclude[0].mode)
MAX_PROBLEMS = 10          # shown per error line; the rest are counted
NAME_MAX, PATH_MAX, MAX_PATH_LEVELS = 255, 4095, 256


def shown(value, limit=60):
    """A short repr of a user value for an error message."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def key_path(loc):
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


# -- files and TOML ------------------------------------------------------------------------

def read_text(path, what):
    """The text of a UTF-8 file, or a one-line error: missing, unreadable, not a regular file
    (a device, FIFO, directory), over MAX_FILE_BYTES, or not UTF-8. Newlines are translated
    as Path.read_text does, so stored study texts keep comparing equal on --resume."""
    name = one_line(str(path))
    try:
        st = os.stat(path)
        if stat.S_ISDIR(st.st_mode):
            raise NearmetalError(f"cannot read {what} {name}: it is a directory")
        if not stat.S_ISREG(st.st_mode):
            raise NearmetalError(f"cannot read {what} {name}: not a regular file (a device, FIFO or socket)")
        if st.st_size > MAX_FILE_BYTES:
            raise NearmetalError(f"cannot read {what} {name}: {st.st_size} bytes, more than a study file "
                                 f"can sensibly be ({MAX_FILE_BYTES >> 20} MiB)")
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)   # a file growing after stat() is still bounded
    except (ValueError, TypeError):
        raise NearmetalError(f"cannot read {what} {name}: the path contains a NUL byte") from None
    except OSError as e:
        raise NearmetalError(f"cannot read {what} {name}: {e.strerror or e}") from None
    if len(data) > MAX_FILE_BYTES:
        raise NearmetalError(f"cannot read {what} {name}: more than {MAX_FILE_BYTES >> 20} MiB")
    return decode(data, name)


def decode(data, source):
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise NearmetalError(f"{source}: UTF-16 or UTF-32 text (a byte-order mark): save the file as UTF-8")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise NearmetalError(f"{source}: not UTF-8 text: byte 0x{data[e.start]:02x} on line {line} "
                             f"(save the file as UTF-8)") from None
    return text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def parse_toml(text, source):
    """tomllib.loads, refusing syntax errors, nesting deep enough to exhaust tomllib's
    recursion, nesting beyond MAX_DEPTH and NUL bytes in any key or string."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise NearmetalError(one_line(f"{source}: not valid TOML: {e}")) from None
    except RecursionError:
        raise NearmetalError(f"{source}: not valid TOML: nested too deeply") from None
    _check_tree(data, source)
    return data


def _check_tree(data, source):
    stack = [((), data)]   # iterative: the tree may be as deep as tomllib's recursion allowed
    while stack:
        loc, value = stack.pop()
        if len(loc) > MAX_DEPTH:
            raise NearmetalError(one_line(f"{source}: {key_path(loc[:MAX_DEPTH])}: nested more than "
                                          f"{MAX_DEPTH} levels deep"))
        if isinstance(value, str) and "\0" in value:
            raise NearmetalError(one_line(f"{source}: {key_path(loc)}: contains a NUL byte"))
        if isinstance(value, dict):
            for k, v in reversed(value.items()):
                if "\0" in k:
                    raise NearmetalError(one_line(f"{source}: {key_path(loc + (k,))}: the key contains a NUL byte"))
                stack.append((loc + (k,), v))
        elif isinstance(value, list):
            stack.extend(((loc + (i,), v) for i, v in reversed(list(enumerate(value)))))


# -- pydantic errors -----------------------------------------------------------------------

# A union (str | int, int | "default") reports one error per member, tagged with its name
# as the last location element; such errors are shown as one problem.
_UNION_TAG = re.compile(r"^(int|str|float|bool|literal\[.*\])$")
_EXPECTED = re.compile(r"^Input should be a valid (.*)$")


def validation_error(e, source, special=None, model=None):
    """A NearmetalError listing every problem of a pydantic ValidationError, each with its
    key path, on one line. `special(loc, err, union)` may return the text for a problem;
    model: the validated class, whose keys name the closest one to an unknown key."""
    errors = e.errors()
    unions = {}
    for err in errors:
        loc = tuple(err["loc"])
        if loc and isinstance(loc[-1], str) and _UNION_TAG.match(loc[-1]):
            unions.setdefault(loc[:-1], []).append(err)
    problems, seen = [], set()
    for err in errors:
        loc = tuple(err["loc"])
        union = None
        if loc and len(unions.get(loc[:-1], ())) > 1 and isinstance(loc[-1], str) and _UNION_TAG.match(loc[-1]):
            loc, union = loc[:-1], unions[loc[:-1]]
        if loc in seen:
            continue
        seen.add(loc)
        text = special(list(loc), err, union) if special else None
        if not text and err["type"] == "extra_forbidden" and model is not None:
            text = _unknown_key(loc, model)
        problems.append(f"{key_path(loc)}: {text or _problem(err, union)}")
    more = len(problems) - MAX_PROBLEMS
    line = "; also ".join(problems[:MAX_PROBLEMS]) + (f" (and {more} more problems)" if more > 0 else "")
    return NearmetalError(one_line(f"{source}: {line}"))


def _unknown_key(loc, model):
    """'unknown key; the closest is 'repetitions'' when a key of the table at loc is alike."""
    from ...closest import closest

    table = _model_at(model, loc[:-1])
    keys = [f.alias or name for name, f in table.model_fields.items()] if table is not None else []
    near = closest(loc[-1], keys) if isinstance(loc[-1], str) else None
    return f"unknown key; the closest is '{near}'" if near else None


def _model_at(model, path):
    """The pydantic model class that validates the table at `path` (keys and list indices) of a
    `model` document, or None where the path leads to no model."""
    import typing

    from pydantic import BaseModel

    def models_in(annotation):
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return [annotation]
        return [m for arg in typing.get_args(annotation) for m in models_in(arg)]

    current = model
    for step in path:
        if isinstance(step, int):
            continue  # a list's item: the list's model is already current
        field = next((f for name, f in current.model_fields.items() if (f.alias or name) == step), None)
        found = models_in(field.annotation) if field is not None else []
        if len(found) != 1:
            return None
        current = found[0]
    return current


def _problem(err, union):
    if err["type"] == "missing":
        return "required key is missing"
    if err["type"] == "extra_forbidden":
        return "unknown key"
    msg = err["msg"].removeprefix("Value error, ")
    if union:   # "Input should be a valid string" per member -> one "a valid string, integer or number"
        matches = [_EXPECTED.match(u["msg"]) for u in union]
        kinds = list(dict.fromkeys(m.group(1) for m in matches if m))
        if all(matches):
            msg = "Input should be a valid " + (", ".join(kinds[:-1]) + " or " if len(kinds) > 1 else "") + kinds[-1]
        else:
            msg = " or ".join(dict.fromkeys(u["msg"] for u in union))
    found = err.get("input")
    if isinstance(found, dict):   # a table: what was wrong in it is in the message
        return msg if err["type"] == "value_error" else f"{msg}; found a table"
    said = shown(found)
    quoted = isinstance(found, str) and said in msg  # a message that quotes the value says it once
    return msg if quoted else f"{msg}; found {said}"


# -- directories named in study files --------------------------------------------------------

def path_problem(path):
    """Why an absolute path cannot be a directory on Linux, or None."""
    try:
        raw = os.fsencode(path)
    except UnicodeEncodeError:
        return "not a valid file name (unencodable characters)"
    if b"\0" in raw:
        return "contains a NUL byte"
    if len(raw) > PATH_MAX:
        return f"{len(raw)} bytes long; a path is at most {PATH_MAX} bytes"
    parts = [p for p in raw.split(b"/") if p]
    if any(len(p) > NAME_MAX for p in parts):
        return f"a component is longer than {NAME_MAX} bytes"
    if len(parts) > MAX_PATH_LEVELS:
        return f"{len(parts)} levels deep; at most {MAX_PATH_LEVELS}"
    return None


def expand_dir(v):
    """~, ~user and $VARS expanded, made absolute (relative to the current directory); a
    ValueError (with why) for what cannot name a directory. Creates nothing."""
    if v is None:
        return None
    if "\0" in v:
        raise ValueError("contains a NUL byte")
    full = os.path.expandvars(os.path.expanduser(v))
    if v.startswith("~") and full.startswith("~"):
        raise ValueError(f"no such user {shown(v[1:].split('/')[0])} (for a directory named ~..., write ./~...)")
    if "$" in full:
        raise ValueError(f"{shown(v)} names an environment variable that is not set")
    if not full.strip():
        raise ValueError("expected a directory path")
    try:
        full = os.path.abspath(full)
    except OSError as e:   # a relative path, and the current directory was removed
        raise ValueError(f"relative, and the current directory is unusable: {e.strerror}") from None
    why = path_problem(full)
    if why:
        raise ValueError(why)
    return full


def check_image_spec(v):
    """An image name or path that can be looked up without an OSError: no NUL, a known ~user,
    components and length within Linux's limits. Returned unchanged (it names the variant)."""
    if not v.strip():
        raise ValueError("expected an image name or path")
    if "\0" in v:
        raise ValueError("contains a NUL byte")
    full = os.path.expanduser(v)
    if v.startswith("~") and full.startswith("~"):
        raise ValueError(f"no such user {shown(v[1:].split('/')[0])}")
    why = path_problem(full)
    if why:
        raise ValueError(why)
    return v


def probe_path(path):
    """None when stat(path) succeeds or finds nothing there; else why it cannot be looked
    at (a path under /proc/1/root: permission denied), for checks before any run."""
    try:
        os.stat(os.path.expanduser(path))
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        return f"cannot be looked at ({e.strerror or e})"
    except (ValueError, RuntimeError) as e:
        return f"cannot be looked at ({one_line(str(e))})"
    return None


def _stat(path):
    """os.stat, or None when nothing is there (or a parent is not a directory)."""
    try:
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def check_workdir(path):
    """None when `path` is a directory a file can be created in, or can be created; else why
    not. Tried for real (a temporary entry, removed at once): as root, access(2) says yes to
    directories nobody can write (/proc, read-only mounts). Never raises."""
    try:
        why = path_problem(os.path.abspath(path))
        return why or _check_workdir(os.path.abspath(path))
    except OSError as e:
        where = f"{one_line(e.filename)}: " if isinstance(e.filename, str) else ""
        return f"cannot be checked ({where}{e.strerror or e})"
    except (ValueError, RecursionError) as e:
        return f"cannot be checked ({one_line(str(e))})"


def _check_workdir(path):
    st = _stat(path)
    if st is not None and not stat.S_ISDIR(st.st_mode):
        return "not a directory"
    probe = path
    while st is None:
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
        st = _stat(probe)
    if st is None or not stat.S_ISDIR(st.st_mode):
        return f"cannot be created ({one_line(probe)} is not a directory)"
    try:
        tempfile.TemporaryDirectory(dir=probe, prefix=".nearmetal-probe-").cleanup()
    except OSError as e:
        # the directory exists: what refused is creating in it (/proc: "No such file or directory")
        return "not writable" if probe == path else f"cannot be created in {one_line(probe)} ({e.strerror})"
    return None


def make_workdir(path, what="working directory"):
    """Create a directory check_workdir accepted (and its parents), one level at a time (no
    recursion however deep); a one-line error if that fails."""
    try:
        path = os.path.abspath(path)
        missing = []
        probe = path
        while not os.path.isdir(probe):
            missing.append(probe)
            parent = os.path.dirname(probe)
            if parent == probe:
                break
            probe = parent
        for d in reversed(missing):
            try:
                os.mkdir(d)
            except FileExistsError:
                if not os.path.isdir(d):
                    raise
    except OSError as e:
        raise NearmetalError(one_line(f"cannot create the {what} {path}: {e.strerror or e}")) from None
    except ValueError as e:
        raise NearmetalError(one_line(f"cannot create the {what} {path}: {e}")) from None


def check_mpi_spec(v):
    """An MPI as a study names it: FAMILY, or FAMILY@/PREFIX (an installation under a prefix)."""
    from ...discovery.mpi import spec_problem
    from ...families import names

    if "@" not in v and v not in names():  # worded as for every other choice
        quoted = [f"'{n}'" for n in names()]
        raise ValueError("Input should be " + (quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + f" or {quoted[-1]}"))
    problem = spec_problem(v)
    if problem:
        raise ValueError(problem)
    return v
