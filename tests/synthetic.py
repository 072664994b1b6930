"""Realistic synthetic analysis dicts (docs/analysis.md) for the report tests and for timing
the reports, without running a study.

    synthetic_analysis()                      # ~3 variants compared with native, every kernel
    synthetic_analysis(n_variants=6, scale="large")   # ~2,000 points x 6 variants

Values are drawn around plausible medians (latency ~0.3 us + size / 10 GB/s, ...) with
1-3% noise and occasional outliers; each containerized variant has a known overhead
profile (podman costs start-up time, bind with MPICH is slower around 64 KiB, hybrid with
Open MPI loses shared-memory bandwidth at large sizes), so every verdict occurs. Statistics and
verdicts are nearmetal.analysis.stats's own (summarize, compare paired by block), with fewer
bootstrap resamples than a study uses where the analysis is large.
"""

import hashlib
import math

import numpy as np

from nearmetal.analysis import stats

ALL_VARIANTS = (
    {"mode": "native", "runtime": None, "mpi": "openmpi", "image": None},
    {"mode": "hybrid", "runtime": "charliecloud", "mpi": "openmpi", "image": "default"},
    {"mode": "bind", "runtime": "charliecloud", "mpi": "openmpi", "image": "default"},
    {"mode": "native", "runtime": None, "mpi": "mpich", "image": None},
    {"mode": "bind", "runtime": "charliecloud", "mpi": "mpich", "image": "default"},
    {"mode": "hybrid", "runtime": "podman", "mpi": "mpich", "image": "default"},
    {"mode": "bind", "runtime": "bwrap", "mpi": "openmpi", "image": "default"},
)

ALL_KERNELS = ("latency", "bw", "bibw", "allreduce", "alltoall", "allgather", "bcast", "barrier", "pairs",
               "stream", "cg", "phases", "startup", "metadata")

STUDY_TOML = """\
# Synthetic study (tests/synthetic.py). Methodology: https://mvapich.cse.ohio-state.edu/benchmarks/
[study]
name = "{name}"
description = "Synthetic: native vs containers, every kernel."
repetitions = {reps}
warmup = 1
timeout = 300
seed = {seed}
order = "blocks"
margin = {margin}

[baseline]
mode = "native"

[matrix]
mode = ["native", "hybrid", "bind"]
runtime = ["charliecloud", "podman", "bwrap"]
mpi = ["openmpi", "mpich"]
image = ["default"]
ranks = [2]
threads = [1]
"""


def vid(v):
    if v["mode"] == "native":
        return f"native/{v['mpi']}"
    return f"{v['mode']}/{v['runtime']}/{v['mpi']}/{v['image']}"


