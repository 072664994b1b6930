#!/usr/bin/env python3
"""Parallel I/O bandwidth of nm-iobench's write patterns and libraries, natively, against the
file system's own limit: bench/file_write_bw.c writing the same bytes from memory with plain
pwrite into one file, with as many processes as ranks (and with one), no fsync (nm-iobench
does not sync either). Every configuration and the reference once per repetition in a
shuffled order after a warm-up round, per target directory; medians with min-max.

Prints, per directory: write and read MB/s of each configuration, write bandwidth as a
fraction of the limit, and the speed-up of each configuration's write time over `serial`.

usage: bench/io_bandwidth.py [--repetitions 5] [--dirs /dev/shm,/tmp] [--grid 2048x2048x8]
       [--steps 2] [--types double] [--mpi openmpi,mpich] [--out DIR]
Writes raw runs to DIR/io_bandwidth.json.
"""

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NEARMETAL = [sys.executable, "-m", "nearmetal.cli"]
HERE = Path(__file__).resolve().parent

# (label, MPI families, nm-iobench arguments, environment): one line per configuration.
# The domain layout is 1x2 (y split), so each rank's block is contiguous per z plane; `shared`
# uses io_layout 1x2, i.e. both ranks write (io_layout 1x1 would leave one writer, as serial).
# "x-split" is the same write with layout 2x1: half-rows, the non-contiguous case that
# collective buffering exists for.
SHARED = ["-p", "shared", "-i", "1x2"]
# ROMIO's default on one node is one aggregator (cb_config_list *:1): two make both ranks write.
AGGR2 = ["-H", "cb_config_list=*:2", "-H", "cb_nodes=2"]
CONFIGS = [
    ("serial/posix", ("openmpi", "mpich"), ["-p", "serial", "-L", "posix"], {}),
    ("file-per-rank/posix", ("openmpi", "mpich"), ["-p", "file-per-rank", "-L", "posix"], {}),
    ("io-domains 1x1/posix", ("openmpi", "mpich"), ["-p", "io-domains", "-i", "1x1", "-L", "posix"], {}),
    ("shared/mpiio ompio", ("openmpi",), SHARED + ["-L", "mpiio"], {"OMPI_MCA_io": "ompio"}),
    ("shared/mpiio romio", ("openmpi",), SHARED + ["-L", "mpiio"], {"OMPI_MCA_io": "romio321"}),
    ("shared/mpiio romio aggr=2", ("openmpi",), SHARED + ["-L", "mpiio"] + AGGR2, {"OMPI_MCA_io": "romio321"}),
    ("shared/mpiio", ("mpich",), SHARED + ["-L", "mpiio"], {}),
    ("shared/mpiio aggr=2", ("mpich",), SHARED + ["-L", "mpiio"] + AGGR2, {}),
    ("shared/mpiio cb off", ("mpich",), SHARED + ["-L", "mpiio", "-H", "romio_cb_write=disable"], {}),
    ("shared/mpiio x-split aggr=2", ("mpich",), SHARED[:2] + ["-l", "2x1", "-i", "2x1", "-L", "mpiio"] + AGGR2, {}),
    ("shared/pnetcdf", ("openmpi",), SHARED + ["-L", "pnetcdf"], {}),
    ("shared/netcdf4", ("openmpi",), SHARED + ["-L", "netcdf4"], {}),
    ("shared/hdf5", ("openmpi", "mpich"), SHARED + ["-L", "hdf5"], {}),
]


def iobench(mpi, ranks, args, env):
    argv = NEARMETAL + ["bench", "iobench", "--mpi", mpi, "-n", str(ranks), "--json"]
    for k, v in env.items():
        argv += ["--env", f"{k}={v}"]
    out = subprocess.run(argv + ["--"] + args, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: exit {out.returncode}: {out.stderr.strip()[-400:]}")
    recs = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]

    def one(metric, rank):
        (v,) = [r["value"] for r in recs if r["metric"] == metric and str(r["params"].get("rank")) == rank]
        return v

    return {"write_MBps": one("write_bw", "total"), "read_MBps": one("read_bw", "total"),
            "write_s": one("write_s", "max") + one("open_s", "max") + one("close_s", "max")}


