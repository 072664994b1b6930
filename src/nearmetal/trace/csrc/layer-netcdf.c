/* nm-trace netCDF layer (netCDF-C, serial and parallel): file calls and every typed
 * nc_put_/nc_get_ var1/vara/vars/varm/var, plus the untyped ones.
 *
 * The file comes from the ncid (mapped at create/open), the variable name from the real
 * nc_inq_varname, asked under the tracer's guard. netCDF calls have no byte offset; the size
 * is the bytes of the caller's memory: elements (product of count over the variable's
 * dimensions) times the memory type's size. Whole-variable (_var) and untyped calls have no
 * size (-1): that would need the variable's shape or type, more real calls per call.
 */
#include <stddef.h>

#define NC_PREFIX "nc_"
#define NC_LAYER NM_NETCDF
typedef size_t nc_count_t;
#include "nc-common.h"

/* X(kind, type, C type) for the typed data calls */
#define NC_TYPED(X, kind)                                                                         \
    X(kind, text, char) X(kind, schar, signed char) X(kind, uchar, unsigned char) X(kind, short, short) \
    X(kind, ushort, unsigned short) X(kind, int, int) X(kind, uint, unsigned int) X(kind, long, long) \
    X(kind, float, float) X(kind, double, double) X(kind, longlong, long long)                    \
    X(kind, ulonglong, unsigned long long)
#define NC_DATA(X)                                                                                \
    NC_TYPED(X, put_var1) NC_TYPED(X, put_vara) NC_TYPED(X, put_vars) NC_TYPED(X, put_varm)        \
    NC_TYPED(X, put_var) NC_TYPED(X, get_var1) NC_TYPED(X, get_vara) NC_TYPED(X, get_vars)         \
    NC_TYPED(X, get_varm) NC_TYPED(X, get_var)
#define NC_UNTYPED(X) \
    X(put_var1) X(put_vara) X(put_vars) X(put_varm) X(put_var) X(get_var1) X(get_vara) X(get_vars) X(get_varm) X(get_var)
#define NC_FILE_CALLS(X)                                                                          \
    X(create) X(open) X(_create) X(_open) X(create_par) X(open_par) X(create_par_fortran)           \
    X(open_par_fortran) X(close) X(enddef) X(redef) X(sync) X(def_var)

#define ENUM_TYPED(kind, type, ctype) N_##kind##_##type,
#define ENUM_NAME(name) N_##name,
#define NAME_TYPED(kind, type, ctype) "nc_" #kind "_" #type,
#define NAME_NAME(name) "nc_" #name,
enum { NC_FILE_CALLS(ENUM_NAME) NC_UNTYPED(ENUM_NAME) NC_DATA(ENUM_TYPED) N_COUNT };
const char *const nm_names_netcdf[] = {NC_FILE_CALLS(NAME_NAME) NC_UNTYPED(NAME_NAME) NC_DATA(NAME_TYPED)};
const int nm_count_netcdf = N_COUNT;

/* A netCDF-4 group's ncid is its file's ncid with the group in the low 16 bits. */
static uint32_t file_of(int ncid)
{
    uint32_t file = nm_map_get(&files, ncid);
    return file ? file : nm_map_get(&files, ncid & ~0xffff);
}

/* One wrapper per (kind, memory type); `idx` is the function's index in the name table. */
#define W_var1(fn, idx_v, esize)                                                                  \
    int fn(int ncid, int varid, const size_t *index, void *op)                                    \
    {                                                                                             \
        enum { idx = idx_v };                                                                     \
        DATA_BODY(fn, int (*)(int, int, const size_t *, void *), (ncid, varid, index, op), ncid, varid, 1, esize) \
    }
#define W_vara(fn, idx_v, esize)                                                                  \
    int fn(int ncid, int varid, const size_t *start, const size_t *count, void *op)               \
    {                                                                                             \
        enum { idx = idx_v };                                                                     \
        DATA_BODY(fn, int (*)(int, int, const size_t *, const size_t *, void *),                   \
                  (ncid, varid, start, count, op), ncid, varid, elements(ncid, varid, count), esize) \
    }
#define W_vars(fn, idx_v, esize)                                                                  \
    int fn(int ncid, int varid, const size_t *start, const size_t *count, const ptrdiff_t *stride, void *op) \
    {                                                                                             \
        enum { idx = idx_v };                                                                     \
        DATA_BODY(fn, int (*)(int, int, const size_t *, const size_t *, const ptrdiff_t *, void *), \
                  (ncid, varid, start, count, stride, op), ncid, varid, elements(ncid, varid, count), esize) \
    }