def _overhead(v, kernel, metric, point, ranks):
    """The true relative cost of a variant (0.05 = 5% slower) at one point."""
    if v["mode"] == "native":
        return 0.0
    size = point.get("size", 0) if isinstance(point.get("size", 0), (int, float)) else 0
    cost = 0.004
    if v["runtime"] == "podman":
        cost += 0.01
        if kernel in ("startup", "metadata"):
            cost += 0.6
    if v["mode"] == "bind" and v["mpi"] == "mpich" and 16384 <= size <= 262144:
        cost += 0.12  # eager/rendezvous threshold differs from the host's tuning
    if v["mode"] == "hybrid" and v["mpi"] == "openmpi" and size >= 1 << 20:
        cost += 0.07  # no CMA between separate namespaces
    if v["mode"] == "hybrid" and kernel in ("startup", "metadata"):
        cost += 0.15
    if v["mode"] == "hybrid" and kernel == "cg":
        cost -= 0.04  # the image's newer compiler vectorizes the stencil better: faster
    if v["runtime"] == "bwrap" and kernel == "stream":
        cost -= 0.05  # transparent huge pages inside the sandbox: faster
    if kernel == "pairs" and "src" in point and (point["src"] // 4) != (point["dst"] // 4) and v["mode"] == "hybrid":
        cost += 0.05
    if kernel == "phases" and metric in ("halo_s", "allreduce_s") and v["mode"] == "hybrid":
        cost += 0.06
    return cost


def _true_value(kernel, metric, point, ranks, threads):
    size = point.get("size", 8)
    cores = ranks * threads
    if metric == "latency":
        base = 0.35 + size / 9000.0
        if kernel in ("allreduce", "alltoall", "allgather", "bcast", "barrier"):
            base *= math.log2(max(ranks, 2)) * (2.0 if kernel == "alltoall" else 1.0)
        if kernel == "pairs":
            base = 0.4 if point["src"] // 4 == point["dst"] // 4 else 0.9
        return base
    if metric == "bandwidth":
        if kernel == "pairs":
            return 9000.0 if point["src"] // 4 == point["dst"] // 4 else 4500.0
        bw = 11000.0 * size / (size + 8000.0)
        return bw * (1.8 if kernel == "bibw" else 1.0)
    if kernel == "stream":
        per = {"copy": 9.5, "scale": 9.2, "add": 10.4, "triad": 10.6}[metric] * threads
        return per * (ranks if point.get("rank") == "total" else 1)
    if kernel == "cg":
        return {"gflops": 1.6 * cores ** 0.9, "time_s": 12.0 / cores ** 0.9}[metric]
    if kernel == "phases":
        return {"compute_s": 8.0 / cores, "halo_s": 0.4 + 0.05 * ranks, "allreduce_s": 0.05 * math.log2(ranks + 1),
                "total_s": 8.0 / cores + 0.45 + 0.05 * ranks + 0.05 * math.log2(ranks + 1)}[metric]
    if kernel == "startup":
        return {"wall_to_main": 0.004, "cpu_to_main": 0.002, "mpi_init": 0.03}[metric] * (1 + 0.05 * ranks)
    if kernel == "metadata":
        return {"files_s": 0.002, "dlopen_s": 0.004, "total_s": 0.0065, "files": 180.0}[metric]
    return 1.0


def _points_for(kernel, sizes, placements, pairs_ranks, stream_ranks):
    """(metric, unit, point, ranks, threads) for one kernel."""
    out = []
    two = [(2, 1)]
    if kernel == "latency":
        out += [("latency", "us", {"size": s}, 2, 1) for s in sizes]
    elif kernel in ("bw", "bibw"):
        out += [("bandwidth", "MB/s", {"size": s}, 2, 1) for s in sizes]
    elif kernel in ("allreduce", "alltoall", "allgather", "bcast"):
        lo = 4 if kernel == "allreduce" else 1
        out += [("latency", "us", {"size": s}, r, t) for r, t in placements for s in sizes if s >= lo]
    elif kernel == "barrier":
        out += [("latency", "us", {}, r, t) for r, t in placements]
    elif kernel == "pairs":
        for metric, unit in (("latency", "us"), ("bandwidth", "MB/s")):
            out += [(metric, unit, {"src": a, "dst": b}, pairs_ranks, 1)
                    for a in range(pairs_ranks) for b in range(pairs_ranks) if a != b]
    elif kernel == "stream":
        for r, t in placements:
            for metric in ("copy", "scale", "add", "triad"):
                ranks_pts = ["total"] + list(range(min(r, stream_ranks)))
                out += [(metric, "GB/s", {"rank": k}, r, t) for k in ranks_pts]
    elif kernel == "cg":
        out += [(m, u, {}, r, t) for r, t in placements for m, u in (("gflops", "GFLOP/s"), ("time_s", "s"))]
    elif kernel == "phases":
        out += [(m, "s", {"rank": "mean"}, r, t) for r, t in placements
                for m in ("compute_s", "halo_s", "allreduce_s", "total_s")]
    elif kernel == "startup":
        out += [(m, "s", {"rank": "max", "source": "launch_env"}, r, t) for r, t in two
                for m in ("wall_to_main", "cpu_to_main", "mpi_init")]
    elif kernel == "metadata":
        out += [(m, u, {"rank": "max"}, r, t) for r, t in two
                for m, u in (("files_s", "s"), ("dlopen_s", "s"), ("total_s", "s"), ("files", "count"))]
    return out


def synthetic_analysis(*, seed=0, n_variants=4, kernels=ALL_KERNELS, sizes=None, placements=None, reps=None,
                       pairs_ranks=4, stream_ranks=4, n_failures=3, margin=0.03, scale=None, name="synthetic",
                       n_boot=None):
    """A synthetic analysis dict. n_variants 3..7 (always including their native baselines);
    sizes: message sizes (default 1 B .. 4 MiB, powers of two); placements: (ranks, threads)
    for the kernels that scale. scale="large": ~2,000 points per variant (12 placements,
    16-rank all-pairs matrix, 50 repetitions unless reps is given). n_boot: bootstrap
    resamples per comparison (default 500, 100 for scale="large": ~8,000 comparisons)."""
    rng = np.random.default_rng(seed)
    if scale == "large":
        placements = placements or [(r, t) for r in (2, 4, 8, 16) for t in (1, 2, 4)]
        pairs_ranks = 16
        stream_ranks = 8
        reps = reps or 50
    reps = reps or 10
    n_boot = n_boot or (100 if scale == "large" else 500)
    sizes = list(sizes or [1 << i for i in range(0, 23)])
    placements = list(placements or [(2, 1), (4, 1), (4, 2)])
    chosen = [dict(v) for v in ALL_VARIANTS[:max(1, min(n_variants, len(ALL_VARIANTS)))]]
    # every variant's native baseline must be present
    for v in list(chosen):
        if v["mode"] != "native" and not any(c["mode"] == "native" and c["mpi"] == v["mpi"] for c in chosen):
            chosen.insert(0, {"mode": "native", "runtime": None, "mpi": v["mpi"], "image": None})
    variants = []
    for v in chosen:
        b = vid({"mode": "native", "runtime": None, "mpi": v["mpi"], "image": None})
        variants.append({"id": vid(v), **v, "baseline": b})
    variants.sort(key=lambda x: x["id"])

    points = []
    cells = set()
    for kernel in kernels:
        for metric, unit, point, ranks, threads in _points_for(kernel, sizes, placements, pairs_ranks, stream_ranks):
            hib = unit.endswith("/s")
            true = _true_value(kernel, metric, point, ranks, threads)
            noise = 0.003 + 0.012 * rng.random()
            if metric == "latency" and point.get("size", 0) <= 64:
                noise *= 2
            block_effect = rng.normal(0, noise * 0.5, reps)  # machine drift shared by a block
            by_variant = {}
            for v in variants:
                cost = _overhead(v, kernel, metric, point, ranks)
                mult = (1 / (1 + cost)) if hib else (1 + cost)
                vals = true * mult * np.exp(block_effect + rng.normal(0, noise, reps))
                if rng.random() < 0.05:  # an outlier now and then
                    vals[rng.integers(reps)] *= (0.7 if hib else 1.4)
                by_variant[v["id"]] = [float(x) for x in vals]
                cells.add((kernel, ranks, threads, v["id"]))
            summaries = {k: stats.summarize(vals) for k, vals in by_variant.items()}
            for v in variants:
                b = v["baseline"] if v["baseline"] != v["id"] else None
                entry = {"benchmark": kernel, "kernel": kernel, "metric": metric, "unit": unit,
                         "higher_is_better": hib, "point": dict(point), "ranks": ranks, "threads": threads,
                         "variant": v["id"], "variant_dims": {k: v[k] for k in ("mode", "runtime", "mpi", "image")},
                         "values": by_variant[v["id"]], "stats": summaries[v["id"]], "baseline": b,
                         "comparison": None}
                if b and b in summaries:
                    bv, vv = by_variant[b], by_variant[v["id"]]
                    entry["comparison"] = stats.compare(bv, vv, higher_is_better=hib, margin=margin,
                                                        pairs=list(zip(bv, vv)), n_boot=n_boot)
                points.append(entry)

    ok_runs = len(cells) * reps
    fail_templates = [
        ("failed", 1, "bind/charliecloud/mpich/default", "alltoall",
         "[proxy:0:0@node1] HYD_pmcd_pmip_control_cmd_cb: assert (!closed) failed\n"
         "ch-run[4711]: error: can't bind /nm/host-mpi: No such file or directory\n"
         "===================================================================================\n"
         "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n"
         "=   RANK 3 PID 4712 RUNNING AT node1\n=   EXIT STATUS: 1\n"),
        ("timeout", None, "hybrid/charliecloud/openmpi/default", "allgather",
         "nearmetal: run exceeded the study timeout (300 s); process group killed\n"),
        ("failed", 137, "hybrid/podman/mpich/default", "stream",
         "nm-stream: rank 1: cannot allocate 3 x 1600000000 bytes\n"
         "mpiexec: process 1 exited on signal 9 (Killed)\n"),
    ]
    have = {v["id"] for v in variants}
    failures = []
    for i in range(n_failures):
        status, code, fvid, bench, tail = fail_templates[i % len(fail_templates)]
        if fvid not in have:
            fvid = variants[-1]["id"]
        if bench not in kernels:
            bench = kernels[0]
        failures.append({"run_key": f"{bench}|n=4|t=1|{fvid}#rep{i}", "variant": fvid, "benchmark": bench,
                         "status": status, "exit_status": code, "stderr_tail": tail[-500:]})
    by_status = {"ok": ok_runs}
    for f in failures:
        by_status[f["status"]] = by_status.get(f["status"], 0) + 1

    environment = []
    for v in variants:
        env = {"host": "node1", "kernel": "Linux 6.1.0-18-amd64", "machine": "x86_64",
               "cpu": {"model": "AMD EPYC 7763 64-Core Processor", "cores": 128, "simd": "avx2",
                       "flags": ["avx", "avx2", "fma", "sse2", "sse4_2"]},
               "nearmetal_version": "0.1.0",
               "mpi": {v["mpi"]: {"version": "4.1.4" if v["mpi"] == "openmpi" else "4.0.2",
                                  "library": "libmpi.so.40" if v["mpi"] == "openmpi" else "libmpich.so.12"}},
               "mode": v["mode"], "runtime": None, "image": None}
        if v["runtime"]:
            env["runtime"] = {"name": v["runtime"], "version": {"charliecloud": "0.31", "podman": "4.3.1",
                                                                  "bwrap": "0.8.0"}[v["runtime"]]}
            env["image"] = {"name": v["image"], "digest": "sha256:" + hashlib.sha256(v["id"].encode()).hexdigest(),
                            "distro": "bookworm", "sqfs": False}
        environment.append(env)

    return {
        "study": {"name": name, "seed": seed, "margin": margin, "created": "2025-05-01T12:00:00+00:00",
                  "nearmetal_version": "0.1.0",
                  "config_toml": STUDY_TOML.format(name=name, reps=reps, seed=seed, margin=margin),
                  "baseline": {"mode": "native"}, "description": "Synthetic: native vs containers, every kernel."},
        "variants": variants,
        "points": points,
        "runs": {"total": ok_runs + len(failures), "by_status": by_status, "failures": failures},
        "environment": environment,
    }
