"""OSU-compatible MPI micro-benchmarks (nm-latency, nm-bw, nm-bibw, nm-allgather, nm-alltoall,
nm-allreduce, nm-bcast, nm-barrier) and the all-pairs matrix (nm-pairs), with real MPI ranks:
natively for both MPIs, oversubscribed, and in containers (hybrid and bind on the default
image); OSU's output layout; validation of received data (a corrupted buffer must fail the
run); the parsers, fed real OSU output and our own.

Iteration counts are tiny (-i/-x): these tests check behaviour, never timings.
"""

import json
import re
import time

import pytest
from jsonschema import Draft202012Validator

from conftest import REPO, nearmetal
from nearmetal import kernels
from nearmetal.kernels.parsers import osu as osu_parser
from nearmetal.kernels.parsers import pairs as pairs_parser

FAMILIES = ("openmpi", "mpich")
VALIDATOR = Draft202012Validator(json.loads((REPO / "src/nearmetal/schemas/bench-record.schema.json").read_text()))
FAST = ["-i", "5", "-x", "1"]
# Size ranges that cross OSU's LARGE_MESSAGE_SIZE (8192) where it is cheap.
RANGES = {"latency": (0, 64), "bw": (1024, 16384), "bibw": (1024, 16384),
          "allgather": (1, 16), "alltoall": (1, 16), "allreduce": (1, 16), "bcast": (2048, 16384)}
PT2PT = ("latency", "bw", "bibw")
COLLECTIVES = ("allgather", "alltoall", "allreduce", "bcast")
PAIRS_ARGS = ["-i", "20", "-x", "2", "-S", "65536", "-I", "2", "-X", "1"]


def expected_sizes(kernel, lo, hi):
    """The sizes OSU's loop visits: lo, then doubling (0 -> 1); size 0 only for latency,
    and whole floats only for allreduce."""
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s = s * 2 if s else 1
    if kernel != "latency":
        out = [s for s in out if s >= 1]
    if kernel == "allreduce":
        out = [s for s in out if s >= 4]
    return out


def size_args(kernel):
    lo, hi = RANGES[kernel]
    return ["-m", f"{lo}:{hi}"]


def bench(kernel, *launch, kargs=(), json_out=True):
    argv = ["bench", kernel, *launch] + (["--json"] if json_out else []) + ["--", *kargs]
    out = nearmetal(*argv, timeout=300)
    assert out.returncode == 0, f"exit {out.returncode}\nstdout:\n{out.stdout}\nstderr:\n{out.stderr}"
    return out


def json_records(out):
    recs = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert recs, out.stdout
    for r in recs:
        errors = sorted(VALIDATOR.iter_errors(r), key=str)
        assert not errors, f"{r}: {errors[0].message}"
    return recs


def check_sizes(recs, kernel, metric):
    lo, hi = RANGES[kernel]
    got = [r["params"]["size"] for r in recs if r["metric"] == metric]
    assert got == expected_sizes(kernel, lo, hi)


def check_launch(recs, kernel, mode, family, ranks):
    for r in recs:
        assert r["kernel"] == kernel
        p = r["params"]
        assert (p["mode"], p["mpi"], p["ranks"]) == (mode, family, ranks)
        assert r["value"] >= 0


# ------------------------------------------------------------------ natively, 2 ranks


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("kernel", PT2PT)
def test_pt2pt_native(kernel, family, host_mpis):
    recs = json_records(bench(kernel, "--mpi", family, kargs=size_args(kernel) + FAST))
    check_launch(recs, kernel, "native", family, 2)
    metric, unit = ("latency", "us") if kernel == "latency" else ("bandwidth", "MB/s")
    assert {(r["metric"], r["unit"]) for r in recs} == {(metric, unit)}
    check_sizes(recs, kernel, metric)
    assert all(r["value"] > 0 for r in recs if r["params"]["size"] > 0)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("kernel", COLLECTIVES + ("barrier",))
