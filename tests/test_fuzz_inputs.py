"""Fuzzing nearmetal's inputs: seeded mutations of the real study files and I/O study files
(wrong types, huge, negative and non-finite numbers, bools for ints, deep nesting, NUL
bytes, bytes that are not UTF-8, unknown and missing keys, weird names, paths, arguments
and environment values) and bad command lines for every subcommand, all run in-process
through nearmetal.cli.main, on validation and dry-run paths only.

Every case must end either in a successful dry run (a mutation can be valid) or in a clean
error: a non-zero exit, no exception but SystemExit, no traceback, one line on stderr that
names the file and the key path (study files) or the option (command lines).
"""

import json
import os
import random
import re
import tomllib
import traceback
from pathlib import Path

import pytest

from nearmetal import cli
from nearmetal.cli_parser import build_parser

REPO = Path(__file__).resolve().parents[1]
TMP = "@@TMP@@"          # replaced by the test's own directory when a case is written
DEEP = "@@DEEP@@"        # replaced by a nested array too deep for any writer to produce

SMALL_STUDY = f"""
[study]
name = "fuzz"
description = "a small native study with every kind of key"
repetitions = 2
warmup = 1
timeout = 60
seed = 11
order = "blocks"
margin = 0.05
pin = true
workdir = "{TMP}/work"
[baseline]
mode = "native"
mpi = "openmpi"
[slurm]
partition = "debug"
nodes = 1
[matrix]
mode = ["native"]
mpi = ["openmpi", "mpich"]
ranks = [2, 4]
threads = [1, 2]
zips = [["ranks", "threads"]]
exclude = [{{mpi = "mpich", ranks = 4}}]
[[benchmark]]
kernel = "pingpong"
args = ["-s", "8", "-i", "10"]
where = {{size = 8}}
env = {{NM_FUZZ = "1"}}
[[benchmark]]
kernel = "latency"
name = "lat"
ranks = [2]
threads = [1]
metrics = ["latency"]
workdir = "rel/work"
"""

SMALL_IO = f"""
[study]
name = "fuzz-io"
repetitions = 2
warmup = 0
[baseline]
mode = "native"
[io]
grid = [32, 32, 4]
steps = 1
layout = "2x1"
types = ["double"]
dir = "{TMP}/io"
nodes = 1
metric = "write"
mode = ["native"]
mpi = ["openmpi"]
[io.space]
pattern = ["serial", "shared"]
library = ["mpiio", "posix"]
io_layout = ["1x1", "2x1"]
aggregators = ["default", 1]
buffer = ["default", "1MiB"]
read = ["serial"]
[io.preselect]
enabled = true
repetitions = 2
threshold = 0.1
alpha = 0.05
"""


def _with_tmp(text, key, value):
    return re.sub(rf'^{key} = ".*"$', f'{key} = "{value}"', text, flags=re.M)


STUDY_BASES = {"quickstart": (REPO / "src/nearmetal/study/config/quickstart.toml").read_text(), "small": SMALL_STUDY}
IO_BASES = {"example": _with_tmp((REPO / "examples/io-study.toml").read_text(), "dir", f"{TMP}/io"),
            "builtin": _with_tmp((REPO / "src/nearmetal/io/builtin.toml").read_text(), "dir", f"{TMP}/io"),
            "small": SMALL_IO}

LONG = "x" * 300
WEIRD_STRINGS = ["", " ", "a\0b", "line\nbreak", "sep\u2028arator", "\x1b[31mred", "a|b#c%d", "../../x", LONG,
                 "/tmp/" + LONG, "deep/" * 300, "/proc/1/root/x", "~nosuchuser/x", "$NM_FUZZ_UNSET/x", "/dev/null",
                 "/etc/passwd", "ünï/cødé ☃", "y" * 70_000, "-", "--help", "default", "0"]
NUMBERS = [0, -1, -(2 ** 63), 2 ** 63, 10 ** 30, 1e308, -1e308, float("inf"), float("-inf"), float("nan"), 0.5, 1e-300]
OTHER_TYPES = [True, False, "text", 7, 2.5, [], [1, "a"], {}, {"k": "v"}, DEEP]
KEY_PATH = re.compile(r"^[A-Za-z_][\w-]*(\[\d+\]|\.[^:;]+)*: ")
FILE_LEVEL = ("not valid TOML", "not UTF-8", "UTF-16", "nested more than")


# -- a TOML writer: everything inline, which any table layout of the base file parses to ------

