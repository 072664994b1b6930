"""PnetCDF (CDF-5, contiguous variables)."""

from . import LIBRARIES
from .base import IoLibrary


@LIBRARIES.register
class Pnetcdf(IoLibrary):
    title = "PnetCDF"
    fms_pnetcdf = True