def test_collective_native_full(kernel, family, host_mpis):
    kargs = (size_args(kernel) if kernel != "barrier" else []) + ["-f", "-i", "7", "-x", "1"]
    recs = json_records(bench(kernel, "--mpi", family, kargs=kargs))
    check_launch(recs, kernel, "native", family, 2)
    by_point = {}
    for r in recs:
        by_point.setdefault(r["params"].get("size"), {})[r["metric"]] = r
    if kernel == "barrier":
        assert list(by_point) == [None], "the barrier has no size column"
    else:
        assert sorted(by_point) == expected_sizes(kernel, *RANGES[kernel])
    for point in by_point.values():
        assert set(point) == {"latency", "latency_min", "latency_max", "iterations"}
        assert point["iterations"]["value"] == 7 and point["iterations"]["unit"] == "count"
        assert {point[m]["unit"] for m in ("latency", "latency_min", "latency_max")} == {"us"}
        assert point["latency_min"]["value"] <= point["latency"]["value"] <= point["latency_max"]["value"]


# ------------------------------------------------------------------ OSU's output layout

HEADERS = {
    "latency": ("# nearmetal OSU-compatible MPI Latency Test", "# Size          Latency (us)"),
    "bw": ("# nearmetal OSU-compatible MPI Bandwidth Test", "# Size      Bandwidth (MB/s)"),
    "bibw": ("# nearmetal OSU-compatible MPI Bi-Directional Bandwidth Test", "# Size      Bandwidth (MB/s)"),
    "allgather": ("# nearmetal OSU-compatible MPI Allgather Latency Test", None),
    "alltoall": ("# nearmetal OSU-compatible MPI All-to-All Personalized Exchange Latency Test", None),
    "allreduce": ("# nearmetal OSU-compatible MPI Allreduce Latency Test", None),
    "bcast": ("# nearmetal OSU-compatible MPI Broadcast Latency Test", None),
    "barrier": ("# nearmetal OSU-compatible MPI Barrier Latency Test", None),
}
COLL_HEADER = "# Size       Avg Latency(us)"
COLL_HEADER_FULL = "# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations"
BARRIER_HEADER_FULL = "# Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations"


def check_layout(kernel, text, full):
    """OSU 7's printf formats with one more decimal: '%-10d%18.3f' rows (collectives: +
    '%18.3f%18.3f%12d' with -f; barrier: '%17.3f' without a size column); OSU prints 2
    decimals, too coarse for a 3% margin at sub-microsecond latencies (common/osu.h)."""
    lines = [l for l in text.splitlines() if l.strip()]
    title, columns = HEADERS[kernel]
    if columns is None:
        columns = {("barrier", True): BARRIER_HEADER_FULL, ("barrier", False): "# Avg Latency(us)"}.get(
            (kernel, full), COLL_HEADER_FULL if full else COLL_HEADER)
    assert lines[0] == title and lines[1] == columns, lines[:3]
    rows = [l for l in lines if not l.startswith("#")]
    assert rows
    value, extra = r" +\d+\.\d{3}", r" +\d+\.\d{3} +\d+\.\d{3} +\d+"
    if kernel == "barrier":
        pattern, width = value + (extra if full else ""), 17 + (48 if full else 0)
    else:
        pattern, width = r"\d+" + value + (extra if full else ""), 28 + (48 if full else 0)
    for row in rows:
        assert re.fullmatch(pattern, row) and len(row) == width, repr(row)
    return rows


@pytest.mark.parametrize("kernel", PT2PT)
def test_pt2pt_text_is_osu_layout_and_parses_back(kernel, host_mpis):
    out = bench(kernel, "--mpi", "mpich", kargs=size_args(kernel) + FAST, json_out=False)
    rows = check_layout(kernel, out.stdout, full=False)
    assert [int(r.split()[0]) for r in rows] == expected_sizes(kernel, *RANGES[kernel])
    recs = kernels.parse(kernels.get(kernel), out.stdout, {"mode": "native", "mpi": "mpich", "ranks": 2, "threads": 1})
    assert [(r["params"]["size"], r["value"]) for r in recs] == [(int(r.split()[0]), float(r.split()[1])) for r in rows]