def _toml(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v != v:
        return "nan"
    if isinstance(v, float) and v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    return "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)} = {_toml(x)}" for k, x in v.items()) + "}"


def dump(data):
    return "".join(f"{json.dumps(k, ensure_ascii=False)} = {_toml(v)}\n" for k, v in data.items())


def nodes(data):
    """(key path tuple, value) of every key and array element, tables included."""
    out, stack = [], [((), data)]
    while stack:
        loc, v = stack.pop()
        if loc:
            out.append((loc, v))
        items = v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, list) else ()
        stack.extend((loc + (k,), x) for k, x in items)
    return sorted(out, key=lambda n: [str(p) for p in n[0]])


def _parent(data, loc):
    for part in loc[:-1]:
        data = data[part]
    return data


def key_path(loc):
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


# -- mutations: (text or bytes, mutated key path or None, whether that path must be named) --

def mutate(rng, text):
    data = tomllib.loads(text)
    kind = rng.choice(["type", "type", "number", "bool", "string", "string", "delete", "unknown",
                       "deep", "duplicate", "bytes"])
    all_nodes = nodes(data)
    if kind == "bytes":
        return _mutate_bytes(rng, text), kind, None
    if kind == "unknown":
        tables = [()] + [loc for loc, v in all_nodes if isinstance(v, dict)]
        loc = rng.choice(tables) + (f"bogus_{rng.randrange(100)}",)
        _parent(data, loc)[loc[-1]] = rng.choice(OTHER_TYPES[:5])
        free = any(p in ("where", "env", "exclude") for p in loc)   # tables with user-chosen keys
        return dump(data), kind, (loc, not free)
    if kind == "deep":
        loc, _ = rng.choice(all_nodes)
        _parent(data, loc)[loc[-1]] = DEEP
        depth = rng.choice([20, 300, 5000])
        return dump(data).replace(json.dumps(DEEP), "[" * depth + "]" * depth), kind, (loc, False)
    if kind == "duplicate":
        lists = [(loc, v) for loc, v in all_nodes if isinstance(v, list) and v]
        if lists:
            loc, v = rng.choice(lists)
            v.append(v[0])
            return dump(data), kind, (loc, False)
    pools = {"number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
             "bool": lambda v: isinstance(v, int) and not isinstance(v, bool),
             "string": lambda v: isinstance(v, str)}
    candidates = [(loc, v) for loc, v in all_nodes if pools.get(kind, lambda v: True)(v)] or all_nodes
    loc, old = rng.choice(candidates)
    parent = _parent(data, loc)
    if kind == "delete":
        del parent[loc[-1]]
        return dump(data), kind, (loc, False)
    if kind == "type":
        new = rng.choice([x for x in OTHER_TYPES if type(x) is not type(old)])
    else:
        new = {"number": NUMBERS, "bool": [True, False], "string": WEIRD_STRINGS}[kind]
        new = rng.choice(new)
    parent[loc[-1]] = new
    text = dump(data)
    if new == DEEP:
        text = text.replace(json.dumps(DEEP), "[" * 40 + "]" * 40)
    # A different TOML type where strict validation applies must be refused at that path.
    strict = kind in ("type", "bool") and not any(p in ("where", "exclude", "buffer") for p in loc)
    return text, kind, (loc, strict)


def _mutate_bytes(rng, text):
    raw = text.encode()
    at = rng.randrange(len(raw))
    how = rng.choice(["latin-1", "utf-16", "invalid", "nul", "truncate", "bom", "crlf", "deep"])
    if how == "latin-1":
        return text.replace("=", "= \"caf\xe9\"  #", 1).encode("latin-1", "replace")
    if how == "utf-16":
        return text.encode("utf-16")
    if how == "invalid":
        return raw[:at] + bytes([rng.randrange(0x80, 0x100)]) + raw[at:]
    if how == "nul":
        return raw[:at] + b"\0" + raw[at:]
    if how == "truncate":
        return raw[:at]
    if how == "bom":
        return b"\xef\xbb\xbf" + raw
    if how == "crlf":
        return raw.replace(b"\n", b"\r\n")
    return raw + b"\nzz = " + b"[" * 5000 + b"]" * 5000 + b"\n"


def _cases(bases, prefix, seeds, per_seed):
    out = []
    for seed in seeds:
        rng = random.Random(seed)
        for i in range(per_seed):
            name = rng.choice(sorted(bases))
            content, kind, target = mutate(rng, bases[name])
            out.append(pytest.param(content, target, id=f"{prefix}-{name}-s{seed}-{i}-{kind}"))
    return out


