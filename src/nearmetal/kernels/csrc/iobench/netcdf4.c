/* nm-iobench backend: parallel netCDF-4 (HDF5 files through netCDF-C's MPI-IO path), as FMS
 * writes with NF90_NETCDF4 + NF90_MPIIO. Layout as the PnetCDF backend: dims time (unlimited),
 * z, y, x; one variable per type over (time, z, y, x). Only netCDF headers here: HDF5 is used
 * through netCDF and never included directly. */
#include "iobench.h"

#ifdef NM_HAVE_NETCDF4
#include <netcdf.h>
#include <netcdf_par.h>
#include <stdio.h>
#include <stdlib.h>

/* Deprecated in netCDF-C 4.6.2+ (parallel I/O is chosen by nc_create_par itself); still
 * passed where defined so older libraries also take the MPI-IO path. */
#ifdef NC_MPIIO
#define NM_NC4_PAR_MODE NC_MPIIO
#else
#define NM_NC4_PAR_MODE 0
#endif

struct nm_io_file {
    int ncid;
    int collective;
    int nvars;
    int varid[NM_IO_MAXVARS];
    int is_double[NM_IO_MAXVARS];
};

static int nc4_check(int status, const char *call)
{
    if (status == NC_NOERR)
        return 0;
    fprintf(stderr, "nm-iobench: netcdf4: %s failed: %s\n", call, nc_strerror(status));
    return 1;
}

static size_t ceil_div(size_t n, size_t parts)
{
    return (n + parts - 1) / parts;
}

static int nc4_create(MPI_Comm comm, const char *path, const nm_io_layout *lay, MPI_Info info,
                      nm_io_file **out)
{
    static const char *dim_names[4] = {"time", "z", "y", "x"};
    size_t dim_len[4] = {NC_UNLIMITED, (size_t)lay->nz, (size_t)lay->ny, (size_t)lay->nx};
    nm_io_file *f = calloc(1, sizeof *f);
    int dimid[4], old_fill;
    if (!f) {
        fprintf(stderr, "nm-iobench: netcdf4: out of memory\n");
        return 1;
    }
    f->nvars = lay->nvars;
    f->collective = 1;
    if (nc4_check(nc_create_par(path, NC_NETCDF4 | NC_CLOBBER | NM_NC4_PAR_MODE, comm, info, &f->ncid),
                  "nc_create_par"))
        goto fail;
    /* Every value is written, so pre-filling would only double the write volume. */
    if (nc4_check(nc_set_fill(f->ncid, NC_NOFILL, &old_fill), "nc_set_fill"))
        goto fail_close;
    for (int d = 0; d < 4; d++)
        if (nc4_check(nc_def_dim(f->ncid, dim_names[d], dim_len[d], &dimid[d]), "nc_def_dim"))
            goto fail_close;
    for (int v = 0; v < lay->nvars; v++) {
        f->is_double[v] = lay->is_double[v];
        if (nc4_check(nc_def_var(f->ncid, lay->names[v], lay->is_double[v] ? NC_DOUBLE : NC_FLOAT,
                                 4, dimid, &f->varid[v]), "nc_def_var"))
            goto fail_close;
        /* FMS chunk_layout: x split into cx and y into cy segments, whole z column, one record.
         * 0x0 keeps netCDF's own default chunk sizes. */
        if (lay->chunk_cx > 0 && lay->chunk_cy > 0) {
            size_t chunk[4] = {1, (size_t)lay->nz, ceil_div((size_t)lay->ny, (size_t)lay->chunk_cy),
                               ceil_div((size_t)lay->nx, (size_t)lay->chunk_cx)};
            if (nc4_check(nc_def_var_chunking(f->ncid, f->varid[v], NC_CHUNKED, chunk), "nc_def_var_chunking"))
                goto fail_close;
        }
        if (nc4_check(nc_var_par_access(f->ncid, f->varid[v], NC_COLLECTIVE), "nc_var_par_access"))
            goto fail_close;
    }
    if (nc4_check(nc_enddef(f->ncid), "nc_enddef"))
        goto fail_close;
    *out = f;
    return 0;
fail_close:
    nc_close(f->ncid);
fail:
    free(f);
    return 1;
}

/* start/count in file order (time, z, y, x); an empty selection is placed at the origin so
 * the bounds checks pass while the rank still takes part in the collective call. */
