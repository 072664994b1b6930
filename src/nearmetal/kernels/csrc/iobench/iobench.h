/* nm-iobench's I/O layers: one backend per library (backends.def: posix, mpiio, pnetcdf,
 * netcdf4, hdf5) behind one vtable, like Darshan's one module per I/O layer. The core (nm-iobench.c) owns
 * decomposition, gathers, timers and verification; a backend only creates, writes, closes,
 * opens and reads files with a fixed layout: variables (t, z, y, x), t unlimited. */
#ifndef NM_IOBENCH_H
#define NM_IOBENCH_H
#include <mpi.h>
enum { NM_IO_MAXVARS = 2 };
typedef struct nm_io_file nm_io_file;            /* backend-private state */
typedef struct {
    int nvars;                                   /* 1 or 2 */
    const char *names[NM_IO_MAXVARS];            /* "temp_r8", "temp_r4" */
    int is_double[NM_IO_MAXVARS];                /* 1: double, 0: float */
    int nx, ny, nz;                              /* extents of THIS file: the global grid (serial, shared)
                                                    or the rank's block / the I/O domain (file-per-rank, io-domains) */
    int steps;                                   /* records along the unlimited time axis */
    int chunk_cx, chunk_cy;                      /* 0,0 = library default; else FMS chunk_layout */
} nm_io_layout;
typedef struct {
    const char *name;                            /* "posix" "mpiio" "pnetcdf" "netcdf4" "hdf5" */
    const char *ext;                             /* ".bin" ".bin" ".nc" ".nc4" ".h5" */
    const char *unavailable;                     /* NULL when built in, else the reason (printed by -A) */
    int shared_capable;                          /* 0 for posix */
    int chunked;                                 /* has chunk layouts (-c): netcdf4, hdf5 */
    /* create: collective over comm (MPI_COMM_SELF for one writer); info = the hints (may be MPI_INFO_NULL) */
    int (*create)(MPI_Comm comm, const char *path, const nm_io_layout *lay, MPI_Info info, nm_io_file **out);
    /* write one record of one variable: start/count are {z, y, x} within this file; collective over
       the create comm (every member calls it the same number of times; count may be all zero) */
    int (*write)(nm_io_file *f, int var, int t, const int start[3], const int count[3], const void *buf);
    int (*close)(nm_io_file *f);
    /* open for reading: collective over comm; collective=1 → collective reads, 0 → independent */
    int (*open_read)(MPI_Comm comm, const char *path, const nm_io_layout *lay, MPI_Info info, int collective, nm_io_file **out);
    int (*read)(nm_io_file *f, int var, int t, const int start[3], const int count[3], void *buf);
} nm_io_backend;
/* returns 0 on success; on failure the backend prints "nm-iobench: LIB: what failed: library message" to stderr */
#define NM_IO_BACKEND(name, packages) extern const nm_io_backend nm_io_##name;
#include "backends.def"
#undef NM_IO_BACKEND
#endif