STUDY_CASES = _cases(STUDY_BASES, "study", seeds=(1, 2, 3), per_seed=80)
IO_CASES = _cases(IO_BASES, "io", seeds=(4, 5), per_seed=80)


def mutate_baseline(rng, text):
    """A [baseline] selector whose mode, runtime, MPI or image may lie outside the matrix (and
    a matrix whose modes may lack the baseline's): each such study plans, or is refused in
    one line at `baseline` (a TypeError in plan.image_label was found this way)."""
    data = tomllib.loads(text)
    base = data.setdefault("baseline", {})
    base.pop("variant", None)
    base["mode"] = rng.choice(["native", "hybrid", "bind"])
    for key, pool in (("runtime", ["charliecloud", "bwrap", "podman", "apptainer"]), ("mpi", ["openmpi", "mpich"]),
                      ("image", ["default", "nm-no-such-image", f"{TMP}/img"])):
        if rng.random() < 0.5:
            base[key] = rng.choice(pool)
        else:
            base.pop(key, None)
    matrix = data.setdefault("matrix", {})
    if rng.random() < 0.5:
        matrix["mode"] = rng.sample(["native", "hybrid", "bind"], rng.randint(1, 3))
    if rng.random() < 0.3:
        matrix["runtime"] = rng.sample(["charliecloud", "bwrap"], rng.randint(1, 2))
    return dump(data), "baseline", None


BASELINE_CASES = [pytest.param(*mutate_baseline(random.Random(seed), STUDY_BASES[name])[::2],
                               id=f"baseline-{name}-s{seed}")
                  for seed in range(6, 46) for name in sorted(STUDY_BASES)]


# -- running and judging -------------------------------------------------------------------

@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """Relative paths land in the test's directory; one set variable for $VARS."""
    cwd = tmp_path / "cwd" / "a" / "b"
    cwd.mkdir(parents=True)
    monkeypatch.chdir(cwd)
    monkeypatch.delenv("NM_FUZZ_UNSET", raising=False)
    return tmp_path


def invoke(argv, capsys):
    """(exit status, stdout, stderr) of nearmetal.cli.main(argv) in this process; an escaping
    exception other than SystemExit fails the case with its traceback."""
    try:
        rc = cli.main(argv)
    except SystemExit as e:
        rc = e.code
    except BaseException:
        out, err = capsys.readouterr()
        pytest.fail(f"nearmetal {' '.join(map(repr, argv))[:300]} raised:\n{traceback.format_exc()}\nstderr: {err[-2000:]}")
    out, err = capsys.readouterr()
    return rc, out, err


def write_case(sandbox, content, name="case.toml"):
    path = sandbox / name
    if isinstance(content, str):
        content = content.replace(TMP, str(sandbox)).encode()
    else:
        content = content.replace(TMP.encode(), str(sandbox).encode())
    path.write_bytes(content)
    return path