static int nc4_box(int t, const int start[3], const int count[3], size_t s[4], size_t c[4])
{
    int empty = count[0] == 0 || count[1] == 0 || count[2] == 0;
    s[0] = (size_t)t;
    c[0] = empty ? 0 : 1;
    for (int d = 0; d < 3; d++) {
        s[d + 1] = empty ? 0 : (size_t)start[d];
        c[d + 1] = empty ? 0 : (size_t)count[d];
    }
    return empty;
}

static int nc4_write(nm_io_file *f, int var, int t, const int start[3], const int count[3],
                     const void *buf)
{
    size_t s[4], c[4];
    nc4_box(t, start, count, s, c);
    if (f->is_double[var])
        return nc4_check(nc_put_vara_double(f->ncid, f->varid[var], s, c, buf), "nc_put_vara_double");
    return nc4_check(nc_put_vara_float(f->ncid, f->varid[var], s, c, buf), "nc_put_vara_float");
}

static int nc4_close(nm_io_file *f)
{
    int rc = nc4_check(nc_close(f->ncid), "nc_close");
    free(f);
    return rc;
}

static int nc4_open_read(MPI_Comm comm, const char *path, const nm_io_layout *lay, MPI_Info info,
                         int collective, nm_io_file **out)
{
    nm_io_file *f = calloc(1, sizeof *f);
    if (!f) {
        fprintf(stderr, "nm-iobench: netcdf4: out of memory\n");
        return 1;
    }
    f->nvars = lay->nvars;
    f->collective = collective;
    if (nc4_check(nc_open_par(path, NC_NOWRITE | NM_NC4_PAR_MODE, comm, info, &f->ncid), "nc_open_par")) {
        free(f);
        return 1;
    }
    for (int v = 0; v < lay->nvars; v++) {
        f->is_double[v] = lay->is_double[v];
        if (nc4_check(nc_inq_varid(f->ncid, lay->names[v], &f->varid[v]), "nc_inq_varid") ||
            nc4_check(nc_var_par_access(f->ncid, f->varid[v], collective ? NC_COLLECTIVE : NC_INDEPENDENT),
                      "nc_var_par_access")) {
            nc_close(f->ncid);
            free(f);
            return 1;
        }
    }
    *out = f;
    return 0;
}

static int nc4_read(nm_io_file *f, int var, int t, const int start[3], const int count[3], void *buf)
{
    size_t s[4], c[4];
    if (nc4_box(t, start, count, s, c) && !f->collective)
        return 0; /* independent: nothing to fetch, nobody to wait for */
    if (f->is_double[var])
        return nc4_check(nc_get_vara_double(f->ncid, f->varid[var], s, c, buf), "nc_get_vara_double");
    return nc4_check(nc_get_vara_float(f->ncid, f->varid[var], s, c, buf), "nc_get_vara_float");
}

const nm_io_backend nm_io_netcdf4 = {
    .name = "netcdf4",
    .ext = ".nc4",
    .unavailable = NULL,
    .shared_capable = 1,
    .chunked = 1,
    .create = nc4_create,
    .write = nc4_write,
    .close = nc4_close,
    .open_read = nc4_open_read,
    .read = nc4_read,
};

#else /* !NM_HAVE_NETCDF4 */

#ifndef NM_MPI_LABEL
#define NM_MPI_LABEL "this MPI"
#endif
#if defined(NM_NETCDF4_OTHER_MPI)
#define NM_NETCDF4_WHY "parallel netCDF-4 is not installed for " NM_MPI_LABEL " here: the installed " \
    "libnetcdf_mpi is built for another MPI (Debian packages it only for Open MPI)"
#elif defined(NM_NETCDF4_NO_HEADERS)
#define NM_NETCDF4_WHY "parallel netCDF-4 headers (netcdf_par.h) were not found at build time " \
    "although pkg-config package 'netcdf-mpi' exists"
#else
#define NM_NETCDF4_WHY "parallel netCDF-4 is not installed for " NM_MPI_LABEL " here (no pkg-config " \
    "package 'netcdf-mpi' at build time; Debian packages it only for Open MPI: libnetcdf-mpi-dev)"
#endif

const nm_io_backend nm_io_netcdf4 = {
    .name = "netcdf4",
    .ext = ".nc4",
    .unavailable = NM_NETCDF4_WHY,
    .shared_capable = 1,
    .chunked = 1,
};

#endif
