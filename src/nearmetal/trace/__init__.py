"""`nearmetal trace`: what an unmodified MPI application asks of each I/O layer.

nm-trace.so (csrc/, built by trace.build) is preloaded into the ranks and records the calls
of five layers, highest first: netCDF, PnetCDF, HDF5 (off by default), MPI-IO and POSIX,
each with the call of a higher layer it ran inside. trace.reader reads the files back;
docs/trace-format.md describes them.
"""

LAYERS = ALL_LAYERS = ("netcdf", "pnetcdf", "hdf5", "mpiio", "posix")  # highest first
DEFAULT_LAYERS = ("netcdf", "pnetcdf", "mpiio", "posix")  # HDF5 off, as the study did for intermediate layers
