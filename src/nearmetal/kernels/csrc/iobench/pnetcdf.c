/* nm-iobench backend: PnetCDF (CDF-5 files, as FMS's parallel netCDF path writes them).
 * Layout: dims time (unlimited), z, y, x; one variable per type over (time, z, y, x). */
#include "iobench.h"

#ifdef NM_HAVE_PNETCDF
#include <pnetcdf.h>
#include <stdio.h>
#include <stdlib.h>

struct nm_io_file {
    int ncid;
    int independent;                 /* 1 while in independent data mode (reads with collective=0) */
    int nvars;
    int varid[NM_IO_MAXVARS];
    int is_double[NM_IO_MAXVARS];
};

static int pnc_check(int status, const char *call)
{
    if (status == NC_NOERR)
        return 0;
    fprintf(stderr, "nm-iobench: pnetcdf: %s failed: %s\n", call, ncmpi_strerror(status));
    return 1;
}

static int pnc_create(MPI_Comm comm, const char *path, const nm_io_layout *lay, MPI_Info info,
                      nm_io_file **out)
{
    static const char *dim_names[4] = {"time", "z", "y", "x"};
    MPI_Offset dim_len[4] = {NC_UNLIMITED, lay->nz, lay->ny, lay->nx};
    nm_io_file *f = calloc(1, sizeof *f);
    int dimid[4], old_fill;
    if (!f) {
        fprintf(stderr, "nm-iobench: pnetcdf: out of memory\n");
        return 1;
    }
    f->nvars = lay->nvars;
    if (pnc_check(ncmpi_create(comm, path, NC_CLOBBER | NC_64BIT_DATA, info, &f->ncid), "ncmpi_create"))
        goto fail;
    /* Every value is written, so pre-filling would only double the write volume. */
    if (pnc_check(ncmpi_set_fill(f->ncid, NC_NOFILL, &old_fill), "ncmpi_set_fill"))
        goto fail_close;
    for (int d = 0; d < 4; d++)
        if (pnc_check(ncmpi_def_dim(f->ncid, dim_names[d], dim_len[d], &dimid[d]), "ncmpi_def_dim"))
            goto fail_close;
    for (int v = 0; v < lay->nvars; v++) {
        f->is_double[v] = lay->is_double[v];
        if (pnc_check(ncmpi_def_var(f->ncid, lay->names[v], lay->is_double[v] ? NC_DOUBLE : NC_FLOAT,
                                    4, dimid, &f->varid[v]), "ncmpi_def_var"))
            goto fail_close;
    }
    if (pnc_check(ncmpi_enddef(f->ncid), "ncmpi_enddef"))
        goto fail_close;
    *out = f;
    return 0;
fail_close:
    ncmpi_close(f->ncid);
fail:
    free(f);
    return 1;
}

/* start/count in file order (time, z, y, x). An empty selection keeps start at the origin:
 * PnetCDF validates start even when nothing is transferred. */
static void pnc_box(int t, const int start[3], const int count[3], MPI_Offset s[4], MPI_Offset c[4])
{
    int empty = count[0] == 0 || count[1] == 0 || count[2] == 0;
    s[0] = t;
    c[0] = empty ? 0 : 1;
    for (int d = 0; d < 3; d++) {
        s[d + 1] = empty ? 0 : start[d];
        c[d + 1] = empty ? 0 : count[d];
    }
}

static int pnc_write(nm_io_file *f, int var, int t, const int start[3], const int count[3],
                     const void *buf)
{
    MPI_Offset s[4], c[4];
    pnc_box(t, start, count, s, c);
    if (f->is_double[var])
        return pnc_check(ncmpi_put_vara_double_all(f->ncid, f->varid[var], s, c, buf),
                         "ncmpi_put_vara_double_all");
    return pnc_check(ncmpi_put_vara_float_all(f->ncid, f->varid[var], s, c, buf),
                     "ncmpi_put_vara_float_all");
}

static int pnc_close(nm_io_file *f)
{
    int rc = 0;
    if (f->independent)
        rc |= pnc_check(ncmpi_end_indep_data(f->ncid), "ncmpi_end_indep_data");
    rc |= pnc_check(ncmpi_close(f->ncid), "ncmpi_close");
    free(f);
    return rc;
}

static int pnc_open_read(MPI_Comm comm, const char *path, const nm_io_layout *lay, MPI_Info info,
                         int collective, nm_io_file **out)
{
    nm_io_file *f = calloc(1, sizeof *f);
    if (!f) {
        fprintf(stderr, "nm-iobench: pnetcdf: out of memory\n");
        return 1;
    }
    f->nvars = lay->nvars;
    if (pnc_check(ncmpi_open(comm, path, NC_NOWRITE, info, &f->ncid), "ncmpi_open")) {
        free(f);
        return 1;
    }
    for (int v = 0; v < lay->nvars; v++) {
        f->is_double[v] = lay->is_double[v];
        if (pnc_check(ncmpi_inq_varid(f->ncid, lay->names[v], &f->varid[v]), "ncmpi_inq_varid"))
            goto fail;
    }
    if (!collective) {
        if (pnc_check(ncmpi_begin_indep_data(f->ncid), "ncmpi_begin_indep_data"))
            goto fail;
        f->independent = 1;
    }
    *out = f;
    return 0;
fail:
    ncmpi_close(f->ncid);
    free(f);
    return 1;
}

static int pnc_read(nm_io_file *f, int var, int t, const int start[3], const int count[3], void *buf)
{
    MPI_Offset s[4], c[4];
    pnc_box(t, start, count, s, c);
    if (f->independent) {
        if (c[0] == 0)
            return 0; /* independent: nothing to fetch, nobody to wait for */
        if (f->is_double[var])
            return pnc_check(ncmpi_get_vara_double(f->ncid, f->varid[var], s, c, buf), "ncmpi_get_vara_double");
        return pnc_check(ncmpi_get_vara_float(f->ncid, f->varid[var], s, c, buf), "ncmpi_get_vara_float");
    }
    if (f->is_double[var])
        return pnc_check(ncmpi_get_vara_double_all(f->ncid, f->varid[var], s, c, buf),
                         "ncmpi_get_vara_double_all");
    return pnc_check(ncmpi_get_vara_float_all(f->ncid, f->varid[var], s, c, buf),
                     "ncmpi_get_vara_float_all");
}

const nm_io_backend nm_io_pnetcdf = {
    .name = "pnetcdf",
    .ext = ".nc",
    .unavailable = NULL,
    .shared_capable = 1,
    .create = pnc_create,
    .write = pnc_write,
    .close = pnc_close,
    .open_read = pnc_open_read,
    .read = pnc_read,
};

#else /* !NM_HAVE_PNETCDF */

#ifndef NM_MPI_LABEL
#define NM_MPI_LABEL "this MPI"
#endif
#ifdef NM_PNETCDF_OTHER_MPI
#define NM_PNETCDF_WHY "PnetCDF is not installed for " NM_MPI_LABEL " here: the installed libpnetcdf " \
    "is built for another MPI (Debian packages PnetCDF only for Open MPI)"
#else
#define NM_PNETCDF_WHY "PnetCDF is not installed for " NM_MPI_LABEL " here (no pkg-config package " \
    "'pnetcdf' at build time; Debian packages PnetCDF only for Open MPI: libpnetcdf-dev)"
#endif

const nm_io_backend nm_io_pnetcdf = {
    .name = "pnetcdf",
    .ext = ".nc",
    .unavailable = NM_PNETCDF_WHY,
    .shared_capable = 1,
};

#endif
