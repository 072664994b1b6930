/* mpiio: raw MPI-IO into the same netCDF-3 record layout as posix (no header). Each
 * (variable, record) is written through a subarray file view of that record's [z][y][x]
 * array, displaced to the record's offset, with MPI_File_write_at_all: the MPI library's
 * collective buffering (ROMIO two-phase, OMPIO fcoll) decides who touches the file. */
#include "iobench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct nm_io_file {
    MPI_File fh;
    nm_io_layout lay;
    int collective;
    MPI_Offset var_offset[NM_IO_MAXVARS]; /* within a record */
    MPI_Offset record_bytes;
    /* The last view's filetype per variable: blocks do not move between records. */
    MPI_Datatype view[NM_IO_MAXVARS];
    int view_start[NM_IO_MAXVARS][3], view_count[NM_IO_MAXVARS][3];
};

static int fail(const char *what, int code)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(code, msg, &len);
    fprintf(stderr, "nm-iobench: mpiio: %s: %s\n", what, msg);
    return 1;
}

static int open_file(MPI_Comm comm, const char *path, const nm_io_layout *lay, MPI_Info info, int amode,
                     int collective, nm_io_file **out)
{
    nm_io_file *f = calloc(1, sizeof *f);
    if (!f) { fprintf(stderr, "nm-iobench: mpiio: out of memory\n"); return 1; }
    f->lay = *lay;
    f->collective = collective;
    MPI_Offset plane = (MPI_Offset)lay->nz * lay->ny * lay->nx, off = 0;
    for (int v = 0; v < lay->nvars; v++) {
        f->var_offset[v] = off;
        off += plane * (lay->is_double[v] ? 8 : 4);
        f->view[v] = MPI_DATATYPE_NULL;
    }
    f->record_bytes = off;
    /* Errors come back as codes (the default handler for files is MPI_ERRORS_RETURN). */
    int rc = MPI_File_open(comm, path, amode, info, &f->fh);
    if (rc != MPI_SUCCESS) {
        char what[4200];
        snprintf(what, sizeof what, "MPI_File_open %s", path);
        free(f);
        return fail(what, rc);
    }
    *out = f;
    return 0;
}

static int mpiio_create(MPI_Comm comm, const char *path, const nm_io_layout *lay, MPI_Info info, nm_io_file **out)
{
    /* RDWR, not WRONLY: ROMIO's two-phase and data sieving read-modify-write partial blocks. */
    return open_file(comm, path, lay, info, MPI_MODE_CREATE | MPI_MODE_RDWR, 1, out);
}

static int mpiio_open_read(MPI_Comm comm, const char *path, const nm_io_layout *lay, MPI_Info info, int collective,
                           nm_io_file **out)
{
    return open_file(comm, path, lay, info, MPI_MODE_RDONLY, collective, out);
}

/* Set the view of (var, t) for this rank's block. A zero-sized block cannot be a subarray:
 * it keeps a plain view and transfers nothing, but still takes part in the collective. */
static int set_view(nm_io_file *f, int var, int t, const int start[3], const int count[3], MPI_Datatype *etype,
                    int *n)
{
    const nm_io_layout *l = &f->lay;
    *etype = l->is_double[var] ? MPI_DOUBLE : MPI_FLOAT;
    *n = count[0] * count[1] * count[2];
    MPI_Datatype filetype = *etype;
    if (*n > 0) {
        if (f->view[var] == MPI_DATATYPE_NULL || memcmp(f->view_start[var], start, sizeof f->view_start[var])
            || memcmp(f->view_count[var], count, sizeof f->view_count[var])) {
            if (f->view[var] != MPI_DATATYPE_NULL) MPI_Type_free(&f->view[var]);
            int sizes[3] = {l->nz, l->ny, l->nx};
            MPI_Type_create_subarray(3, sizes, (int *)count, (int *)start, MPI_ORDER_C, *etype, &f->view[var]);
            MPI_Type_commit(&f->view[var]);
            memcpy(f->view_start[var], start, sizeof f->view_start[var]);
            memcpy(f->view_count[var], count, sizeof f->view_count[var]);
        }
        filetype = f->view[var];
    }
    MPI_Offset disp = (MPI_Offset)t * f->record_bytes + f->var_offset[var];
    int rc = MPI_File_set_view(f->fh, disp, *etype, filetype, "native", MPI_INFO_NULL);
    return rc == MPI_SUCCESS ? 0 : fail("MPI_File_set_view", rc);
}

static int mpiio_write(nm_io_file *f, int var, int t, const int start[3], const int count[3], const void *buf)
{
    MPI_Datatype etype;
    int n;
    if (set_view(f, var, t, start, count, &etype, &n)) return 1;
    int rc = MPI_File_write_at_all(f->fh, 0, buf, n, etype, MPI_STATUS_IGNORE);
    return rc == MPI_SUCCESS ? 0 : fail("MPI_File_write_at_all", rc);
}

static int mpiio_read(nm_io_file *f, int var, int t, const int start[3], const int count[3], void *buf)
{
    MPI_Datatype etype;
    int n;
    if (set_view(f, var, t, start, count, &etype, &n)) return 1;
    int rc = f->collective ? MPI_File_read_at_all(f->fh, 0, buf, n, etype, MPI_STATUS_IGNORE)
                           : MPI_File_read_at(f->fh, 0, buf, n, etype, MPI_STATUS_IGNORE);
    return rc == MPI_SUCCESS ? 0 : fail(f->collective ? "MPI_File_read_at_all" : "MPI_File_read_at", rc);
}

static int mpiio_close(nm_io_file *f)
{
    int rc = MPI_File_close(&f->fh);
    for (int v = 0; v < f->lay.nvars; v++)
        if (f->view[v] != MPI_DATATYPE_NULL) MPI_Type_free(&f->view[v]);
    free(f);
    return rc == MPI_SUCCESS ? 0 : fail("MPI_File_close", rc);
}

const nm_io_backend nm_io_mpiio = {
    .name = "mpiio", .ext = ".bin", .unavailable = NULL, .shared_capable = 1,
    .create = mpiio_create, .write = mpiio_write, .close = mpiio_close,
    .open_read = mpiio_open_read, .read = mpiio_read,
};