# ------------------------------------------------------------------ oversubscribed collectives

OVERSUBSCRIBED = {"allgather": 3, "alltoall": 4, "allreduce": 3, "bcast": 4, "barrier": 3}


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("kernel", sorted(OVERSUBSCRIBED))
def test_collective_oversubscribed(kernel, family, host_mpis):
    """3-4 ranks on this machine's cores; text output in OSU's layout, parsed back."""
    ranks = OVERSUBSCRIBED[kernel]
    full = family == "openmpi"
    kargs = (["-m", "1:8"] if kernel != "barrier" else []) + (["-f"] if full else []) + ["-i", "3", "-x", "1"]
    out = bench(kernel, "--mpi", family, "-n", str(ranks), kargs=kargs, json_out=False)
    rows = check_layout(kernel, out.stdout, full)
    recs = kernels.parse(kernels.get(kernel), out.stdout, {"mode": "native", "mpi": family, "ranks": ranks, "threads": 1})
    assert len(recs) == len(rows) * (4 if full else 1)
    if kernel != "barrier":
        assert sorted({r["params"]["size"] for r in recs}) == expected_sizes(kernel, 1, 8)


# ------------------------------------------------------------------ all-pairs matrix


@pytest.mark.parametrize("family", FAMILIES)
def test_pairs_native(family, host_mpis):
    """3 ranks: 3 unordered pairs, each with a latency and a bandwidth record."""
    text = bench("pairs", "--mpi", family, "-n", "3", kargs=PAIRS_ARGS, json_out=False).stdout
    assert "# pairs: ranks=3 order=unordered latency_size=4 latency_iterations=20" in text
    assert re.search(r"^Latency \(us\).*\n +rank +0 +1 +2 *\n +0 +- ", text, re.M), text
    assert re.search(r"^Bandwidth \(MB/s\)", text, re.M), text
    for a in range(3):  # the heat map rows: a value and a shade character per other rank
        row = re.search(rf"^ +{a}((?: +(?:-|\d+\.\d+ [.:;=+*#%@]))+) *$", text.split("Bandwidth")[0], re.M)
        assert row and row.group(1).count("-") == 1, text
    recs = kernels.parse(kernels.get("pairs"), text, {"mode": "native", "mpi": family, "ranks": 3, "threads": 1})
    for r in recs:
        assert not list(VALIDATOR.iter_errors(r)), r
    lat = {(r["params"]["src"], r["params"]["dst"]): r for r in recs if r["metric"] == "latency"}
    bw = {(r["params"]["src"], r["params"]["dst"]): r for r in recs if r["metric"] == "bandwidth"}
    assert sorted(lat) == sorted(bw) == [(0, 1), (0, 2), (1, 2)]
    assert all(r["unit"] == "us" and r["params"]["size"] == 4 and r["value"] > 0 for r in lat.values())
    assert all(r["unit"] == "MB/s" and r["params"]["size"] == 65536 and r["value"] > 0 for r in bw.values())


# ------------------------------------------------------------------ in containers

CONTAINER_FAMILY = {"latency": "openmpi", "bw": "mpich", "bibw": "openmpi", "allgather": "mpich",
                    "alltoall": "openmpi", "allreduce": "mpich", "bcast": "openmpi", "barrier": "mpich",
                    "pairs": "openmpi"}