#define W_varm(fn, idx_v, esize)                                                                  \
    int fn(int ncid, int varid, const size_t *start, const size_t *count, const ptrdiff_t *stride, \
           const ptrdiff_t *imap, void *op)                                                       \
    {                                                                                             \
        enum { idx = idx_v };                                                                     \
        DATA_BODY(fn, int (*)(int, int, const size_t *, const size_t *, const ptrdiff_t *,         \
                              const ptrdiff_t *, void *),                                         \
                  (ncid, varid, start, count, stride, imap, op), ncid, varid,                     \
                  elements(ncid, varid, count), esize)                                            \
    }
#define W_var(fn, idx_v, esize)                                                                   \
    int fn(int ncid, int varid, void *op)                                                         \
    {                                                                                             \
        enum { idx = idx_v };                                                                     \
        DATA_BODY(fn, int (*)(int, int, void *), (ncid, varid, op), ncid, varid, -1, 0)           \
    }
#define W_put_var1 W_var1
#define W_put_vara W_vara
#define W_put_vars W_vars
#define W_put_varm W_varm
#define W_put_var W_var
#define W_get_var1 W_var1
#define W_get_vara W_vara
#define W_get_vars W_vars
#define W_get_varm W_varm
#define W_get_var W_var

#define DEF_TYPED(kind, type, ctype) W_##kind(nc_##kind##_##type, N_##kind##_##type, sizeof(ctype))
#define DEF_UNTYPED(kind) W_##kind(nc_##kind, N_##kind, 0)
NC_DATA(DEF_TYPED)
NC_UNTYPED(DEF_UNTYPED)

/* ------------------------------------------------------------------ file calls */

#define FILE_BODY(fn, ptr_type, args, path, ncidp)                                   \
    static __typeof__(ptr_type) real;                                                           \
    NM_REAL(real, "nc_" #fn, NC_ERR);                                                \
    nm_call c;                                                                       \
    if (!nm_begin(&c, NM_NETCDF, N_##fn)) return real args;                         \
    int rc = real args;                                                              \
    nm_stop(&c);                                                                     \
    uint32_t file = 0;                                                               \
    if (rc == 0) {                                                                   \
        file = nm_intern_path(path);                                                 \
        nm_map_put(&files, *(ncidp), file);                                          \
    }                                                                                \
    nm_end(&c, file, 0, -1, -1, rc, rc != 0);                                        \
    return rc;

int nc_create(const char *path, int cmode, int *ncidp)
{
    FILE_BODY(create, int (*)(const char *, int, int *), (path, cmode, ncidp), path, ncidp)
}
int nc_open(const char *path, int mode, int *ncidp)
{
    FILE_BODY(open, int (*)(const char *, int, int *), (path, mode, ncidp), path, ncidp)
}
/* nc__create/nc__open: what netCDF-Fortran's nf__create/nf__open call */
int nc__create(const char *path, int cmode, size_t initialsz, size_t *chunksizehintp, int *ncidp)
{
    FILE_BODY(_create, int (*)(const char *, int, size_t, size_t *, int *),
              (path, cmode, initialsz, chunksizehintp, ncidp), path, ncidp)
}
int nc__open(const char *path, int mode, size_t *chunksizehintp, int *ncidp)
{
    FILE_BODY(_open, int (*)(const char *, int, size_t *, int *), (path, mode, chunksizehintp, ncidp), path, ncidp)
}
int nc_create_par(const char *path, int cmode, nm_handle comm, nm_handle info, int *ncidp)
{
    FILE_BODY(create_par, int (*)(const char *, int, nm_handle, nm_handle, int *), (path, cmode, comm, info, ncidp),
              path, ncidp)
}
int nc_open_par(const char *path, int mode, nm_handle comm, nm_handle info, int *ncidp)
{
    FILE_BODY(open_par, int (*)(const char *, int, nm_handle, nm_handle, int *), (path, mode, comm, info, ncidp),
              path, ncidp)
}

/* Calls on an open file; close forgets the ncid (netCDF reuses them). */
NCID_CALL(nc_close, N_close, 1)
NCID_CALL(nc_enddef, N_enddef, 0)
NCID_CALL(nc_redef, N_redef, 0)
NCID_CALL(nc_sync, N_sync, 0)

DEF_VAR_CALL(nc_def_var, N_def_var)

/* netCDF-Fortran's parallel create/open: Fortran MPI handles (MPI_Fint) */
int nc_create_par_fortran(const char *path, int cmode, int comm, int info, int *ncidp)
{
    FILE_BODY(create_par_fortran, int (*)(const char *, int, int, int, int *), (path, cmode, comm, info, ncidp), path,
              ncidp)
}
int nc_open_par_fortran(const char *path, int mode, int comm, int info, int *ncidp)
{
    FILE_BODY(open_par_fortran, int (*)(const char *, int, int, int, int *), (path, mode, comm, info, ncidp), path,
              ncidp)
}
