"""Raw MPI-IO: a subarray file view and MPI_File_write_at_all."""

from . import LIBRARIES
from .base import IoLibrary


@LIBRARIES.register
class MpiIo(IoLibrary):
    title = "MPI-IO"
    fms_note = "FMS has no mpiio backend: the nearest is parallel netCDF-4 (HDF5 underneath)"
