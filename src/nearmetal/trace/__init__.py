"""`nearmetal trace`: what an unmodified MPI application asks of each I/O layer.

nm-trace.so (csrc/, built by trace.build) is preloaded into the ranks and records the calls
of the layers of csrc/nm-layers.def, highest first: netCDF, PnetCDF, HDF5 (off by default),
MPI-IO and POSIX, each with the call of a higher layer it ran inside. trace.reader reads the
files back; docs/trace-format.md describes them.
"""

import os
from typing import NamedTuple

from ..ctables import read

CSRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "csrc")


class Layer(NamedTuple):
    name: str  # --layers, NM_TRACE_LAYERS, csrc/layer-NAME.c
    default: bool  # traced when the layers are not given
    colour: str  # in the trace report


def layers(csrc=CSRC):
    """The layers of the tracer's table (csrc/nm-layers.def), highest first."""
    return tuple(Layer(name, bool(on), colour)
                 for _id, name, on, colour in read(os.path.join(csrc, "nm-layers.def"), "NM_LAYER"))


LAYERS = ALL_LAYERS = tuple(layer.name for layer in layers())  # highest first
DEFAULT_LAYERS = tuple(layer.name for layer in layers() if layer.default)  # HDF5 off, as the study did
COLOURS = {layer.name: layer.colour for layer in layers()}
