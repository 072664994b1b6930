"""Building the GPU kernels (kernels/gpu/): C host code with the host's cc (and an MPI's
compiler wrapper for nm-gpu-osu), PTX kernels embedded and compiled by the driver's JIT at
load time, so no CUDA toolkit is needed to build them and only a driver to run them.

They are not in kernels/csrc: that tree is copied into (and digested for) every image; the
CPU suite and the images do not change. build() puts them in $NEARMETAL_HOME/gpu-kernels/;
each one that cannot be built is skipped with a one-line reason (no cc, no MPI compiler).
check_ptx() compiles the PTX with ptxas where one is found (a CUDA toolkit, or the PyPI
nvidia-cuda-nvcc-cu12 wheel, which carries ptxas but no nvcc): a real check of the PTX on a
machine without a GPU.
"""

import os
import shutil
import subprocess

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu")
PTX = os.path.join(HERE, "stream.ptx")
PROGRAMS = ("nm-gpu-stream", "nm-gpu-copy")  # plain C + libdl
MPI_PROGRAMS = ("nm-gpu-osu",)  # and MPI: one per family
FLAGS = ("-O2", "-Wall", "-Wno-stringop-overflow")


def out_dir():
    from ..home import subdir

    return subdir("gpu-kernels")


def _compile(compiler, program, dest):
    source = os.path.join(HERE, f"{program}.c")
    argv = [compiler, *FLAGS, f"-I{HERE}", f'-DNM_PTX="{PTX}"', "-o", dest, source, "-ldl"]
    out = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300)
    if out.returncode != 0:
        return (out.stderr.strip().splitlines() or ["no output"])[-1]
    return None


def build(families=None, dest=None):
    """({program: path}, [one-line reasons for what was skipped]); MPI programs are named
    PROGRAM.FAMILY (nm-gpu-osu.openmpi)."""
    from ..discovery.mpi import discover

    dest = str(dest or out_dir())
    os.makedirs(dest, exist_ok=True)
    built, skipped = {}, []
    cc = shutil.which("cc") or shutil.which("gcc")
    for program in PROGRAMS:
        if not cc:
            skipped.append(f"{program}: skipped: no C compiler (cc) on PATH")
            continue
        why = _compile(cc, program, os.path.join(dest, program))
        if why:
            skipped.append(f"{program}: build failed: {why}")
        else:
            built[program] = os.path.join(dest, program)
    mpis = discover()
    for family in (sorted(mpis) if families is None else families):
        compiler = (mpis.get(family) or {}).get("compiler")
        for program in MPI_PROGRAMS:
            name = f"{program}.{family}"
            if not compiler:
                skipped.append(f"{name}: skipped: no {family} installation (its compiler wrapper) on this host")
                continue
            why = _compile(compiler, program, os.path.join(dest, name))
            if why:
                skipped.append(f"{name}: build failed: {why}")
            else:
                built[name] = os.path.join(dest, name)
    return built, skipped


def find_ptxas():
    """ptxas from $NEARMETAL_PTXAS, PATH, $CUDA_HOME/bin, or an installed nvidia-cuda-nvcc-cu12
    wheel; None."""
    found = os.environ.get("NEARMETAL_PTXAS") or shutil.which("ptxas")
    if found:
        return found
    for base in filter(None, (os.environ.get("CUDA_HOME"), "/usr/local/cuda")):
        if os.access(os.path.join(base, "bin", "ptxas"), os.X_OK):
            return os.path.join(base, "bin", "ptxas")
    try:
        import nvidia.cuda_nvcc as wheel  # the PyPI wheel's package
    except ImportError:
        return None
    for base in getattr(wheel, "__path__", []):
        path = os.path.join(base, "bin", "ptxas")
        if os.path.isfile(path):
            return path
    return None


def check_ptx(ptxas, arch="sm_90"):
    """None when ptxas compiles the kernels' PTX for `arch`, else its last line of error."""
    out = subprocess.run([ptxas, f"-arch={arch}", "-o", os.devnull, PTX], capture_output=True, text=True,
                         stdin=subprocess.DEVNULL, timeout=120)
    return None if out.returncode == 0 else (out.stderr.strip().splitlines() or ["failed"])[-1]


def main(argv=None):
    """`python -m nearmetal.kernels.gpu_build [DEST]`: build the GPU kernels into DEST
    (default $NEARMETAL_HOME/gpu-kernels), one line per program built or skipped."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if len(args) > 1 or (args and args[0].startswith("-")):
        print("usage: python -m nearmetal.kernels.gpu_build [DEST]", file=sys.stderr)
        return 2
    built, skipped = build(dest=args[0] if args else None)
    for name, path in sorted(built.items()):
        print(f"{name}: {path}")
    for line in skipped:
        print(line)
    return 0 if built else 1


if __name__ == "__main__":
    raise SystemExit(main())