@pytest.mark.parametrize("mode", ["hybrid", "bind"])
@pytest.mark.parametrize("kernel", list(CONTAINER_FAMILY))
def test_in_container(kernel, mode, default_image):
    family = CONTAINER_FAMILY[kernel]
    if kernel == "pairs":
        kargs = PAIRS_ARGS
    elif kernel == "barrier":
        kargs = FAST
    else:
        kargs = size_args(kernel) + FAST
    recs = json_records(bench(kernel, "--mode", mode, "--mpi", family, "--image", default_image.name, kargs=kargs))
    check_launch(recs, kernel, mode, family, 2)
    assert all(r["params"]["runtime"] == "charliecloud" and r["params"]["image"] == default_image.name for r in recs)
    if kernel == "pairs":
        assert sorted((r["params"]["src"], r["params"]["dst"], r["metric"]) for r in recs) == [
            (0, 1, "bandwidth"), (0, 1, "latency")]
    elif kernel == "barrier":
        assert [(r["metric"], "size" in r["params"]) for r in recs] == [("latency", False)]
    else:
        check_sizes(recs, kernel, "bandwidth" if kernel in ("bw", "bibw") else "latency")


# ------------------------------------------------------------------ validation of received data

CORRUPT_CASES = [(k, "1", "mpich") for k in list(CONTAINER_FAMILY)] + [
    ("latency", "2", "mpich"), ("alltoall", "2", "mpich"), ("allreduce", "2", "openmpi"), ("pairs", "2", "mpich")]


@pytest.mark.parametrize("kernel, site, family", CORRUPT_CASES)
def test_corrupted_buffer_fails(kernel, site, family, host_mpis):
    """NM_CORRUPT=1 flips a byte of a received message, =2 of the last message before the
    whole-buffer check: the kernel must say so and exit non-zero, printing no result."""
    if kernel == "pairs":
        kargs = PAIRS_ARGS
    elif kernel == "barrier":
        kargs = FAST
    else:
        kargs = ["-m", "4:16"] + FAST
    ranks = "3" if kernel in COLLECTIVES + ("barrier", "pairs") else "2"
    out = nearmetal("bench", kernel, "--mpi", family, "-n", ranks, "--env", f"NM_CORRUPT={site}", "--", *kargs,
                    timeout=300)
    assert out.returncode != 0, out.stdout
    assert f"nm-{kernel}: DATA VALIDATION ERROR" in out.stderr, out.stderr
    assert re.search(rf"nm-{kernel}: rank \d+: wrong ", out.stderr), out.stderr
    assert "failed with exit status" in out.stderr
    # the first size failed: no number was printed at all
    assert not [l for l in out.stdout.splitlines() if l.strip() and not l.startswith("#")], out.stdout


# ------------------------------------------------------------------ the warm-up time floor

FLOOR_FAMILY = {"latency": "mpich", "bw": "openmpi", "bibw": "mpich", "allgather": "openmpi",
                "alltoall": "mpich", "allreduce": "openmpi", "bcast": "mpich", "barrier": "openmpi"}


@pytest.mark.parametrize("kernel", list(FLOOR_FAMILY))
def test_warmup_floor_once_per_run(kernel, host_mpis):
    """Without -x, the run's first size warms up for at least the floor (NM_OSU_WARMUP_MS=3000
    here), later sizes only for OSU's count: the run lasts at least 3 s, but far less than
    3 s per size (3 to 8 sizes); the output keeps OSU's layout and the data its checks."""
    family = FLOOR_FAMILY[kernel]
    kargs = (size_args(kernel) if kernel != "barrier" else []) + ["-i", "2"]
    t0 = time.monotonic()
    out = nearmetal("bench", kernel, "--mpi", family, "--env", "NM_OSU_WARMUP_MS=3000", "--", *kargs, timeout=300)
    wall = time.monotonic() - t0
    assert out.returncode == 0, out.stderr
    rows = check_layout(kernel, out.stdout, full=False)
    if kernel != "barrier":
        assert [int(r.split()[0]) for r in rows] == expected_sizes(kernel, *RANGES[kernel])
    assert 3.0 <= wall < 9.0, wall


