/* nm-trace PnetCDF layer: file calls, the typed blocking data calls (independent and _all,
 * var1/vara/vars/varm/var), the flexible ones (buffer count + MPI datatype), the typed
 * nonblocking var1/vara ones (iput/iget/bput), and wait/wait_all, where nonblocking requests
 * reach MPI-IO.
 *
 * As for netCDF: the file from the ncid, the variable name from the real ncmpi_inq_varname,
 * the size as memory bytes (product of count x the memory type's size). Whole-variable and
 * flexible calls have no size (-1): the flexible one's datatype may be MPI_DATATYPE_NULL,
 * which MPI_Type_size would turn into a fatal error.
 */
typedef long long mpi_offset; /* MPI_Offset in Open MPI and MPICH */

#define NC_PREFIX "ncmpi_"
#define NC_LAYER NM_PNETCDF
typedef mpi_offset nc_count_t;
#include "nc-common.h"

#define PN_TYPED(X, kind, all)                                                                     \
    X(kind, all, text, char) X(kind, all, schar, signed char) X(kind, all, uchar, unsigned char)   \
    X(kind, all, short, short) X(kind, all, ushort, unsigned short) X(kind, all, int, int)         \
    X(kind, all, uint, unsigned int) X(kind, all, long, long) X(kind, all, float, float)           \
    X(kind, all, double, double) X(kind, all, longlong, long long)                                 \
    X(kind, all, ulonglong, unsigned long long)
#define PN_BOTH(X, kind) PN_TYPED(X, kind, ) PN_TYPED(X, kind, _all)
#define PN_DATA(X)                                                                                 \
    PN_BOTH(X, put_var1) PN_BOTH(X, put_vara) PN_BOTH(X, put_vars) PN_BOTH(X, put_varm)            \
    PN_BOTH(X, put_var) PN_BOTH(X, get_var1) PN_BOTH(X, get_vara) PN_BOTH(X, get_vars)             \
    PN_BOTH(X, get_varm) PN_BOTH(X, get_var) PN_TYPED(X, iput_var1, ) PN_TYPED(X, iput_vara, )     \
    PN_TYPED(X, iget_var1, ) PN_TYPED(X, iget_vara, ) PN_TYPED(X, bput_var1, )                    \
    PN_TYPED(X, bput_vara, )
#define PN_FLEX(X)                                                                                 \
    X(put_var1, ) X(put_var1, _all) X(put_vara, ) X(put_vara, _all) X(put_vars, ) X(put_vars, _all) \
    X(put_varm, ) X(put_varm, _all) X(put_var, ) X(put_var, _all) X(get_var1, ) X(get_var1, _all)  \
    X(get_vara, ) X(get_vara, _all) X(get_vars, ) X(get_vars, _all) X(get_varm, ) X(get_varm, _all) \
    X(get_var, ) X(get_var, _all)
#define PN_FILE_CALLS(X)                                                                           \
    X(create) X(open) X(close) X(enddef) X(redef) X(sync) X(begin_indep_data) X(end_indep_data)    \
    X(wait) X(wait_all) X(def_var)

#define ENUM_TYPED(kind, all, type, ctype) P_##kind##_##type##all,
#define ENUM_FLEX(kind, all) P_##kind##all,
#define ENUM_NAME(name) P_##name,
#define NAME_TYPED(kind, all, type, ctype) "ncmpi_" #kind "_" #type #all,
#define NAME_FLEX(kind, all) "ncmpi_" #kind #all,
#define NAME_NAME(name) "ncmpi_" #name,
enum { PN_FILE_CALLS(ENUM_NAME) PN_FLEX(ENUM_FLEX) PN_DATA(ENUM_TYPED) P_COUNT };
const char *const nm_names_pnetcdf[] = {PN_FILE_CALLS(NAME_NAME) PN_FLEX(NAME_FLEX) PN_DATA(NAME_TYPED)};
const int nm_count_pnetcdf = P_COUNT;

static uint32_t file_of(int ncid) { return nm_map_get(&files, ncid); }

/* Prototypes by kind; EXTRA/EXTRA_ARGS: what the flexible (bufcount, buftype) and the
 * nonblocking (request) forms add at the end. */
#define OFF const mpi_offset *
#define W_var1(fn, idx_v, esize, EXTRA, EXTRA_ARGS)                                               \
    int fn(int ncid, int varid, OFF start, void *buf EXTRA)                                       \
    {                                                                                             \
        enum { idx = idx_v };                                                                     \
        DATA_BODY(fn, int (*)(int, int, OFF, void *EXTRA), (ncid, varid, start, buf EXTRA_ARGS),  \
                  ncid, varid, 1, esize)                                                          \
    }
#define W_vara(fn, idx_v, esize, EXTRA, EXTRA_ARGS)                                               \
    int fn(int ncid, int varid, OFF start, OFF count, void *buf EXTRA)                            \
    {                                                                                             \
        enum { idx = idx_v };                                                                     \
        DATA_BODY(fn, int (*)(int, int, OFF, OFF, void *EXTRA), (ncid, varid, start, count, buf EXTRA_ARGS), \
                  ncid, varid, elements(ncid, varid, count), esize)                               \
    }
#define W_vars(fn, idx_v, esize, EXTRA, EXTRA_ARGS)                                               \
    int fn(int ncid, int varid, OFF start, OFF count, OFF stride, void *buf EXTRA)                \
    {                                                                                             \
        enum { idx = idx_v };                                                                     \
        DATA_BODY(fn, int (*)(int, int, OFF, OFF, OFF, void *EXTRA),                              \
                  (ncid, varid, start, count, stride, buf EXTRA_ARGS), ncid, varid,               \
                  elements(ncid, varid, count), esize)                                            \
    }
