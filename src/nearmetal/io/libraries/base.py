"""What an I/O library module declares (see io/libraries/__init__.py)."""


class IoLibrary:
    name = ""           # the registry sets it: the module's name (nm-iobench -L NAME)
    title = ""
    shared = True       # can write one file from many ranks
    mpiio = True        # writes through MPI-IO: hints and the MPI-IO component apply
    chunked = False     # has chunk layouts (CXxCY)
    fms_pnetcdf = False  # FMS's &mpp_io_nml pnetcdf = .true. selects it
    fms_note = None     # when FMS has no backend for it: what to use instead
