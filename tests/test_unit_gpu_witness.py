"""The GPU witness's reading, on text: its lines, /proc/self/maps, the driver's version file,
and the verdict against the host's libcuda inodes."""

import pytest

import gpu_tree
from nearmetal.witness import gpu as witness

pytestmark = pytest.mark.unit

MAPS = """\
55d0c0a00000-55d0c0a02000 r--p 00000000 fd:01 1234 /usr/bin/python3.11
7f0000000000-7f0000200000 r--p 00000000 00:2a 987654 /usr/local/nvidia/lib64/libcuda.so.550.54.15
7f0000200000-7f0000a00000 r-xp 00200000 00:2a 987654 /usr/local/nvidia/lib64/libcuda.so.550.54.15
7f1000000000-7f1000001000 rw-p 00000000 00:00 0 [heap]
"""
MAPS_IN_CONTAINER = MAPS.replace("/usr/local/nvidia/lib64/libcuda.so.550.54.15", "/nm/host-gpu/lib/libcuda.so.1")
LINE = ("nm-gpu-witness: rank=1 pid=42 program=/opt/nm/nm-gpu-stream libcuda=/nm/host-gpu/lib/libcuda.so.1 inode=987654 "
        "libcuda_version=550.54.15 driver=550.54.15 gpu=0000:3b:00.0 context=yes visible=1")


def test_parse_lines_sorted_by_rank():
    other = LINE.replace("rank=1", "rank=0").replace("gpu=0000:3b:00.0", "gpu=0000:18:00.0").replace("visible=1",
                                                                                                     "visible=0")
    recs = witness.parse(f"noise\n{LINE}\nnm-witness: rank=0 pid=1\n{other}\n")
    assert [r["rank"] for r in recs] == ["0", "1"]
    assert recs[1] == {"rank": "1", "pid": "42", "program": "/opt/nm/nm-gpu-stream",
                       "libcuda": "/nm/host-gpu/lib/libcuda.so.1", "inode": "987654", "libcuda_version": "550.54.15",
                       "driver": "550.54.15", "gpu": "0000:3b:00.0", "context": "yes", "visible": "1"}


def test_a_path_with_spaces_stays_whole():
    rec, = witness.parse(LINE.replace("program=/opt/nm/nm-gpu-stream", "program=/opt/my app/run"))
    assert rec["program"] == "/opt/my app/run" and rec["libcuda"] == "/nm/host-gpu/lib/libcuda.so.1"


def test_from_maps():
    assert witness.from_maps(MAPS) == ("/usr/local/nvidia/lib64/libcuda.so.550.54.15", 987654)
    assert witness.from_maps(MAPS_IN_CONTAINER) == ("/nm/host-gpu/lib/libcuda.so.1", 987654)
    assert witness.from_maps("7f-8f r--p 0 fd:01 5 /usr/lib/libc.so.6\n") is None


def test_record_from_maps_and_driver_text():
    rec = witness.record(MAPS, gpu_tree.OPEN_VERSION_TEXT, gpu="0000:18:00.0")
    assert rec == {"libcuda": "/usr/local/nvidia/lib64/libcuda.so.550.54.15", "inode": "987654",
                   "libcuda_version": "550.54.15", "driver": "550.54.15", "gpu": "0000:18:00.0"}


def test_record_without_a_gpu_says_none():
    rec = witness.record("7f-8f r--p 0 fd:01 5 /usr/lib/libc.so.6\n", "")
    assert rec == {"libcuda": "none", "inode": "0", "libcuda_version": "none", "driver": "none", "gpu": "none"}


def test_verdicts():
    rec, = witness.parse(LINE)
    assert witness.verdict(rec, {987654}) == ("the host driver's libcuda (same inode), matches the kernel module, "
                                              "GPU 0000:3b:00.0")
    stale = dict(rec, inode="55", libcuda="/usr/lib/x86_64-linux-gnu/libcuda.so.470.82.01", libcuda_version="470.82.01",
                 gpu="none(cuInit=803)")
    assert witness.verdict(stale, {987654}) == ("another libcuda than the host's (/usr/lib/x86_64-linux-gnu/"
                                                "libcuda.so.470.82.01, inode 55), libcuda 470.82.01 vs kernel module "
                                                "550.54.15, no GPU")
    assert witness.verdict({"libcuda": "none", "gpu": "none"}, {1}) == "no libcuda loaded"
