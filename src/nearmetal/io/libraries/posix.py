"""Raw POSIX files (pwrite): serial, file-per-rank and io-domains patterns only."""

from . import LIBRARIES
from .base import IoLibrary


@LIBRARIES.register
class Posix(IoLibrary):
    title = "POSIX"
    shared = False
    mpiio = False
