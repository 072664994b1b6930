"""CPU model, core count and the widest SIMD level the CPU offers."""

import os


def simd_level(flags):
    flags = set(flags)
    for level, needed in (("avx512", "avx512f"), ("avx2", "avx2"), ("avx", "avx"), ("sse2", "sse2")):
        if needed in flags:
            return level
    return "none"


def describe():
    model, flags = "unknown", []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and model == "unknown":
                    model = value.strip()
                elif key == "flags" and not flags:
                    flags = value.split()
    except OSError:
        pass
    return {
        "model": model,
        "cores": os.cpu_count() or 1,
        "simd": simd_level(flags),
        "flags": sorted(f for f in flags if f in ("sse2", "sse4_2", "avx", "avx2", "fma", "avx512f")),
    }
