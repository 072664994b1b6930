"""What a program is, for doctor: its MPI (SONAME, ABI), RPATH/RUNPATH, the SIMD level it
declares; and which programs of an image link an MPI library at all.

Read from the ELF files alone (elf.py), on the host or inside an image's root, so it works
for images nearmetal did not build and for host programs with no image in sight."""

import os

from .elf import LinkerView, read_elf
from .errors import NearmetalError

# Where an image keeps programs a user runs (program_paths.py looks a bare name up there).
from .program_paths import CONTAINER_PATH


def describe(host_path, shown_path=None):
    """{path, linkage, rpath, runpath, mpi_soname, mpi_abi, simd} of one ELF program."""
    from .families import abi_of

    info = read_elf(host_path)
    abi, soname = None, None
    for s in info.needed:
        if abi_of(s):
            abi, soname = abi_of(s), s
    return {"path": str(shown_path or host_path),
            "linkage": "runpath" if info.runpath else ("rpath" if info.rpath else "none"),
            "rpath": list(info.rpath), "runpath": list(info.runpath),
            "mpi_soname": soname, "mpi_abi": abi, "simd": simd_of(host_path)}


def simd_of(path):
    """The x86-64 ISA level an ELF file declares it needs (GNU property note), if any."""
    try:
        from elftools.elf.elffile import ELFFile

        with open(path, "rb") as f:
            elf = ELFFile(f)
            for sec in elf.iter_sections():
                if sec.name != ".note.gnu.property":
                    continue
                for note in sec.iter_notes():
                    for prop in note.get("n_desc", []) or []:
                        if prop.get("pr_type") == "GNU_PROPERTY_X86_ISA_1_NEEDED":
                            bits = prop.get("pr_data", 0)
                            for level, bit in (("x86-64-v4", 8), ("x86-64-v3", 4), ("x86-64-v2", 2), ("x86-64-baseline", 1)):
                                if isinstance(bits, int) and bits & bit:
                                    return level
    except Exception:  # a note we cannot parse must not break the report
        return "unknown"
    return "unknown"


def host_program(path):
    """describe() of a program on the host; a one-line error for one that is not an ELF program."""
    full = os.path.abspath(os.path.expanduser(str(path)))
    if not os.path.isfile(full):
        from .families import names
        from .program_paths import host_program as find

        full = find(str(path), names()[0])  # a bare name: PATH (or a kernel), as `run` looks it up
    try:
        return describe(full)
    except NearmetalError as e:
        raise NearmetalError(f"--program {path}: {e}")


def mpi_programs(rootfs):
    """In-image paths of the executables in the image's program directories (and its
    --recipe build's) that link an MPI library directly (DT_NEEDED), each file once
    (merged /usr: /bin is /usr/bin)."""
    from .families import abi_of

    from .families import names
    from .program_paths import APP_PREFIX

    view = LinkerView(rootfs)
    seen, out = set(), []
    # an application built by `image build --recipe` first, then the image's PATH
    for directory in [f"{APP_PREFIX}/{f}/bin" for f in names()] + list(CONTAINER_PATH):
        host_dir = view.host_path(directory)
        try:
            names = sorted(os.listdir(host_dir))
        except OSError:
            continue
        for name in names:
            host = host_dir / name
            try:
                real = os.path.realpath(host)
                if real in seen or not os.path.isfile(real) or not os.access(real, os.X_OK):
                    continue
                seen.add(real)
                with open(real, "rb") as f:
                    if f.read(4) != b"\x7fELF":
                        continue
                needed = read_elf(real).needed
            except (OSError, NearmetalError):
                continue
            if any(abi_of(s) for s in needed):
                out.append(f"{directory}/{name}")
    return out