def judge_file_case(rc, out, err, path, command, target):
    """A successful dry run, or one clean line naming the file and a key path."""
    assert "Traceback" not in err, err
    if rc == 0:
        assert out.strip(), "a dry run that printed nothing"
        return "accepted"
    assert rc != 0 and rc is not None, (rc, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err[-3000:]
    line = lines[0]
    head = f"nearmetal {command}: error: {path}: "
    assert line.startswith(head), line[:500]
    detail = line[len(head):]
    assert detail.startswith(FILE_LEVEL) or KEY_PATH.match(detail), line[:500]
    if target and target[1]:
        loc = target[0]
        named = [key_path(loc[:n]) for n in range(len(loc), min(2, len(loc)) - 1, -1)]
        assert any(f"{p}:" in detail or f"{p}[" in detail for p in named), (key_path(loc), line[:500])
    return "refused"


@pytest.mark.parametrize("content, target", STUDY_CASES)
def test_malformed_study_files(content, target, sandbox, capsys):
    path = write_case(sandbox, content)
    rc, out, err = invoke(["study", str(path), "--dry-run"], capsys)
    judge_file_case(rc, out, err, path, "study", target)


@pytest.mark.parametrize("content, target", BASELINE_CASES)
def test_baselines_outside_the_matrix(content, target, sandbox, capsys):
    path = write_case(sandbox, content)
    rc, out, err = invoke(["study", str(path), "--dry-run"], capsys)
    judge_file_case(rc, out, err, path, "study", target)


@pytest.mark.parametrize("content, target", IO_CASES)
def test_malformed_io_study_files(content, target, sandbox, capsys):
    path = write_case(sandbox, content)
    rc, out, err = invoke(["io", "sweep", str(path), "--dry-run"], capsys)
    judge_file_case(rc, out, err, path, "io sweep", target)


@pytest.mark.parametrize("command", [["study"], ["io", "sweep"]])
@pytest.mark.parametrize("what, expect", [("missing", "No such file"), ("directory", "is a directory"),
                                          ("/dev/zero", "not a regular file"), ("fifo", "not a regular file"),
                                          ("huge", "MiB"), ("nul-in-name", "NUL byte"), ("long-name", "too long")])
def test_unreadable_study_files(command, what, expect, sandbox, capsys):
    """Refused before reading: nothing that is not a small regular file is read."""
    path = {"missing": sandbox / "none.toml", "directory": sandbox, "/dev/zero": "/dev/zero",
            "fifo": sandbox / "fifo.toml", "huge": sandbox / "huge.toml", "nul-in-name": "a\0b.toml",
            "long-name": sandbox / ("n" * 300 + ".toml")}[what]
    if what == "fifo":
        os.mkfifo(path)
    if what == "huge":
        path.write_bytes(b"# padding\n" * 600_000)
    rc, out, err = invoke(command + [str(path), "--dry-run"], capsys)
    assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"nearmetal {' '.join(command)}: error: cannot read ") and expect in err, err


def test_fuzz_corpus_size():
    """The generator is deterministic and large: the counts reported in the change."""
    assert len(STUDY_CASES) == 240 and len(IO_CASES) == 160
    assert len({p.id for p in STUDY_CASES + IO_CASES}) == 400


# -- command lines ---------------------------------------------------------------------------

def _leaves():
    """(subcommand path, parser) of every leaf subcommand, from the real argparse tree."""
    import argparse

    out, stack = [], [((), build_parser())]
    while stack:
        path, parser = stack.pop()
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if subs:
            stack.extend((path + (name,), p) for name, p in subs[0].choices.items())
        else:
            out.append((path, parser))
    return sorted(out, key=lambda leaf: leaf[0])


def _frame(path):
    """(before, after): what makes a leaf's command line complete and harmless once the bad
    part is between them (run and bench only ever dry-run)."""
    if path == ("run",):
        return ["run", "--dry-run"], ["--", "nm-mpi-info"]
    if path == ("bench",):
        return ["bench", "mpi-info", "--dry-run"], []
    if path == ("import",):
        return ["import", "x.csv", "--study", "s", "--baseline", "native"], []
    if path == ("io", "sweep"):
        return ["io", "sweep", "--dry-run"], []
    if path == ("image", "import"):
        return ["image", "import", "nosuch.sif", "--name", "nm-fuzz"], []
    return list(path), []


def _bad_values(action):
    """Values argparse itself refuses for this option (so no command ever runs)."""
    from nearmetal import cli_parser

    kind = getattr(action.type, "__qualname__", "")
    if action.type is cli_parser._positive:
        return ["0", "-1", "abc", ""]                       # unbounded (Slurm nodes): no huge values
    if kind.startswith("_at_most"):
        return ["0", "-1", "abc", "", "99999999999999999999999", "1.5"]
    if action.type is float:
        return ["abc", "", "1,5"]
    if kind.startswith("_csv"):
        return ["lam", ",", "openmpi,lam"]
    if action.type is cli_parser._env_pair:
        return ["NOEQUALS", "1A=2", "=v", "A B=1"]
    if action.choices:
        return ["teleport", "", "NATIVE", "x" * 300, "a\nb"]
    return []


