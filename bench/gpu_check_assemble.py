"""Assemble, on this (Debian 12, GPU-less) machine, the folder bench/gpu_check.sh carries to a GPU
machine that has CUDA's compiler, Python 3.12 and PyTorch, but no Debian MPI, no container
runtime and none of nearmetal's Python dependencies (docs/gpu.md, "The on-GPU check").

    .venv/bin/python bench/gpu_check_assemble.py [DEST]      (default: .gpu-check in the repo)

DEST gets (a few MB in all; the limit is 60 MiB):
  wheels/   pure-Python wheels of what doctor's GPU table and the GPU planning import
            (rich and its dependencies, pyelftools), unpacked there into a PYTHONPATH folder;
  debs/     bubblewrap and charliecloud-runtime (ch-run) from Debian 12, unpacked there outside /;
  hostlib/  their libraries besides glibc (libcap, libselinux, squashfuse, fuse3, ...), in case
            the GPU machine lacks them;
  tools/    nm-gpuvis and nm-gpu-witness.so, built here (rebuilt there from the sources when a cc
            is there; these are the fallback);
  kernels/  nm-gpu-stream and nm-gpu-copy, built here (glibc >= 2.34 to run);
  rootfs.tar  a small image: the kernels, /bin/true, their libraries, /nm/host-gpu and the
            other mount points (the container side of every check);
  manifest.json  what was put where, with sizes.
Every command is an argv list; nothing here needs a GPU.
"""

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WHEELS = ("rich", "markdown-it-py", "mdurl", "pygments", "pyelftools")
DEBS = ("bubblewrap", "charliecloud-runtime")
MOUNT_DIRS = ("bin", "dev", "proc", "sys", "tmp", "etc", "root", "nm/host-mpi", "nm/host-gpu", "nm/work")


def run(argv, **kw):
    print("+", " ".join(map(str, argv)), flush=True)
    subprocess.run([str(a) for a in argv], check=True, **kw)


def closure(path, skip_glibc=True):
    from nearmetal.elf import LinkerView, read_elf

    libs = [lib.path for lib in LinkerView("/").closure(str(path), skip_glibc=skip_glibc)]
    interp = read_elf(str(path)).interp
    return libs + ([interp] if interp and not skip_glibc else [])


def make_rootfs(dest, programs):
    """A directory image with `programs` at /, /bin/true, their libraries, and the mount points."""
    root = dest / "rootfs"
    shutil.rmtree(root, ignore_errors=True)
    for d in MOUNT_DIRS:
        (root / d).mkdir(parents=True, exist_ok=True)
    os.chmod(root / "tmp", 0o1777)
    true = shutil.which("true") or "/bin/true"
    shutil.copy2(true, root / "bin" / "true")
    files = closure(true, skip_glibc=False)
    for p in programs:
        shutil.copy2(p, root / Path(p).name)
        files += closure(p, skip_glibc=False)
    for f in sorted(set(files)):
        target = root / f.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.realpath(f), target)
    for name, text in (("passwd", "root:x:0:0:root:/root:/bin/true\n"), ("group", "root:x:0:\n"),
                       ("hosts", "127.0.0.1 localhost\n")):
        (root / "etc" / name).write_text(text)
    with tarfile.open(dest / "rootfs.tar", "w") as tar:
        tar.add(root, arcname="rootfs")
    shutil.rmtree(root)


def main():
    dest = Path(sys.argv[1] if len(sys.argv) > 1 else REPO / ".gpu-check").resolve()
    shutil.rmtree(dest, ignore_errors=True)
    for d in ("wheels", "debs", "hostlib", "tools", "kernels"):
        (dest / d).mkdir(parents=True)
    os.environ["NEARMETAL_HOME"] = str(dest / "home")
    sys.path.insert(0, str(REPO / "src"))

    run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", "-d",
         dest / "wheels", *WHEELS])
    run(["apt-get", "download", *DEBS], cwd=dest / "debs")
    for exe in ("bwrap", "ch-run"):
        for lib in closure(shutil.which(exe) or f"/usr/bin/{exe}"):
            shutil.copy2(os.path.realpath(lib), dest / "hostlib" / Path(lib).name)

    from nearmetal.gpu._visible import binary as gpuvis
    from nearmetal.kernels.gpu_build import build
    from nearmetal.witness.gpu import library as witness

    shutil.copy2(gpuvis(), dest / "tools" / "nm-gpuvis")
    shutil.copy2(os.path.realpath(witness()), dest / "tools" / "nm-gpu-witness.so")
    built, skipped = build(families=[], dest=dest / "kernels")
    if "nm-gpu-stream" not in built:
        sys.exit(f"gpu_check_assemble: the kernels did not build: {skipped}")
    make_rootfs(dest, [built["nm-gpu-stream"], built["nm-gpu-copy"]])
    shutil.rmtree(dest / "home", ignore_errors=True)

    sizes = {str(p.relative_to(dest)): p.stat().st_size for p in sorted(dest.rglob("*")) if p.is_file()}
    total = sum(sizes.values())
    (dest / "manifest.json").write_text(json.dumps({"files": sizes, "total_bytes": total}, indent=1))
    print(f"gpu_check_assemble: {dest}: {len(sizes)} files, {total / (1 << 20):.1f} MiB (limit 60 MiB)")
    if total > 60 << 20:
        sys.exit("gpu_check_assemble: over the 60 MiB a GPU check may carry")


if __name__ == "__main__":
    main()
