/* What the netCDF and PnetCDF layers share (layer-netcdf.c, layer-pnetcdf.c): both name a
 * variable by (ncid, varid) through the library's own inq_varname, size a data call as the
 * product of its count over the variable's dimensions times the memory type's size, and
 * record it on the ncid's file. They differ only in the prefix of the library's functions,
 * their layer, the element type of count arrays and how an ncid maps to its file, which the
 * including file defines first:
 *   NC_PREFIX   "nc_" or "ncmpi_"
 *   NC_LAYER    NM_NETCDF or NM_PNETCDF
 *   nc_count_t  size_t (netCDF) or MPI_Offset (PnetCDF)
 * and it defines `static uint32_t file_of(int ncid)` over `files` (declared here). */
#ifndef NM_NC_COMMON_H
#define NM_NC_COMMON_H
#include "nm-trace.h"

#define NC_ERR (-33) /* NC_EBADID: the program has no such library, yet reached a wrapper */

static nm_map files; /* ncid -> file id */
static uint32_t file_of(int ncid);

static uint32_t var_of(int ncid, int varid)
{
    static int (*inq_varname)(int, int, char *);
    char name[257] = ""; /* NC_MAX_NAME + 1 */
    if (!inq_varname && !(inq_varname = (int (*)(int, int, char *))nm_real(NC_PREFIX "inq_varname"))) return 0;
    return inq_varname(ncid, varid, name) == 0 ? nm_intern(NM_STR_VAR, name) : 0;
}

static int64_t elements(int ncid, int varid, const nc_count_t *count)
{
    static int (*inq_varndims)(int, int, int *);
    int ndims = 0;
    if (!count) return -1;
    if (!inq_varndims && !(inq_varndims = (int (*)(int, int, int *))nm_real(NC_PREFIX "inq_varndims"))) return -1;
    if (inq_varndims(ncid, varid, &ndims) != 0) return -1;
    int64_t n = 1;
    for (int d = 0; d < ndims; d++) n *= (int64_t)count[d];
    return n;
}

/* After a data call: element count -> bytes (esize 0: unknown), variable, file. */
static void finish(nm_call *c, int ncid, int varid, int64_t n, size_t esize, int rc)
{
    int64_t size = n >= 0 && esize ? n * (int64_t)esize : -1;
    nm_end(c, file_of(ncid), var_of(ncid, varid), -1, size, rc, rc != 0);
}

/* The body of a data call's wrapper; `idx` is the function's index in the layer's name table. */
#define DATA_BODY(fn, ptr_type, args, ncid, varid, n, esize)     \
    static __typeof__(ptr_type) real;                            \
    NM_REAL(real, #fn, NC_ERR);                                  \
    nm_call c;                                                   \
    if (!nm_begin(&c, NC_LAYER, idx)) return real args;          \
    int rc = real args;                                          \
    nm_stop(&c);                                                 \
    finish(&c, ncid, varid, n, esize, rc);                       \
    return rc;

/* Calls on an open file alone (close, enddef, ...); `forget`: the ncid is reused after it. */
#define NCID_CALL(fn, index, forget)                                              \
    int fn(int ncid)                                                              \
    {                                                                             \
        static int (*real)(int);                                                  \
        NM_REAL(real, #fn, NC_ERR);                                               \
        return nm_id_call(real, NC_LAYER, index, ncid, &files, file_of, forget);  \
    }

/* nc_def_var / ncmpi_def_var: the variable's name is an argument. */
#define DEF_VAR_CALL(fn, index)                                                                    \
    int fn(int ncid, const char *name, int xtype, int ndims, const int *dimids, int *varidp)      \
    {                                                                                              \
        static int (*real)(int, const char *, int, int, const int *, int *);                      \
        NM_REAL(real, #fn, NC_ERR);                                                                \
        nm_call c;                                                                                 \
        if (!nm_begin(&c, NC_LAYER, index)) return real(ncid, name, xtype, ndims, dimids, varidp); \
        int rc = real(ncid, name, xtype, ndims, dimids, varidp);                                   \
        nm_stop(&c);                                                                               \
        nm_end(&c, file_of(ncid), nm_intern(NM_STR_VAR, name), -1, -1, rc, rc != 0);               \
        return rc;                                                                                 \
    }

#endif