@pytest.mark.parametrize("kernel, family", [("latency", "openmpi"), ("allreduce", "mpich")])
def test_warmup_x_is_osus_count_and_no_floor(kernel, family, host_mpis):
    """-x N: exactly N warm-up iterations per size, as OSU; the floor (an hour here) is off."""
    out = nearmetal("bench", kernel, "--mpi", family, "--env", "NM_OSU_WARMUP_MS=3600000", "--",
                    *size_args(kernel), *FAST, timeout=120)
    assert out.returncode == 0, out.stderr


# ------------------------------------------------------------------ refusals and usage


def test_latency_refuses_three_ranks(host_mpis):
    out = nearmetal("bench", "latency", "-n", "3")
    assert out.returncode != 0
    assert "kernel 'latency' needs 2..2 ranks, got -n 3" in out.stderr
    for family in FAMILIES:
        out = nearmetal("run", "-n", "3", "--mpi", family, "--", "nm-latency", "-i", "5", timeout=120)
        assert out.returncode != 0
        assert "nm-latency: this test needs exactly 2 MPI ranks, got 3" in out.stderr, out.stderr
        assert "Latency (us)" not in out.stdout


@pytest.mark.parametrize("program, args, words", [
    ("nm-bw", ["-q"], "invalid option [-q]"),
    ("nm-latency", ["-f"], "invalid option [-f]"),  # -f is for collectives, as in OSU
    ("nm-latency", ["--bogus"], "invalid option [--bogus]: the kernels take short options only"),  # was [--]
    ("nm-allreduce", ["-m", "64:8"], "invalid message sizes 64:8"),
    ("nm-barrier", ["-m", "8"], "invalid option [-m]"),  # no sizes for the barrier
    ("nm-bcast", ["-i", "0"], "invalid iteration count [-i 0]"),
    ("nm-pairs", ["-S", "x"], "invalid value [-S x]"),
])
def test_bad_options_exit_2_with_usage(program, args, words, host_mpis):
    out = nearmetal("run", "--mpi", "mpich", "--", program, *args, timeout=120)
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert words in out.stderr and f"usage: {program}" in out.stderr, out.stderr
    assert words in out.stderr.strip().splitlines()[-1], "the reason comes last (nearmetal quotes the last line)"
    assert "Traceback" not in out.stderr and not out.stdout.strip()


