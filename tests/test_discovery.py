"""Host discovery against what the system itself says."""

import os
import subprocess

from nearmetal.discovery import cpu, hazards


def test_mpi_families_and_sonames(host_mpis):
    ompi, mpich = host_mpis["openmpi"], host_mpis["mpich"]
    assert ompi["soname"] == "libmpi.so.40" and ompi["abi"] == "openmpi"
    assert mpich["soname"] == "libmpich.so.12" and mpich["abi"] == "mpich"
    for m in (ompi, mpich):
        assert os.path.isfile(m["library"]) and os.access(m["launcher"], os.X_OK)
    version = subprocess.run(["mpichversion"], capture_output=True, text=True).stdout
    assert mpich["version"] in version
    info = subprocess.run(["ompi_info", "--parsable", "--version"], capture_output=True, text=True).stdout
    assert ompi["version"] in info
    assert "ucx" in mpich["plugin_dirs"] and "openmpi" in ompi["plugin_dirs"]


def test_simd_level_from_flags():
    assert cpu.simd_level(["sse2"]) == "sse2"
    assert cpu.simd_level(["sse2", "avx", "avx2"]) == "avx2"
    assert cpu.simd_level(["avx512f", "avx2"]) == "avx512"
    with open("/proc/cpuinfo") as f:
        flags = next(l for l in f if l.startswith("flags")).split(":")[1].split()
    assert cpu.describe()["simd"] == cpu.simd_level(flags)


def test_hazards():
    assert hazards.find({}) == []
    found = hazards.find({"LD_AUDIT": "a.so", "LD_PRELOAD": "b.so", "HOME": "/root"})
    assert [h["variable"] for h in found] == ["LD_AUDIT", "LD_PRELOAD"]
    assert "3x" in found[0]["why"]