def _cli_cases():
    cases = [pytest.param([], "COMMAND", id="no-command"), pytest.param(["frobnicate"], "frobnicate", id="unknown-command"),
             pytest.param(["--no-such-option"], "COMMAND", id="unknown-global-option")]
    for path, parser in _leaves():
        before, after = _frame(path)
        name = "-".join(path)
        cases.append(pytest.param(before + ["--no-such-option"] + after, "--no-such-option", id=f"{name}-unknown-option"))
        for action in parser._actions:
            if not action.option_strings or action.nargs == 0 or action.option_strings[0] == "--help":
                continue
            opt = action.option_strings[-1]
            if path in (("run",), ("bench",)) or action.required or path == ("import",):
                cases.append(pytest.param(before + after[:0] + [opt], opt, id=f"{name}-{opt}-without-value"))
            else:
                cases.append(pytest.param(before + [opt], opt, id=f"{name}-{opt}-without-value"))
            for i, value in enumerate(_bad_values(action)):
                cases.append(pytest.param(before + [opt, value] + after, opt, id=f"{name}-{opt}-bad{i}"))
            if action.required:
                rest = list(before)
                at = rest.index(opt)
                cases.append(pytest.param(rest[:at] + rest[at + 2:], opt, id=f"{name}-{opt}-missing"))
    for group in ("image", "cluster", "kernels", "io"):
        cases.append(pytest.param([group], "ACTION", id=f"{group}-without-action"))
    cases.append(pytest.param(["import", "--study", "s", "--baseline", "native"], "CSV", id="import-without-csv"))
    return cases


CLI_CASES = _cli_cases()


@pytest.mark.parametrize("argv, expect", CLI_CASES)
def test_bad_command_lines(argv, expect, sandbox, capsys):
    rc, out, err = invoke(argv, capsys)
    assert rc == 2, (rc, out[-500:], err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "error:" in err and expect in err, err


def _semantic_cases():
    """Command lines argparse accepts and nearmetal refuses ({S}: the test's directory)."""
    return [
        (["study", "{S}/none.toml", "--dry-run"], "none.toml: No such file"),
        (["io", "sweep", "{S}/none.toml", "--dry-run"], "none.toml: No such file"),
        (["report", "--db", "{S}/none.db"], "none.db"),
        (["io", "best", "--db", "{S}/none.db"], "none.db"),
        (["report", "--db", "/etc/passwd"], "not a nearmetal results database"),
        (["import", "{S}/none.csv", "--study", "s", "--baseline", "native", "--db", "{S}/r/x.db"], "none.csv"),
        (["import", "{S}/none.csv", "--study", "s", "--baseline", "native", "--margin", "nan"], "--margin"),
        (["bench", "no-such-kernel", "--dry-run"], "no-such-kernel"),
        (["bench", "latency", "-n", "3", "--dry-run"], "-n 3"),
        (["doctor", "--program", "x"], "program not found on PATH: x"),
        (["run", "--dry-run"], "no program"),
        (["run", "--dry-run", "--", "nm-mpi-info", ":"], "empty MPMD component"),
        (["run", "--workdir", "/proc/1/root/x", "--dry-run", "--", "nm-mpi-info"], "--workdir"),
        (["run", "--workdir", "{S}/missing", "--dry-run", "--", "nm-mpi-info"], "--workdir"),
        (["run", "--workdir", "x" * 300, "--dry-run", "--", "nm-mpi-info"], "--workdir"),
        (["run", "--mode", "hybrid", "--image", "no-such-image", "--dry-run", "--", "nm-mpi-info"], "no-such-image"),
        (["run", "--mode", "bind", "--image", "{S}", "--dry-run", "--", "nm-mpi-info"], "not a nearmetal image"),
        (["run", "--dry-run", "--", "nm-mpi-info", ":", "-n", "0", "--", "nm-mpi-info"], "-n"),
        pytest.param(["run", "--mode", "hybrid", "--image", "/proc/1/root", "--dry-run", "--", "nm-mpi-info"],
                     "/proc/1/root"),
        pytest.param(["run", "--mode", "bind", "--image", "x" * 300, "--dry-run", "--", "nm-mpi-info"], "xxx",),
        pytest.param(["run", "--mode", "bind", "--image", "~nosuchuser/x", "--dry-run", "--", "nm-mpi-info"],
                     "nosuchuser"),
        pytest.param(["run", "--mode", "hybrid", "--image", "a\nb", "--dry-run", "--", "nm-mpi-info"], "no image",),
        pytest.param(["bench", "x\ny", "--dry-run"], "unknown kernel"),
        pytest.param(["report", "--db", "{S}/a\nb.db"], "no results database"),
    ]


@pytest.mark.parametrize("argv, expect", _semantic_cases())
def test_refused_command_lines(argv, expect, sandbox, capsys):
    argv = [a.replace("{S}", str(sandbox)) for a in argv]
    rc, out, err = invoke(argv, capsys)
    assert rc == 2, (rc, out[-500:], err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "error:" in err and expect in err, err
