/* posix: pwrite/pread of contiguous x-rows straight into a raw file with the netCDF-3 record
 * layout (no header): record t holds every variable in order, each [z][y][x] row-major.
 * One process per file descriptor; MPI hints mean nothing here, and two writers cannot
 * coordinate, so this backend cannot write a shared file. */
#define _GNU_SOURCE
#include "iobench.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

struct nm_io_file {
    int fd;
    char path[4096];
    nm_io_layout lay;
    off_t var_offset[NM_IO_MAXVARS]; /* within a record */
    off_t record_bytes;
};

static size_t elem_size(const nm_io_layout *lay, int var) { return lay->is_double[var] ? 8 : 4; }

static int fail(const char *what, const char *path, int err)
{
    fprintf(stderr, "nm-iobench: posix: %s %s: %s\n", what, path, strerror(err));
    return 1;
}

static int open_file(const char *path, const nm_io_layout *lay, int flags, nm_io_file **out)
{
    nm_io_file *f = calloc(1, sizeof *f);
    if (!f) return fail("out of memory opening", path, ENOMEM);
    f->lay = *lay;
    snprintf(f->path, sizeof f->path, "%s", path);
    off_t plane = (off_t)lay->nz * lay->ny * lay->nx, off = 0;
    for (int v = 0; v < lay->nvars; v++) {
        f->var_offset[v] = off;
        off += plane * (off_t)elem_size(lay, v);
    }
    f->record_bytes = off;
    f->fd = open(path, flags, 0644);
    if (f->fd < 0) {
        int err = errno;
        free(f);
        return fail(flags & O_CREAT ? "cannot create" : "cannot open", path, err);
    }
    *out = f;
    return 0;
}

static int posix_create(MPI_Comm comm, const char *path, const nm_io_layout *lay, MPI_Info info, nm_io_file **out)
{
    (void)comm; (void)info;
    return open_file(path, lay, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, out);
}

static int posix_open_read(MPI_Comm comm, const char *path, const nm_io_layout *lay, MPI_Info info, int collective,
                           nm_io_file **out)
{
    (void)comm; (void)info; (void)collective;
    return open_file(path, lay, O_RDONLY | O_CLOEXEC, out);
}

/* pwrite/pread until done: both may transfer less than asked. */
static int transfer(nm_io_file *f, int writing, char *buf, size_t len, off_t off)
{
    while (len > 0) {
        ssize_t n = writing ? pwrite(f->fd, buf, len, off) : pread(f->fd, buf, len, off);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return fail(writing ? "pwrite to" : "pread from", f->path, errno);
        if (n == 0) {
            fprintf(stderr, "nm-iobench: posix: pread from %s: end of file at offset %lld\n", f->path, (long long)off);
            return 1;
        }
        buf += n; len -= (size_t)n; off += n;
    }
    return 0;
}

/* Each x-row of the block is contiguous in the file; rows that follow each other in the
 * file (full-width rows, full planes) go in one call. */
static int rows(nm_io_file *f, int writing, int var, int t, const int start[3], const int count[3], char *buf)
{
    const nm_io_layout *l = &f->lay;
    if (count[0] == 0 || count[1] == 0 || count[2] == 0) return 0;
    size_t es = elem_size(l, var);
    off_t base = (off_t)t * f->record_bytes + f->var_offset[var];
    int full_x = count[2] == l->nx, full_y = full_x && count[1] == l->ny;
    int runs_y = full_x ? 1 : count[1], runs_z = full_y ? 1 : count[0];
    size_t run = (size_t)count[2] * es * (full_x ? (size_t)count[1] : 1) * (full_y ? (size_t)count[0] : 1);
    for (int z = 0; z < runs_z; z++)
        for (int y = 0; y < runs_y; y++) {
            off_t elem = ((off_t)(start[0] + z) * l->ny + (start[1] + y)) * l->nx + start[2];
            if (transfer(f, writing, buf, run, base + elem * (off_t)es)) return 1;
            buf += run;
        }
    return 0;
}

static int posix_write(nm_io_file *f, int var, int t, const int start[3], const int count[3], const void *buf)
{
    return rows(f, 1, var, t, start, count, (char *)buf);
}

static int posix_read(nm_io_file *f, int var, int t, const int start[3], const int count[3], void *buf)
{
    return rows(f, 0, var, t, start, count, buf);
}

static int posix_close(nm_io_file *f)
{
    int rc = close(f->fd) != 0 ? fail("close of", f->path, errno) : 0;
    free(f);
    return rc;
}

const nm_io_backend nm_io_posix = {
    .name = "posix", .ext = ".bin", .unavailable = NULL, .shared_capable = 0,
    .create = posix_create, .write = posix_write, .close = posix_close,
    .open_read = posix_open_read, .read = posix_read,
};