def test_help(host_mpis):
    out = nearmetal("run", "--mpi", "openmpi", "--", "nm-allreduce", "-h", timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: nm-allreduce") and "-m [MIN:]MAX" in out.stdout and "-f " in out.stdout
    assert "without -x the first size warms up for at least 200 ms too" in out.stdout
    assert out.stdout.count("usage:") == 1, "only rank 0 prints the help"


# ------------------------------------------------------------------ parsers, real OSU output

# Real OSU Micro-Benchmarks 7 output layout (osu_util.c formats, FIELD_WIDTH 18).
OSU_LATENCY = """\
# OSU MPI Latency Test v7.3
# Size          Latency (us)
# Datatype: MPI_CHAR.
1                       0.20
2                       0.20
4                       0.20
8                       0.21
16                      0.21
32                      0.25
64                      0.27
128                     0.35
256                     0.38
512                     0.45
1024                    0.56
2048                    0.85
4096                    1.34
8192                    2.41
16384                   4.63
"""

OSU_ALLREDUCE_FULL = """
# OSU MPI Allreduce Latency Test v7.3
# Datatype: MPI_CHAR.
# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations
1                       1.12              1.05              1.19        1000
2                       1.10              1.04              1.16        1000
4                       1.13              1.06              1.20        1000
8                       1.15              1.09              1.21        1000
16384                  14.62             14.01             15.23         100
"""

OSU_BW_VALIDATION = """\
# OSU MPI Bandwidth Test v7.3
# Size      Bandwidth (MB/s)        Validation
# Datatype: MPI_CHAR.
1                       3.02              Pass
2                       6.05              Pass
4194304             11520.44              Pass
"""

OSU_BARRIER = """
# OSU MPI Barrier Latency Test v7.3
# Avg Latency(us)
             1.03
"""

OSU_MBW_MR = """\
# OSU MPI Multiple Bandwidth / Message Rate Test v7.3
# [ pairs: 1 ] [ window size: 64 ]
# Size                  MB/s        Messages/s
1                       2.89        2885924.35
"""

PARAMS = {"mode": "native", "mpi": "openmpi", "ranks": 2, "threads": 1}


def test_parse_real_osu_latency():
    recs = osu_parser.parse(OSU_LATENCY, "latency", PARAMS)
    assert [r["params"]["size"] for r in recs] == [2 ** k for k in range(15)]
    assert {(r["metric"], r["unit"]) for r in recs} == {("latency", "us")}
    assert recs[0]["value"] == 0.20 and recs[-1]["value"] == 4.63
    assert all(r["params"]["mode"] == "native" for r in recs)
    for r in recs:
        assert not list(VALIDATOR.iter_errors(r))


def test_parse_real_osu_allreduce_full():
    recs = osu_parser.parse(OSU_ALLREDUCE_FULL, "allreduce", PARAMS)
    assert len(recs) == 5 * 4
    last = {r["metric"]: r for r in recs if r["params"]["size"] == 16384}
    assert {m: (r["value"], r["unit"]) for m, r in last.items()} == {
        "latency": (14.62, "us"), "latency_min": (14.01, "us"), "latency_max": (15.23, "us"),
        "iterations": (100.0, "count")}


def test_parse_real_osu_other_columns():
    bw = osu_parser.parse(OSU_BW_VALIDATION, "bw", PARAMS)
    assert [(r["params"]["size"], r["metric"], r["value"], r["unit"]) for r in bw] == [
        (1, "bandwidth", 3.02, "MB/s"), (2, "bandwidth", 6.05, "MB/s"), (4194304, "bandwidth", 11520.44, "MB/s")]
    barrier = osu_parser.parse(OSU_BARRIER, "barrier", PARAMS)
    assert [(r["metric"], r["value"], "size" in r["params"]) for r in barrier] == [("latency", 1.03, False)]
    mr = osu_parser.parse(OSU_MBW_MR, "mbw_mr", PARAMS)
    assert [(r["metric"], r["value"]) for r in mr] == [("bandwidth", 2.89), ("message_rate", 2885924.35)]


def test_parse_ignores_noise():
    text = "Warning: something\n" + OSU_LATENCY.replace("# Datatype: MPI_CHAR.\n", "# Datatype: MPI_CHAR.\nnot a row\n")
    text += "DATA VALIDATION ERROR: osu_latency exited with status 1 on message size 16.\n"
    assert len(osu_parser.parse(text, "latency", PARAMS)) == 15
    assert osu_parser.parse("1 2.0\n", "latency", PARAMS) == [], "rows before a column header are not OSU rows"


def test_parse_pairs_rows():
    text = ("# pairs: ranks=2 order=unordered latency_size=8 latency_iterations=5 latency_warmup=1 "
            "bandwidth_size=1024 bandwidth_iterations=2 bandwidth_warmup=1\n"
            "     0          -         0.16 .\n# PAIR src dst latency_us bandwidth_MBps\nPAIR 0 1 0.160 2428.97\n"
            "PAIR x 1 0.1 2.0\n")
    recs = pairs_parser.parse(text, "pairs", PARAMS)
    assert [(r["metric"], r["value"], r["unit"], r["params"]["src"], r["params"]["dst"], r["params"]["size"])
            for r in recs] == [("latency", 0.16, "us", 0, 1, 8), ("bandwidth", 2428.97, "MB/s", 0, 1, 1024)]