def reference(probe, directory, nbytes, procs, per_proc=False):
    out = subprocess.run([str(probe), "-d", directory, "-s", str(nbytes), "-p", str(procs)] + (["-f"] if per_proc else []),
                         capture_output=True, text=True, timeout=600, check=True)
    f = out.stdout.split()
    v = dict(zip(f[0::2], f[1::2]))
    return {"write_MBps": float(v["write_MBps"]), "read_MBps": float(v["read_MBps"]), "write_s": float(v["write_s"])}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--dirs", default="/dev/shm,/tmp")
    ap.add_argument("--grid", default="2048x2048x8", help="nx x ny x nz (default: 256 MiB of doubles per step)")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--types", default="double")
    ap.add_argument("--mpi", default="openmpi,mpich")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--out", default="results/bench")
    ap.add_argument("--summarize", metavar="JSON", help="only print the summary of an earlier run's raw file")
    a = ap.parse_args()
    if a.summarize:
        raw = json.loads(Path(a.summarize).read_text())
        return summarize(raw["runs"], a.dirs.split(","), a.mpi.split(","), raw["ranks"], raw["repetitions"]
                         if "repetitions" in raw else a.repetitions, raw["seed"], raw["grid"], raw["steps"],
                         raw["types"], raw["bytes"], Path(a.summarize))
    seed = a.seed if a.seed is not None else int(time.time())
    rng = random.Random(seed)
    nx, ny, nz = (int(v) for v in a.grid.split("x"))
    per_point = sum({"double": 8, "float": 4}[t] for t in a.types.split(","))
    nbytes = nx * ny * nz * per_point * a.steps
    common = ["-x", str(nx), "-y", str(ny), "-z", str(nz), "-t", str(a.steps), "-T", a.types, "-r", "serial", "-l", "1x2"]
    mpis = a.mpi.split(",")
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / "file_write_bw"
        subprocess.run(["gcc", "-O2", "-o", str(probe), str(HERE / "file_write_bw.c")], check=True)
        for directory in a.dirs.split(","):
            # tmpfs and ext4 serialize writers of one file on its inode lock, so a shared file's
            # limit (x{ranks} one file) is lower than separate files' (x{ranks} files).
            jobs = {f"limit: pwrite x{p} one file": (lambda p=p, d=directory: reference(probe, d, nbytes, p))
                    for p in sorted({1, a.ranks})}
            jobs[f"limit: pwrite x{a.ranks} files"] = lambda d=directory: reference(probe, d, nbytes, a.ranks, True)
            for label, families, args, env in CONFIGS:
                for mpi in mpis:
                    if mpi in families:
                        jobs[f"{mpi} {label}"] = (lambda m=mpi, x=args, e=env, d=directory:
                                                  iobench(m, a.ranks, common + x + ["-d", d], e))
            for rep in range(-1, a.repetitions):  # -1: warm-up round, not analysed
                order = list(jobs)
                rng.shuffle(order)
                for name in order:
                    v = jobs[name]()
                    runs.append({"dir": directory, "repetition": rep, "config": name, **v})
                    print(f"  {directory} rep {rep + 1}/{a.repetitions} {name:34s} write {v['write_MBps']:9.1f} MB/s "
                          f"read {v['read_MBps']:9.1f} MB/s", file=sys.stderr, flush=True)

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "io_bandwidth.json").write_text(json.dumps({"seed": seed, "grid": a.grid, "steps": a.steps, "types": a.types,
                                                       "bytes": nbytes, "ranks": a.ranks, "repetitions": a.repetitions,
                                                       "runs": runs}, indent=1))
    summarize(runs, a.dirs.split(","), mpis, a.ranks, a.repetitions, seed, a.grid, a.steps, a.types, nbytes,
              out / "io_bandwidth.json")


def summarize(runs, dirs, mpis, ranks, repetitions, seed, grid, steps, types, nbytes, raw_path):
    print(f"\nnm-iobench natively, {ranks} ranks, grid {grid}, {steps} steps of {types} = "
          f"{nbytes / 2**20:.0f} MiB per run, {repetitions} interleaved repetitions after a warm-up (seed {seed})")
    for directory in dirs:
        rows = [r for r in runs if r["dir"] == directory and r["repetition"] >= 0]
        seen = set(r["config"] for r in rows)
        names = sorted(n for n in seen if n.startswith("limit"))
        names += [f"{m} {label}" for m in mpis for label, *_ in CONFIGS if f"{m} {label}" in seen]
        med = {n: {k: statistics.median(r[k] for r in rows if r["config"] == n) for k in ("write_MBps", "read_MBps", "write_s")}
               for n in names}
        one_file = med[f"limit: pwrite x{ranks} one file"]["write_MBps"]
        files = med[f"limit: pwrite x{ranks} files"]["write_MBps"]
        print(f"\n{directory}: limit = {one_file:.0f} MB/s into one file, {files:.0f} MB/s into a file each "
              f"({ranks} processes pwrite the same bytes from memory); 'of limit' uses the one-file limit "
              f"except for file-per-rank")
        print(f"{'configuration':36s} {'write MB/s':>11s} {'[min - max]':>17s} {'read MB/s':>10s} {'of limit':>9s} {'vs serial':>10s}")
        for n in names:
            w = [r["write_MBps"] for r in rows if r["config"] == n]
            mpi = n.split()[0]
            serial = med.get(f"{mpi} serial/posix")
            speedup = f"{serial['write_s'] / med[n]['write_s']:9.2f}x" if serial and not n.startswith("limit") else ""
            limit = files if "file-per-rank" in n else one_file
            print(f"{n:36s} {med[n]['write_MBps']:11.0f} [{min(w):6.0f} - {max(w):6.0f}] {med[n]['read_MBps']:10.0f} "
                  f"{med[n]['write_MBps'] / limit:9.2f} {speedup:>10s}")
    print(f"\nraw runs: {raw_path}")


if __name__ == "__main__":
    main()
