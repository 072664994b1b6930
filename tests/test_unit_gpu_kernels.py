"""The GPU kernels' output read back (kernels/parsers/gpu.py), on output written in the
kernels' print format (kernels/gpu/nm-gpu-*.c)."""

import pytest

from nearmetal.kernels.parsers.gpu import gpu_info, parse

pytestmark = pytest.mark.unit

HEAD = "# gpu=0000:18:00.0 name=NVIDIA_H100_80GB_HBM3 cuda=12.4 visible=0\n"
STREAM = HEAD + """# n=67108864 ntimes=20 bytes_per_array=536870912
Copy:   0  3012.4  0.000360  0.000356  0.000371
Scale:  0  3005.0  0.000361  0.000357  0.000369
Add:    0  3101.7  0.000523  0.000519  0.000530
Triad:  0  3099.2  0.000524  0.000520  0.000533
"""
COPY = HEAD + """# direction kind bytes best_GB/s avg_GB/s iters=10
HtoD pinned 65536 8.12 7.90
DtoH pinned 65536 8.90 8.51
HtoD pageable 65536 3.10 2.95
DtoH pageable 65536 2.80 2.70
HtoD pinned 131072
"""
OSU = HEAD.replace("visible=0", "visible=1") + """# path=staged (the MPI is not CUDA-aware)
# lat BYTES us, bw BYTES MB/s
lat 1 9.85
lat 2 9.90
bw 1 0.41
bw 4194304 9850.33
"""


def test_gpu_line():
    assert gpu_info(STREAM) == {"gpu": "0000:18:00.0", "gpu_name": "NVIDIA H100 80GB HBM3", "cuda": "12.4",
                                "visible": "0"}
    assert gpu_info("nm-gpu-stream: no GPU: cannot load libcuda.so.1") == {}


def test_stream():
    recs = parse(STREAM, "gpu-stream", {"mode": "native"})
    assert [(r["metric"], r["value"], r["unit"]) for r in recs] == [
        ("copy", 3012.4, "GB/s"), ("scale", 3005.0, "GB/s"), ("add", 3101.7, "GB/s"), ("triad", 3099.2, "GB/s")]
    assert recs[3]["params"] == {"mode": "native", "gpu": "0000:18:00.0", "gpu_name": "NVIDIA H100 80GB HBM3",
                                 "cuda": "12.4", "visible": "0", "rank": 0}


def test_copy_keeps_complete_rows_only():
    recs = parse(COPY, "gpu-copy", {})
    assert [(r["metric"], r["params"]["kind"], r["params"]["size"], r["value"]) for r in recs] == [
        ("htod", "pinned", 65536, 8.12), ("dtoh", "pinned", 65536, 8.9), ("htod", "pageable", 65536, 3.1),
        ("dtoh", "pageable", 65536, 2.8)]
    assert recs[0]["params"]["avg_gbps"] == 7.9


def test_osu_says_the_path():
    recs = parse(OSU, "gpu-osu", {})
    assert [(r["metric"], r["params"]["size"], r["value"], r["unit"]) for r in recs] == [
        ("latency", 1, 9.85, "us"), ("latency", 2, 9.9, "us"), ("bandwidth", 1, 0.41, "MB/s"),
        ("bandwidth", 4194304, 9850.33, "MB/s")]
    assert {r["params"]["path"] for r in recs} == {"staged"}


def test_no_gpu_output_gives_no_records():
    assert parse("nm-gpu-stream: no GPU: cuInit: no CUDA-capable device is detected (CUDA error 100)\n",
                 "gpu-stream", {}) == []