#define W_varm(fn, idx_v, esize, EXTRA, EXTRA_ARGS)                                               \
    int fn(int ncid, int varid, OFF start, OFF count, OFF stride, OFF imap, void *buf EXTRA)      \
    {                                                                                             \
        enum { idx = idx_v };                                                                     \
        DATA_BODY(fn, int (*)(int, int, OFF, OFF, OFF, OFF, void *EXTRA),                         \
                  (ncid, varid, start, count, stride, imap, buf EXTRA_ARGS), ncid, varid,         \
                  elements(ncid, varid, count), esize)                                            \
    }
#define W_var(fn, idx_v, esize, EXTRA, EXTRA_ARGS)                                                \
    int fn(int ncid, int varid, void *buf EXTRA)                                                  \
    {                                                                                             \
        enum { idx = idx_v };                                                                     \
        DATA_BODY(fn, int (*)(int, int, void *EXTRA), (ncid, varid, buf EXTRA_ARGS), ncid, varid, -1, 0) \
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
#define W_iput_var1 W_var1
#define W_iput_vara W_vara
#define W_iget_var1 W_var1
#define W_iget_vara W_vara
#define W_bput_var1 W_var1
#define W_bput_vara W_vara

#define REQUEST_PARAM , int *request
#define REQUEST_ARG , request
#define FLEX_PARAM , mpi_offset bufcount, nm_handle buftype
#define FLEX_ARG , bufcount, buftype
/* PARAM_/ARG_<kind>: nothing for blocking kinds, the request for the nonblocking ones */
#define DEF_TYPED(kind, all, type, ctype) \
    W_##kind(ncmpi_##kind##_##type##all, P_##kind##_##type##all, sizeof(ctype), PARAM_##kind, ARG_##kind)
#define PARAM_put_var1
#define PARAM_put_vara
#define PARAM_put_vars
#define PARAM_put_varm
#define PARAM_put_var
#define PARAM_get_var1
#define PARAM_get_vara
#define PARAM_get_vars
#define PARAM_get_varm
#define PARAM_get_var
#define ARG_put_var1
#define ARG_put_vara
#define ARG_put_vars
#define ARG_put_varm
#define ARG_put_var
#define ARG_get_var1
#define ARG_get_vara
#define ARG_get_vars
#define ARG_get_varm
#define ARG_get_var
#define PARAM_iput_var1 REQUEST_PARAM
#define PARAM_iput_vara REQUEST_PARAM
#define PARAM_iget_var1 REQUEST_PARAM
#define PARAM_iget_vara REQUEST_PARAM
#define PARAM_bput_var1 REQUEST_PARAM
#define PARAM_bput_vara REQUEST_PARAM
#define ARG_iput_var1 REQUEST_ARG
#define ARG_iput_vara REQUEST_ARG
#define ARG_iget_var1 REQUEST_ARG
#define ARG_iget_vara REQUEST_ARG
#define ARG_bput_var1 REQUEST_ARG
#define ARG_bput_vara REQUEST_ARG
#define DEF_FLEX(kind, all) W_##kind(ncmpi_##kind##all, P_##kind##all, 0, FLEX_PARAM, FLEX_ARG)
PN_DATA(DEF_TYPED)
PN_FLEX(DEF_FLEX)

/* ------------------------------------------------------------------ file calls */

#define OPEN_CALL(fn)                                                                        \
    int ncmpi_##fn(nm_handle comm, const char *path, int mode, nm_handle info, int *ncidp)  \
    {                                                                                        \
        static int (*real)(nm_handle, const char *, int, nm_handle, int *);                  \
        NM_REAL(real, "ncmpi_" #fn, NC_ERR);                                                 \
        nm_call c;                                                                           \
        if (!nm_begin(&c, NM_PNETCDF, P_##fn)) return real(comm, path, mode, info, ncidp);  \
        int rc = real(comm, path, mode, info, ncidp);                                        \
        nm_stop(&c);                                                                         \
        uint32_t file = 0;                                                                   \
        if (rc == 0) {                                                                       \
            file = nm_intern_path(path);                                                     \
            nm_map_put(&files, *ncidp, file);                                                \
        }                                                                                    \
        nm_end(&c, file, 0, -1, -1, rc, rc != 0);                                            \
        return rc;                                                                           \
    }
OPEN_CALL(create)
OPEN_CALL(open)

NCID_CALL(ncmpi_close, P_close, 1)
NCID_CALL(ncmpi_enddef, P_enddef, 0)
NCID_CALL(ncmpi_redef, P_redef, 0)
NCID_CALL(ncmpi_sync, P_sync, 0)
NCID_CALL(ncmpi_begin_indep_data, P_begin_indep_data, 0)
NCID_CALL(ncmpi_end_indep_data, P_end_indep_data, 0)

/* wait/wait_all: the requests' data move here; the size is the number of requests. */
#define WAIT_CALL(fn)                                                                    \
    int ncmpi_##fn(int ncid, int count, int *requests, int *statuses)                    \
    {                                                                                    \
        static int (*real)(int, int, int *, int *);                                      \
        NM_REAL(real, "ncmpi_" #fn, NC_ERR);                                             \
        nm_call c;                                                                       \
        if (!nm_begin(&c, NM_PNETCDF, P_##fn)) return real(ncid, count, requests, statuses); \
        int rc = real(ncid, count, requests, statuses);                                  \
        nm_stop(&c);                                                                     \
        nm_end(&c, file_of(ncid), 0, -1, count, rc, rc != 0);                            \
        return rc;                                                                       \
    }
WAIT_CALL(wait)
WAIT_CALL(wait_all)

DEF_VAR_CALL(ncmpi_def_var, P_def_var)
