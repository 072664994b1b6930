"""The on-GPU check of issue 30 (docs/gpu.md, "The on-GPU check"), run by bench/gpu_check.sh on a
machine with an NVIDIA GPU, Python 3.12 and a C compiler, but no MPI, no container runtime and
none of nearmetal's dependencies: everything else comes from the carried folder
(bench/gpu_check_assemble.py) and this working tree's src/.

    python3 bench/gpu_check.py --bundle .gpu-check --out $OUT [--rehearse]

Steps (each records its result, or its one-line reason for failing, in OUT/gpu_check.json):
 1. doctor's GPU table (discovery.gpu, gpu/report.py);
 2. the GPU witness of nm-gpu-stream natively and in bwrap and ch-run (the driver libraries
    bound by --gpus: the rank's libcuda inode against the host's), and of PyTorch natively;
 3. device STREAM triad natively vs in each container, three alternating rounds: the ratio;
 4. the start-up cost of the GPU switch: /bin/true in each container with and without the
    --gpus arguments (20 interleaved starts each, median), first CUDA context natively vs in the container, and planning time.
Containers are composed by the same code `nearmetal run --gpus` uses (gpu.plan.prepare, each
runtime's gpu_args and wrap, nm-gpuvis); without an MPI there is no launcher, so each check is
one process. --rehearse runs it all on a fake two-GPU tree (tests/gpu_tree.py) on a machine
without a GPU: the containers start with the binds, the kernels say "no GPU".
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import types
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STARTED = time.monotonic()
BUDGET_S = 270  # the machine's 5 minutes, less unpacking
STARTS = 20  # container starts per variant for the start-up cost (median)
RESULTS = {"steps": {}}


def log(text):
    print(text, flush=True)
    RESULTS.setdefault("log", []).append(text)


def step(name):
    """Run the decorated step now, recording its result or its one-line failure."""
    def run(fn):
        if time.monotonic() - STARTED > BUDGET_S:
            RESULTS["steps"][name] = {"skipped": f"out of time ({BUDGET_S} s)"}
            return fn
        t0 = time.monotonic()
        try:
            RESULTS["steps"][name] = {"result": fn(), "seconds": round(time.monotonic() - t0, 2)}
        except Exception as e:  # noqa: BLE001  the check goes on; the reason is kept
            line = f"{type(e).__name__}: {e}".splitlines()[0]
            RESULTS["steps"][name] = {"error": line, "seconds": round(time.monotonic() - t0, 2)}
            log(f"[{name}] failed: {line}")
        return fn
    return run


def unpack(bundle, work):
    """The carried folder made usable: wheels on a PYTHONPATH folder, the .debs unpacked outside
    /, the image, the prebuilt tools in a nearmetal home (newer than their sources: no rebuild)."""
    pylib = work / "pylib"
    for whl in sorted((bundle / "wheels").glob("*.whl")):
        with zipfile.ZipFile(whl) as z:
            z.extractall(pylib)
    opt = work / "opt"
    opt.mkdir()
    for deb in sorted((bundle / "debs").glob("*.deb")):
        if shutil.which("dpkg-deb"):
            subprocess.run(["dpkg-deb", "-x", str(deb), str(opt)], check=True)
        else:  # ar archive: data.tar.* inside
            subprocess.run(["ar", "x", str(deb)], cwd=work, check=True)
            data = next(work.glob("data.tar*"))
            with tarfile.open(data) as t:
                t.extractall(opt)
            data.unlink()
    with tarfile.open(bundle / "rootfs.tar") as t:
        t.extractall(work / "image")
    tools = work / "home" / "tools"
    tools.mkdir(parents=True)
    for f in (bundle / "tools").iterdir():
        shutil.copy2(f, tools / f.name)
        os.utime(tools / f.name)
    probe = subprocess.run([str(tools / "nm-gpuvis")], capture_output=True, text=True)
    if "GLIBC_" in probe.stderr:  # built on Debian 12: let nearmetal build it here from its source (cc)
        (tools / "nm-gpuvis").unlink()
    return pylib, opt


def runtime_env(opt, bundle):
    """PATH with the unpacked runtimes first; their libraries from hostlib/ when this machine lacks them."""
    env = dict(os.environ, PATH=f"{opt}/usr/bin:{os.environ.get('PATH', '/usr/bin:/bin')}")
    env.setdefault("USER", "root")
    for exe in ("bwrap", "ch-run"):
        path = opt / "usr" / "bin" / exe
        out = subprocess.run([str(path), "--version"], capture_output=True, text=True, env=env)
        if out.returncode != 0 and "error while loading shared libraries" in out.stderr:
            env["LD_LIBRARY_PATH"] = str(bundle / "hostlib")
            log(f"{exe}: using the carried libraries ({out.stderr.strip().splitlines()[-1]})")
    return env


def timed(argv, env, timeout=90):
    t0 = time.monotonic()
    out = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout, stdin=subprocess.DEVNULL)
    return out, time.monotonic() - t0


def last_line(out):
    return ((out.stderr or out.stdout).strip().splitlines() or [f"exit {out.returncode}"])[-1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", default=str(REPO / ".gpu-check"))
    ap.add_argument("--out", default=os.environ.get("OUT") or "gpu-check-out")
    ap.add_argument("--rehearse", action="store_true", help="a fake two-GPU tree (no GPU here)")
    args = ap.parse_args()
    bundle, out_dir = Path(args.bundle).resolve(), Path(args.out).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="nm-gpu-check."))
    pylib, opt = unpack(bundle, work)
    sys.path[:0] = [str(REPO / "src"), str(pylib)]
    os.environ["NEARMETAL_HOME"] = str(work / "home")
    os.environ.setdefault("USER", "root")
    env = runtime_env(opt, bundle)
    os.environ["PATH"] = env["PATH"]
    try:
        checks(work, env, bundle, args.rehearse)
    finally:
        RESULTS["total_seconds"] = round(time.monotonic() - STARTED, 1)
        (out_dir / "gpu_check.json").write_text(json.dumps(RESULTS, indent=1, default=str))
        (out_dir / "gpu_check.txt").write_text("\n".join(RESULTS.get("log", [])) + "\n")
        shutil.rmtree(work, ignore_errors=True)


def checks(work, env, bundle, rehearse):
    from nearmetal.discovery.gpu import discover
    from nearmetal.gpu import report
    from nearmetal.gpu._visible import wrap as gpuvis
    from nearmetal.gpu.plan import library_path, prepare
    from nearmetal.kernels.parsers.gpu import parse as parse_kernel
    from nearmetal.runtimes import get as get_runtime
    from nearmetal.runtimes.base import RankSpec
    from nearmetal.witness.gpu import library as witness_lib, parse as parse_witness, verdict

    if rehearse:
        sys.path.insert(0, str(REPO / "tests"))
        import gpu_tree

        fake = gpu_tree.make(work / "fake-machine")
        found = discover(root=str(fake), load=None)
        for lib in found["libraries"].values():  # the fake tree's files, seen from /
            lib["file"] = str(fake) + lib["file"]
        log("REHEARSAL on a fake two-GPU tree: no GPU here, the kernels will say so")
    else:
        found = discover()
    RESULTS["found"] = found

    @step("doctor")
    def _doctor():
        from rich.console import Console

        import io

        console = Console(record=True, width=150, file=io.StringIO())
        report.render(report.collect(found), console)
        log(console.export_text())
        return report.collect(found)

    if not found["gpus"]:
        log("no GPU on this machine: nothing more to check")
        return
    rootfs = work / "image" / "rootfs"
    # the image as runtimes read it since image formats became an axis: a directory image only
    image = types.SimpleNamespace(name="gpu-check", rootfs=rootfs, sqfs=None, sif=None, podman_ref=None, meta={},
                                  location=lambda fmt: rootfs if fmt == "dir" else None)
    witness = witness_lib()
    host_libcuda = next(v["file"] for k, v in found["libraries"].items() if k.startswith("libcuda.so"))
    host_inodes = {os.stat(host_libcuda).st_ino}
    RESULTS["host_libcuda"] = {"file": host_libcuda, "inode": sorted(host_inodes)}
    runtimes = {"bwrap": get_runtime("bwrap"), "charliecloud": get_runtime("charliecloud")}
    kernels = bundle / "kernels"
    probe = subprocess.run([str(kernels / "nm-gpu-stream"), "-h"], capture_output=True, text=True)
    if "GLIBC_" in probe.stderr:  # built on Debian 12 (glibc 2.36): rebuilt here from the sources
        from nearmetal.kernels.gpu_build import build

        built, skipped = build(families=[], dest=work / "kernels")
        log(f"kernels rebuilt here ({probe.stderr.strip().splitlines()[-1]}); skipped: {skipped or 'none'}")
        kernels = work / "kernels"
    # natively the driver folder goes last on the library path, in case this machine's loader
    # does not search it (the containers get the libraries bound at /nm/host-gpu/lib)
    native_path = ":".join(filter(None, [env.get("LD_LIBRARY_PATH"), os.path.dirname(host_libcuda)]))

    def component(rt):
        return types.SimpleNamespace(runtime=rt, image=image, env={}, runtime_args=(), mode="hybrid",
                                     image_format=None)

    def argv_for(name, program, with_gpu=True, preload=True):
        """(argv, env): `program` (argv in the image / natively) under the runtime `name` (None: natively)."""
        rank_env = {"LD_PRELOAD": witness} if preload else {}
        if name is None:
            plan = prepare(component(None), found, "1")
            host_prog = [str(kernels / program[0].lstrip("/"))] + program[1:]
            argv = gpuvis(host_prog, plan.visible) if with_gpu else host_prog
            return argv, dict(env, **rank_env, OMPI_COMM_WORLD_LOCAL_RANK="0", LD_LIBRARY_PATH=native_path)
        rt = runtimes[name]
        plan = prepare(component(rt), found, "1") if with_gpu else None
        container_env = dict(rank_env)
        if plan is not None:
            container_env = {**plan.env, **container_env, "LD_LIBRARY_PATH": library_path({})}
        spec = RankSpec(image, program, env=container_env, runtime_args=plan.args if plan else ())
        argv = rt.wrap(spec)
        if rehearse:  # the fake tree's device files stand in for /dev/nvidia* (bwrap binds them by path)
            argv = [str(fake) + a if a.startswith("/dev/nvidia") and argv[i - 1] == "--dev-bind" else a
                    for i, a in enumerate(argv)]
        if plan is not None:
            argv = gpuvis(argv, plan.visible)
        return argv, dict(env, OMPI_COMM_WORLD_LOCAL_RANK="0")

    stream = ["/nm-gpu-stream", "-n", str(1 << 25), "-t", "30"]

    @step("witness")
    def _witness():
        out = {}
        for name in (None, "bwrap", "charliecloud"):
            label = name or "native"
            try:
                argv, e = argv_for(name, stream)
                res, secs = timed(argv, e)
            except Exception as err:  # noqa: BLE001  a refusal or a runtime that cannot start: the others go on
                out[label] = {"error": str(err).splitlines()[0]}
                log(f"witness {label}: {out[label]['error']}")
                continue
            recs = parse_witness(res.stderr)
            kernel = parse_kernel(res.stdout, "gpu-stream", {})
            out[label] = {"exit": res.returncode, "witness": recs, "verdict": [verdict(r, host_inodes) for r in recs],
                          "triad_gbps": next((r["value"] for r in kernel if r["metric"] == "triad"), None),
                          "seconds": round(secs, 2), "last_line": last_line(res) if res.returncode else None,
                          "argv": argv}
            log(f"witness {label}: exit {res.returncode}; " + ("; ".join(out[label]["verdict"]) or last_line(res)))
            if name is None and not rehearse and "/dev/nvidia-uvm" not in found["devices"]:
                from nearmetal.discovery.gpu import device_nodes

                found["devices"] = device_nodes()  # the first CUDA program makes the UVM node where it can
        return out

    @step("pytorch_witness")
    def _torch():
        code = ("import torch; x = torch.ones(1 << 20, device='cuda'); torch.cuda.synchronize(); "
                "print(torch.cuda.get_device_name(0), float(x.sum()))")
        res, secs = timed([sys.executable, "-c", code], dict(env, LD_PRELOAD=witness), timeout=120)
        recs = parse_witness(res.stderr)
        log(f"pytorch natively: exit {res.returncode}; {res.stdout.strip()}; "
            + ("; ".join(verdict(r, host_inodes) for r in recs) or last_line(res)))
        return {"exit": res.returncode, "stdout": res.stdout.strip(), "witness": recs, "seconds": round(secs, 2)}

    @step("stream_ratio")
    def _ratio():
        best = {}
        rounds = []
        for _ in range(3):
            row = {}
            for name in (None, "bwrap", "charliecloud"):
                try:
                    argv, e = argv_for(name, stream, preload=False)
                    res, _ = timed(argv, e)
                except Exception as err:  # noqa: BLE001
                    row[name or "native"] = str(err).splitlines()[0]
                    continue
                triad = next((r["value"] for r in parse_kernel(res.stdout, "gpu-stream", {})
                              if r["metric"] == "triad"), None)
                row[name or "native"] = triad
                if triad:
                    best[name or "native"] = max(best.get(name or "native", 0), triad)
            rounds.append(row)
        ratios = {k: round(v / best["native"], 4) for k, v in best.items() if k != "native" and best.get("native")}
        log(f"device STREAM triad best GB/s {best}; container/native {ratios}")
        return {"rounds": rounds, "best_gbps": best, "ratio_to_native": ratios}

    def startup_of(name):
        # interleaved, so that the machine's drift falls on both alike
        argvs = {key: argv_for(name, ["/bin/true"], with_gpu=key == "with_gpus", preload=False)
                 for key in ("without", "with_gpus")}
        samples = {key: [] for key in argvs}
        for _ in range(STARTS):
            for key, (argv, e) in argvs.items():
                res, secs = timed(argv, e)
                if res.returncode != 0:
                    raise RuntimeError(f"{name} /bin/true {key}: {last_line(res)}")
                samples[key].append(secs)
        times = {key: round(statistics.median(v) * 1e3, 2) for key, v in samples.items()}
        first_ctx = {}
        for label, rt in (("native", None), (name, name)):
            argv, e = argv_for(rt, ["/nm-gpu-copy", "-m", "65536", "-i", "1"], preload=False)
            samples = [timed(argv, e)[1] for _ in range(3)]
            first_ctx[label] = round(statistics.median(samples) * 1e3, 1)
        log(f"start-up {name}: /bin/true {times} ms; first CUDA context (process start to exit) {first_ctx} ms")
        return {"true_ms": times, "gpu_args_add_ms": round(times["with_gpus"] - times["without"], 2),
                "first_cuda_context_ms": first_ctx}

    @step("startup_cost")
    def _startup():
        out = {}
        for name in ("bwrap", "charliecloud"):
            try:
                out[name] = startup_of(name)
            except Exception as err:  # noqa: BLE001
                out[name] = {"error": str(err).splitlines()[0]}
                log(f"start-up {name}: {out[name]['error']}")
        t0 = time.monotonic()
        for _ in range(5):
            prepare(component(runtimes["bwrap"]), discover() if not rehearse else found, "1")
        out["plan_ms"] = round((time.monotonic() - t0) / 5 * 1e3, 2)
        log(f"planning --gpus (discovery + staging check + arguments): {out['plan_ms']} ms")
        return out

    @step("osu")
    def _osu():
        if not shutil.which("mpirun") and not shutil.which("mpiexec"):
            return "skipped: no MPI on this machine (nm-gpu-osu needs two MPI ranks)"
        return "MPI found but not carried for this check: run `nearmetal run -n 2 --gpus all -- nm-gpu-osu.FAMILY`"


if __name__ == "__main__":
    main()
