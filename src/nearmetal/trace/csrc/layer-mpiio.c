/* nm-trace MPI-IO layer: MPI_File_* and PMPI_File_* (Open MPI's Fortran bindings call the
 * PMPI_ names directly), both recorded under the MPI_ name and forwarded to the real PMPI_.
 *
 * Handles are opaque pointer-sized values passed on unchanged, so the same code serves Open
 * MPI (pointers) and MPICH (int handles, files as pointers). Explicit offsets (_at calls,
 * set_view's displacement, seek) are recorded as given, in etype units of the view; the size
 * is count x PMPI_Type_size(datatype), asked only after the call succeeded (a bad datatype
 * would otherwise reach MPI_COMM_WORLD's fatal error handler instead of the file's).
 */
#include "nm-trace.h"

#include <stdio.h>
#include <string.h>

#define NM_MPI_ERR 16 /* MPI_ERR_OTHER in Open MPI; any non-zero code is an error */

/* X(category, name): the category picks the prototype. */
#define MPIIO_FUNCS(X)                                                                            \
    X(OPEN, open) X(CLOSE, close) X(DELETE, delete) X(SET_VIEW, set_view) X(SIZE, set_size)       \
    X(SIZE, preallocate) X(GET_SIZE, get_size) X(FH, sync) X(SEEK, seek) X(SEEK, seek_shared) X(AT, read_at)            \
    X(AT, read_at_all) X(AT, write_at) X(AT, write_at_all) X(IAT, iread_at) X(IAT, iwrite_at)     \
    X(IAT, iread_at_all) X(IAT, iwrite_at_all) X(PLAIN, read) X(PLAIN, read_all) X(PLAIN, write)  \
    X(PLAIN, write_all) X(PLAIN, read_shared) X(PLAIN, write_shared) X(PLAIN, read_ordered)      \
    X(PLAIN, write_ordered) X(IPLAIN, iread) X(IPLAIN, iwrite) X(IPLAIN, iread_all)              \
    X(IPLAIN, iwrite_all) X(IPLAIN, iread_shared) X(IPLAIN, iwrite_shared)                       \
    X(AT_BEGIN, read_at_all_begin) X(AT_BEGIN, write_at_all_begin) X(BEGIN, read_all_begin)      \
    X(BEGIN, write_all_begin) X(BEGIN, read_ordered_begin) X(BEGIN, write_ordered_begin)         \
    X(END, read_at_all_end) X(END, write_at_all_end) X(END, read_all_end) X(END, write_all_end)  \
    X(END, read_ordered_end) X(END, write_ordered_end)

#define AS_ENUM(cat, name) M_##name,
#define AS_NAME(cat, name) "MPI_File_" #name,
enum { MPIIO_FUNCS(AS_ENUM) M_COUNT };
const char *const nm_names_mpiio[] = {MPIIO_FUNCS(AS_NAME)};
const int nm_count_mpiio = M_COUNT;

static nm_map files; /* MPI_File -> file id */

static int64_t bytes(int count, nm_handle type)
{
    static int (*type_size)(nm_handle, int *);
    int size = 0;
    if (count <= 0) return 0;
    if (!type_size && !(type_size = (int (*)(nm_handle, int *))nm_real("PMPI_Type_size"))) return -1;
    return type_size(type, &size) == 0 ? (int64_t)count * size : -1;
}

/* The hints in effect, as the MPI library reports them right after the open. */
static void record_hints(nm_handle fh, uint32_t file, uint64_t seq)
{
    static int (*get_info)(nm_handle, nm_handle *), (*nkeys)(nm_handle, int *), (*nthkey)(nm_handle, int, char *),
        (*get)(nm_handle, const char *, int, char *, int *), (*info_free)(nm_handle *);
    if (!get_info) {
        nkeys = (int (*)(nm_handle, int *))nm_real("PMPI_Info_get_nkeys");
        nthkey = (int (*)(nm_handle, int, char *))nm_real("PMPI_Info_get_nthkey");
        get = (int (*)(nm_handle, const char *, int, char *, int *))nm_real("PMPI_Info_get");
        info_free = (int (*)(nm_handle *))nm_real("PMPI_Info_free");
        get_info = (int (*)(nm_handle, nm_handle *))nm_real("PMPI_File_get_info");
    }
    nm_handle info = 0; /* zeroed: MPICH writes a 4-byte handle into it */
    int n = 0;
    if (!get_info || !nkeys || !nthkey || !get || !info_free || get_info(fh, &info) != 0) return;
    char pairs[8192], key[256], value[1025]; /* MPI_MAX_INFO_KEY/VAL: 36/256 Open MPI, 255/1024 MPICH */
    uint32_t len = 0;
    nkeys(info, &n);
    for (int k = 0; k < n; k++) {
        int flag = 0;
        if (nthkey(info, k, key) != 0 || get(info, key, 1024, value, &flag) != 0 || !flag) continue;
        key[255] = value[1024] = '\0';
        size_t kl = strlen(key) + 1, vl = strlen(value) + 1;
        if (len + kl + vl > sizeof pairs) break;
        memcpy(pairs + len, key, kl);
        memcpy(pairs + len + kl, value, vl);
        len += (uint32_t)(kl + vl);
    }
    info_free(&info);
    nm_emit_hints(file, seq, pairs, len);
}

