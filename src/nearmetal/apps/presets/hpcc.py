"""HPC Challenge (hpcc): the figures of its summary section in hpccoutf.txt (hpcc reads
hpccinf.txt from its working directory: stage it with `inputs`). HPL, StarSTREAM triad,
PTRANS, MPI RandomAccess, and the ping-pong and random-ring latency and bandwidth."""

from ..fom import Fom
from . import PRESETS, Preset

_NUM = r"([0-9.]+(?:[eE][+-]?[0-9]+)?)"
_OUT = "hpccoutf.txt"


def _summary(name, key, unit):
    return Fom(name=name, regex=rf"^{key}={_NUM}", unit=unit, file=_OUT)


@PRESETS.register
class Hpcc(Preset):
    title = "HPC Challenge"
    command = ("hpcc",)
    foms = (
        _summary("hpl", "HPL_Tflops", "TFLOP/s"),
        _summary("star_stream_triad", "StarSTREAM_Triad", "GB/s"),
        _summary("ptrans", "PTRANS_GBs", "GB/s"),
        _summary("mpi_random_access", "MPIRandomAccess_GUPs", "GUP/s"),
        _summary("pingpong_latency", "AvgPingPongLatency_usec", "us"),
        _summary("pingpong_bandwidth", "AvgPingPongBandwidth_GBytes", "GB/s"),
        _summary("ring_latency", "RandomlyOrderedRingLatency_usec", "us"),
        _summary("ring_bandwidth", "RandomlyOrderedRingBandwidth_GBytes", "GB/s"),
    )
    success = r"^Success=1$"  # the summary says whether every test verified its results
    version = r"HPC Challenge Benchmark version (\S+)"

    def success_in(self):
        return _OUT
