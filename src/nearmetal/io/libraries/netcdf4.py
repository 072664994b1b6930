"""Parallel netCDF-4 (HDF5 underneath), collective, with default or chosen chunks."""

from . import LIBRARIES
from .base import IoLibrary


@LIBRARIES.register
class Netcdf4(IoLibrary):
    title = "netCDF-4"
    chunked = True