/* Begin, call the real PMPI_ function, stop the clock, then the record. */
#define CALL(name, ptr_type, args, file_expr, offset, size)                    \
    static __typeof__(ptr_type) real;                                                      \
    NM_REAL(real, "PMPI_File_" #name, NM_MPI_ERR);                             \
    nm_call c;                                                                  \
    if (!nm_begin(&c, NM_MPIIO, M_##name)) return real args;                   \
    int rc = real args;                                                         \
    nm_stop(&c);                                                                \
    nm_end(&c, file_expr, 0, offset, rc == 0 ? (size) : -1, rc, rc != 0);     \
    return rc;

/* One body under both names: the PMPI_ one is an alias of the MPI_ one. */
#define BOTH(name, params)                                                              \
    int PMPI_File_##name params __attribute__((alias("MPI_File_" #name)));             \
    int MPI_File_##name params

#define FILE_OF(fh) nm_map_get(&files, (int64_t)(fh))

#define DEF_AT(name)                                                                                  \
    BOTH(name, (nm_handle fh, long long off, void *buf, int count, nm_handle type, void *status))    \
    {                                                                                                 \
        CALL(name, int (*)(nm_handle, long long, void *, int, nm_handle, void *),                    \
             (fh, off, buf, count, type, status), FILE_OF(fh), off, bytes(count, type))              \
    }
#define DEF_IAT(name)                                                                                 \
    BOTH(name, (nm_handle fh, long long off, void *buf, int count, nm_handle type, void *request))   \
    {                                                                                                 \
        CALL(name, int (*)(nm_handle, long long, void *, int, nm_handle, void *),                    \
             (fh, off, buf, count, type, request), FILE_OF(fh), off, bytes(count, type))             \
    }
#define DEF_PLAIN(name)                                                                               \
    BOTH(name, (nm_handle fh, void *buf, int count, nm_handle type, void *status))                   \
    {                                                                                                 \
        CALL(name, int (*)(nm_handle, void *, int, nm_handle, void *), (fh, buf, count, type, status), \
             FILE_OF(fh), -1, bytes(count, type))                                                     \
    }
#define DEF_IPLAIN(name) DEF_PLAIN(name) /* same shape: the request pointer in the status's place */
#define DEF_AT_BEGIN(name)                                                                            \
    BOTH(name, (nm_handle fh, long long off, void *buf, int count, nm_handle type))                  \
    {                                                                                                 \
        CALL(name, int (*)(nm_handle, long long, void *, int, nm_handle), (fh, off, buf, count, type), \
             FILE_OF(fh), off, bytes(count, type))                                                    \
    }
#define DEF_BEGIN(name)                                                                               \
    BOTH(name, (nm_handle fh, void *buf, int count, nm_handle type))                                 \
    {                                                                                                 \
        CALL(name, int (*)(nm_handle, void *, int, nm_handle), (fh, buf, count, type), FILE_OF(fh),  \
             -1, bytes(count, type))                                                                  \
    }
#define DEF_END(name)                                                                                 \
    BOTH(name, (nm_handle fh, void *buf, void *status))                                              \
    {                                                                                                 \
        CALL(name, int (*)(nm_handle, void *, void *), (fh, buf, status), FILE_OF(fh), -1, -1)        \
    }
#define DEF_SEEK(name)                                                                                \
    BOTH(name, (nm_handle fh, long long off, int whence))                                            \
    {                                                                                                 \
        CALL(name, int (*)(nm_handle, long long, int), (fh, off, whence), FILE_OF(fh), off, -1)       \
    }
#define DEF_SIZE(name) /* set_size, preallocate: the size in bytes */                                 \
    BOTH(name, (nm_handle fh, long long size))                                                       \
    {                                                                                                 \
        CALL(name, int (*)(nm_handle, long long), (fh, size), FILE_OF(fh), -1, size)                 \
    }
#define DEF_GET_SIZE(name) /* get_size: its lseek/fstat are its children, not the caller's */      \
    BOTH(name, (nm_handle fh, long long *size))                                                      \
    {                                                                                                 \
        CALL(name, int (*)(nm_handle, long long *), (fh, size), FILE_OF(fh), -1, -1)                 \
    }
#define DEF_FH(name) \
    BOTH(name, (nm_handle fh)) { CALL(name, int (*)(nm_handle), (fh), FILE_OF(fh), -1, -1) }
#define DEF_SET_VIEW(name)                                                                            \
    BOTH(name, (nm_handle fh, long long disp, nm_handle etype, nm_handle filetype, const char *rep,  \
                nm_handle info))                                                                      \
    {                                                                                                 \
        CALL(name, int (*)(nm_handle, long long, nm_handle, nm_handle, const char *, nm_handle),     \
             (fh, disp, etype, filetype, rep, info), FILE_OF(fh), disp, -1)                           \
    }

/* open: the path is resolved after a successful open (it exists then), the hints follow. */
#define DEF_OPEN(name)                                                                                \
    BOTH(name, (nm_handle comm, const char *path, int amode, nm_handle info, nm_handle *fh))         \
    {                                                                                                 \
        static int (*real)(nm_handle, const char *, int, nm_handle, nm_handle *);                    \
        NM_REAL(real, "PMPI_File_open", NM_MPI_ERR);                                                 \
        nm_call c;                                                                                    \
        if (!nm_begin(&c, NM_MPIIO, M_open)) return real(comm, path, amode, info, fh);              \
        int rc = real(comm, path, amode, info, fh);                                                   \
        nm_stop(&c);                                                                                  \
        uint32_t file = 0;                                                                            \
        if (rc == 0) {                                                                                \
            file = nm_intern_path(path);                                                              \
            nm_map_put(&files, (int64_t)*fh, file);                                                   \
            record_hints(*fh, file, c.seq);                                                           \
        }                                                                                             \
        nm_end(&c, file, 0, -1, -1, rc, rc != 0);                                                     \
        return rc;                                                                                    \
    }
#define DEF_CLOSE(name)                                                                               \
    BOTH(name, (nm_handle *fh))                                                                      \
    {                                                                                                 \
        static int (*real)(nm_handle *);                                                              \
        NM_REAL(real, "PMPI_File_close", NM_MPI_ERR);                                                \
        nm_handle was = fh ? *fh : 0;                                                                 \
        nm_call c;                                                                                    \
        if (!nm_begin(&c, NM_MPIIO, M_close)) {                                                       \
            int rc = real(fh);                                                                        \
            if (rc == 0) nm_map_del(&files, (int64_t)was);                                           \
            return rc;                                                                                \
        }                                                                                             \
        int rc = real(fh);                                                                            \
        nm_stop(&c);                                                                                  \
        uint32_t file = FILE_OF(was);                                                                 \
        if (rc == 0) nm_map_del(&files, (int64_t)was);                                               \
        nm_end(&c, file, 0, -1, -1, rc, rc != 0);                                                     \
        return rc;                                                                                    \
    }
/* delete: resolved before the call, while the file still exists */
#define DEF_DELETE(name)                                                                              \
    BOTH(name, (const char *path, nm_handle info))                                                   \
    {                                                                                                 \
        static int (*real)(const char *, nm_handle);                                                  \
        NM_REAL(real, "PMPI_File_delete", NM_MPI_ERR);                                               \
        nm_call c;                                                                                    \
        if (!nm_enabled[NM_MPIIO] || nm_guarded()) return real(path, info);                          \
        uint32_t file = nm_intern_path(path);                                                         \
        if (!nm_begin(&c, NM_MPIIO, M_delete)) return real(path, info);                              \
        int rc = real(path, info);                                                                    \
        nm_stop(&c);                                                                                  \
        nm_end(&c, file, 0, -1, -1, rc, rc != 0);                                                     \
        return rc;                                                                                    \
    }

#define DEFINE(cat, name) DEF_##cat(name)
MPIIO_FUNCS(DEFINE)
