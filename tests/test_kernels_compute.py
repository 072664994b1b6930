"""The compute proxies nm-stream, nm-cg, nm-phases and nm-flops: real MPI ranks natively (both MPIs)
and in containers (hybrid and bind on the default image), their --json records, the SIMD
level and build flavour every record carries, and self-verification that fails on
NM_CORRUPT=1. Small problems: every run takes well under a second of compute.
"""

import json
from pathlib import Path

import jsonschema
import pytest

from conftest import REPO, nearmetal

SCHEMA = json.loads((REPO / "src/nearmetal/schemas/bench-record.schema.json").read_text())
ARGS = {"stream": ["-s", "200000", "-n", "3"],
        "cg": ["-x", "16", "-y", "16", "-z", "16"],
        "phases": ["-x", "32", "-y", "32", "-z", "8", "-s", "5"],
        "flops": ["-i", "200000"]}
LEVELS = ("scalar", "sse2", "avx", "avx2", "avx512")


def cpu_flags():
    """The host CPU's /proc/cpuinfo flags (its first CPU's)."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def host_simd():
    """The highest level of LEVELS the host CPU has, from /proc/cpuinfo flags."""
    flags = cpu_flags()
    for level, flag in (("avx512", "avx512f"), ("avx2", "avx2"), ("avx", "avx"), ("sse2", "sse2")):
        if flag in flags:
            return level
    return "scalar"


def bench(kernel, *launch, kargs=None, expect_ok=True):
    base = kernel.removesuffix("-portable")
    out = nearmetal("bench", kernel, *launch, "--json", "--", *(ARGS[base] if kargs is None else kargs), timeout=300)
    if not expect_ok:
        return out
    assert out.returncode == 0, f"exit {out.returncode}\nstdout:\n{out.stdout}\nstderr:\n{out.stderr}"
    records = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    assert records, out.stdout
    for r in records:
        jsonschema.validate(r, SCHEMA)
        assert r["kernel"] == kernel
    return records


def check_build(records, kernel):
    """Every record names the build flavour and SIMD level the binary was compiled for."""
    portable = kernel.endswith("-portable")
    for r in records:
        assert r["params"]["build"] == ("portable" if portable else "native"), r
        # -march=x86-64 is SSE2 only; -march=native reaches the host CPU's best level (not beyond)
        assert r["params"]["simd"] == ("sse2" if portable else host_simd()), r


def metrics(records, **match):
    return {r["metric"]: r["value"] for r in records if all(r["params"].get(k) == v for k, v in match.items())}


# ----------------------------------------------------------------------------- native

@pytest.mark.parametrize("kernel,mpi,ranks,threads", [("stream", "openmpi", 2, 1), ("stream-portable", "mpich", 1, 2),
                                                       ("stream", "mpich", 2, 1)])
def test_stream_native(kernel, mpi, ranks, threads):
    recs = bench(kernel, "--mpi", mpi, "-n", ranks, "--threads", threads)
    check_build(recs, kernel)
    assert all(r["params"]["mode"] == "native" and r["params"]["threads"] == threads for r in recs)
    for rank in list(range(ranks)) + ["total"]:
        got = metrics(recs, rank=rank)
        assert set(got) == {"copy", "scale", "add", "triad"}, (rank, got)
        assert all(v > 0 for v in got.values())
        assert all(r["unit"] == "GB/s" for r in recs)
    for fn in ("copy", "triad"):
        per_rank = sum(metrics(recs, rank=k)[fn] for k in range(ranks))
        assert metrics(recs, rank="total")[fn] == pytest.approx(per_rank, rel=1e-3, abs=0.01)


@pytest.mark.parametrize("kernel,mpi,ranks,threads", [("cg", "mpich", 2, 1), ("cg-portable", "openmpi", 1, 2),
                                                       ("cg", "openmpi", 2, 1)])
def test_cg_native(kernel, mpi, ranks, threads):
    recs = bench(kernel, "--mpi", mpi, "-n", ranks, "--threads", threads)
    check_build(recs, kernel)
    got = metrics(recs)
    assert {"gflops", "residual", "iterations", "time_s", "true_residual", "solution_error"} <= set(got)
    assert got["gflops"] > 0 and got["time_s"] > 0
    assert 1 <= got["iterations"] < 500
    assert got["residual"] <= 1e-9 and got["true_residual"] <= 1e-8
    assert got["solution_error"] <= 1e-5
    units = {r["metric"]: r["unit"] for r in recs}
    assert units["gflops"] == "GFLOP/s" and units["time_s"] == "s" and units["residual"] == ""


def test_cg_converges_the_same_on_one_and_two_ranks():
    """Same global problem (32x16x16) split 2x1x1 or solved on one rank: the block
    preconditioner differs, the solution does not."""
    one = metrics(bench("cg", "--mpi", "mpich", "-n", 1, kargs=["-x", "32", "-y", "16", "-z", "16"]))
    two = metrics(bench("cg", "--mpi", "mpich", "-n", 2, kargs=["-x", "16", "-y", "16", "-z", "16"]))
    for got in (one, two):
        assert got["true_residual"] <= 1e-8 and got["solution_error"] <= 1e-5
    assert abs(one["iterations"] - two["iterations"]) <= 10


def _phases(kernel, mpi, ranks, threads, *extra):
    recs = bench(kernel, "--mpi", mpi, "-n", ranks, "--threads", threads, *extra)
    check_build(recs, kernel)
    for rank in list(range(ranks)) + ["max"]:
        per_rank = [r for r in recs if r["params"].get("rank") == rank and "step" not in r["params"]]
        names = {r["metric"] for r in per_rank}
        assert names == {"init_s", "main_loop_s", "compute_s", "comm_s", "halo_s", "allreduce_s", "fini_s"}, names
        vals = {r["metric"]: r["value"] for r in per_rank}
        assert vals["compute_s"] > 0 and vals["main_loop_s"] > 0
        if rank == "max":  # each column's own largest value over the ranks
            assert max(vals["halo_s"], vals["allreduce_s"]) <= vals["comm_s"] <= vals["halo_s"] + vals["allreduce_s"] + 2e-6
        else:
            assert vals["comm_s"] == pytest.approx(vals["halo_s"] + vals["allreduce_s"], abs=2e-6)
            assert vals["compute_s"] + vals["comm_s"] <= vals["main_loop_s"] + 1e-4
    steps = sorted({r["params"]["step"] for r in recs if "step" in r["params"]})
    assert steps == [1, 2, 3, 4, 5]
    step1 = metrics(recs, step=1)
    assert set(step1) == {"compute_s", "halo_s", "allreduce_s", "comm_s"}
    assert all(r["unit"] == "s" for r in recs if r["metric"] != "checksum")
    (checksum,) = [r["value"] for r in recs if r["metric"] == "checksum"]
    return checksum


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_phases_any_distribution(mpi):
    """2 ranks x 1 thread and 1 rank x 2 threads: both report compute and comm times, and
    the field (checksum summed zone by zone) is bit-identical."""
    a = _phases("phases", mpi, 2, 1)
    b = _phases("phases", mpi, 1, 2)
    assert a == b


def test_phases_portable_matches_native():
    native = _phases("phases", "mpich", 2, 1)
    portable = _phases("phases-portable", "mpich", 2, 1)
    assert portable == pytest.approx(native, rel=1e-12)


def test_human_tables():
    out = nearmetal("bench", "stream", "--mpi", "mpich", "-n", 2, "--", *ARGS["stream"], timeout=300)
    assert out.returncode == 0, out.stderr
    assert "Triad:" in out.stdout and "total" in out.stdout and "Solution Validates" in out.stdout
    assert f"simd={host_simd()}" in out.stdout and "build=native" in out.stdout
    out = nearmetal("bench", "phases-portable", "--mpi", "openmpi", "-n", 1, "--threads", 2, "--", *ARGS["phases"],
                    timeout=300)
    assert out.returncode == 0, out.stderr
    assert "main_loop_s" in out.stdout and "Verification PASSED" in out.stdout
    assert "# build=portable simd=sse2 ranks=1 threads=2 " in out.stdout  # OMP_NUM_THREADS reached the rank


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_flops_both_builds_pair_as_one_point(mpi):
    """nm-flops: one figure, GFLOP/s summed over the ranks, with no parameter naming the build
    (a portable image's run and a native one are one point); the build is in its program file,
    where explain's SIMD scan reads it: SSE for the portable build, the CPU's width natively."""
    from nearmetal.explain import simd
    from nearmetal.kernels.build import host_bin

    points = set()
    for kernel in ("flops", "flops-portable"):
        recs = bench(kernel, "--mpi", mpi, "-n", 2)
        assert [(r["metric"], r["unit"]) for r in recs] == [("gflops", "GFLOP/s")] and recs[0]["value"] > 0
        points.add(json.dumps({k: v for k, v in recs[0]["params"].items() if k != "kernel"}, sort_keys=True))
        assert "simd" not in recs[0]["params"] and "build" not in recs[0]["params"]
    assert len(points) == 1, points
    binaries = Path(host_bin(mpi))
    assert simd.scan(str(binaries / "nm-flops-portable"))[0] == "sse"
    assert simd.scan(str(binaries / "nm-flops"))[0] == simd.cpu_level(cpu_flags())


def test_the_portable_switch_builds_every_compute_kernel_portable_under_its_own_name(tmp_path):
    """`make KERNELS=portable` (what `image build --portable-kernels` runs in the image): the
    host-optimized names hold SSE code and say build=portable."""
    import subprocess

    from nearmetal.explain import simd
    from nearmetal.home import KERNELS_SRC_STR

    done = subprocess.run(["make", "-s", "-C", KERNELS_SRC_STR, "MPI=mpich", f"PREFIX={tmp_path}", "KERNELS=portable",
                           str(tmp_path / "bin/nm-flops"), str(tmp_path / "bin/nm-cg")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    for program in ("nm-flops", "nm-cg"):
        assert simd.scan(str(tmp_path / "bin" / program))[0] == "sse", program
    out = subprocess.run(["mpirun.mpich", "-n", "1", str(tmp_path / "bin/nm-flops"), "-i", "1000"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "# build=portable simd=sse2 " in out.stdout, out.stdout + out.stderr


# ------------------------------------------------------------------- verification

@pytest.mark.parametrize("kernel,ranks,message", [("stream", 2, "Failed Validation"), ("cg", 2, "verification FAILED"),
                                                  ("cg-portable", 1, "verification FAILED"),
                                                  ("phases", 2, "verification FAILED"),
                                                  ("flops", 2, "verification FAILED")])
def test_corruption_is_detected(kernel, ranks, message):
    out = bench(kernel, "--mpi", "mpich", "-n", ranks, "--env", "NM_CORRUPT=1", expect_ok=False)
    assert out.returncode != 0, out.stdout
    assert message in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("kernel,kargs", [("stream", ["-n", "1"]), ("cg", ["-x", "0"]), ("phases", ["-X", "64", "-x", "8"]),
                                          ("flops", ["-s", "4"])])
def test_bad_arguments_fail(kernel, kargs):
    out = bench(kernel, "--mpi", "mpich", "-n", 1, kargs=kargs, expect_ok=False)
    assert out.returncode != 0
    assert f"nm-{kernel}" in out.stderr, out.stderr


# -------------------------------------------------------------------- containers

@pytest.mark.parametrize("mode,mpi,kernels", [("hybrid", "openmpi", ("stream", "cg-portable", "phases")),
                                              ("bind", "mpich", ("stream-portable", "cg", "phases-portable"))])
def test_in_container(mode, mpi, kernels, default_image):
    """The image's own builds of the kernels (hybrid: image MPI; bind: host MPI mounted in)."""
    launch = ("--mode", mode, "--mpi", mpi, "--image", default_image.name, "-n", 2)
    for kernel in kernels:
        recs = bench(kernel, *launch)
        check_build(recs, kernel)
        assert all(r["params"]["mode"] == mode and r["params"]["runtime"] == "charliecloud" for r in recs)
        got = metrics(recs, rank="total") if kernel.startswith("stream") else metrics(recs, rank="max")
        if kernel.startswith("stream"):
            assert got["triad"] > 0
        elif kernel.startswith("cg"):
            got = metrics(recs)
            assert got["gflops"] > 0 and got["true_residual"] <= 1e-8
        else:
            assert got["compute_s"] > 0 and got["comm_s"] > 0
