"""Parallel HDF5, collective, contiguous by default or chunked."""

from . import LIBRARIES
from .base import IoLibrary


@LIBRARIES.register
class Hdf5(IoLibrary):
    title = "HDF5"
    chunked = True
    fms_note = "FMS has no hdf5 backend: the nearest is parallel netCDF-4 (HDF5 underneath)"
