"""How wide the vector instructions of a program's machine code are: the widest SIMD level its
`.text` uses, against what the CPU offers (seed 001: a portable SSE2 build of GROMACS in the
image against the host's AVX2 build).

How: `objdump -d -j .text` (GNU binutils) disassembles the program's code, and each
instruction's operands say its width: a %zmm register is AVX-512, %ymm is AVX/AVX2 (256-bit),
an xmm operand of a VEX-encoded instruction (its mnemonic starts with 'v') is AVX-128, another
xmm operand is SSE. Only the program file itself is read, not the libraries it loads (a
program whose vector code lives in its own shared library is seen as its launcher's width)."""

import os
import re
import shutil
import subprocess

LEVELS = ("none", "sse", "avx128", "avx", "avx512")
_WORDS = {"sse": "SSE (128-bit)", "avx128": "AVX-128", "avx": "AVX/AVX2 (256-bit)", "avx512": "AVX-512", "none": "no vector"}
_REG = re.compile(r"%(zmm|ymm|xmm)\d+")
MAX_LINES = 5_000_000   # a huge program: what was seen in its first lines


def widest(disassembly_lines):
    """The widest SIMD level the instructions use, and how many instructions use each."""
    counts = dict.fromkeys(LEVELS[1:], 0)
    for line in disassembly_lines:
        regs = _REG.findall(line)
        if not regs:
            continue
        mnemonic = line.split("\t")[-1].strip().split(" ")[0]  # ADDRESS:<TAB>[RAW BYTES<TAB>]INSTRUCTION
        if "zmm" in regs:
            counts["avx512"] += 1
        elif "ymm" in regs:
            counts["avx"] += 1
        elif mnemonic.startswith("v"):
            counts["avx128"] += 1
        else:
            counts["sse"] += 1
    level = next((lv for lv in reversed(LEVELS[1:]) if counts[lv]), "none")
    return level, counts


def cpu_level(flags):
    """The widest level a CPU with these /proc/cpuinfo flags offers."""
    flags = set(flags)
    if "avx512f" in flags:
        return "avx512"
    if "avx2" in flags or "avx" in flags:
        return "avx"
    return "sse" if "sse2" in flags else "none"


def words(level):
    return _WORDS.get(level, level)


def scan(path, timeout=120):
    """(level, counts) of the program file at `path`, or None where it cannot be read
    (no objdump, not an ELF file of this machine)."""
    objdump = shutil.which("objdump")
    if not objdump or not path or not os.path.isfile(path):
        return None
    try:
        with subprocess.Popen([objdump, "-d", "--no-show-raw-insn", "-j", ".text", path], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, errors="replace") as proc:
            lines = []
            for i, line in enumerate(proc.stdout):
                if i >= MAX_LINES:
                    break
                lines.append(line)
            proc.kill()
            proc.wait(timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if not lines:
        return None
    return widest(lines)


def wider_image(slow_variant, slow_level, others):
    """The image to try in place of the slow variant's: among `others` ((variant, level) of the
    study's other variants that ran the same benchmark), one of the same MPI family in a
    container whose build of the program is wider than `slow_level`, the widest first; None
    when there is none. Only the image changes in the ablation, so the same MPI and mode are
    asked of the image that offers the wider build."""
    rank = LEVELS.index
    mine = slow_variant.get("image")
    found = [(rank(level), v["image"]) for v, level in others
             if v.get("image") and v["image"] != mine and v.get("mpi") == slow_variant.get("mpi")
             and level in LEVELS and rank(level) > rank(slow_level)]
    return max(found)[1] if found else None
