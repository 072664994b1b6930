/* nm-trace HDF5 layer (off by default: NM_TRACE_LAYERS=...,hdf5): H5Fcreate/open/close/
 * flush and H5Dcreate2/open2/write/read/close, HDF5 1.10 or newer (hid_t is 64 bits).
 *
 * Datasets are attributed at create/open: the file through the real H5Fget_name, the
 * variable is the dataset's path (H5Iget_name). The size of a read or write is the selected
 * points of the memory space (else the file space, else the whole dataset) times the memory
 * type's size; there is no byte offset at this layer.
 */
#include "nm-trace.h"

#include <limits.h>
#include <sys/types.h>

typedef int64_t hid; /* hid_t since HDF5 1.10 */
#define H5_ERR (-1)

#define HDF5_FUNCS(X) X(H5Fcreate) X(H5Fopen) X(H5Fclose) X(H5Fflush) X(H5Dcreate2) X(H5Dopen2) \
    X(H5Dwrite) X(H5Dread) X(H5Dclose)
#define AS_ENUM(name) I_##name,
#define AS_NAME(name) #name,
enum { HDF5_FUNCS(AS_ENUM) I_COUNT };
const char *const nm_names_hdf5[] = {HDF5_FUNCS(AS_NAME)};
const int nm_count_hdf5 = I_COUNT;

static nm_map files, dset_file, dset_var; /* file hid -> file; dataset hid -> file, name */

#define RESOLVE(ptr, name) ((ptr) || ((ptr) = (__typeof__(ptr))nm_real(name)))

static uint32_t file_of_object(hid obj)
{
    static ssize_t (*get_name)(hid, char *, size_t);
    char path[PATH_MAX];
    if (!RESOLVE(get_name, "H5Fget_name") || get_name(obj, path, sizeof path) <= 0) return 0;
    return nm_intern_path(path);
}

static uint32_t name_of_object(hid obj)
{
    static ssize_t (*get_name)(hid, char *, size_t);
    char name[1024];
    if (!RESOLVE(get_name, "H5Iget_name") || get_name(obj, name, sizeof name) <= 0) return 0;
    return nm_intern(NM_STR_VAR, name);
}

/* Bytes a read/write moves in memory: points selected x memory type size; -1 if unknown. */
static int64_t transfer_bytes(hid dset, hid memtype, hid memspace, hid filespace)
{
    static int64_t (*npoints)(hid);
    static size_t (*type_size)(hid);
    static hid (*get_space)(hid);
    static int (*space_close)(hid);
    if (!RESOLVE(npoints, "H5Sget_select_npoints") || !RESOLVE(type_size, "H5Tget_size")
        || !RESOLVE(get_space, "H5Dget_space") || !RESOLVE(space_close, "H5Sclose"))
        return -1;
    hid space = memspace ? memspace : filespace; /* 0 is H5S_ALL */
    hid own = space ? 0 : get_space(dset);
    int64_t n = npoints(space ? space : own);
    if (own > 0) space_close(own);
    size_t es = type_size(memtype);
    return n >= 0 && es > 0 ? n * (int64_t)es : -1;
}

#define BEGIN(fn, ptr_type, args)                         \
    static __typeof__(ptr_type) real;                                 \
    NM_REAL(real, #fn, H5_ERR);                            \
    nm_call c;                                             \
    if (!nm_begin(&c, NM_HDF5, I_##fn)) return real args;

hid H5Fcreate(const char *name, unsigned flags, hid fcpl, hid fapl)
{
    BEGIN(H5Fcreate, hid (*)(const char *, unsigned, hid, hid), (name, flags, fcpl, fapl))
    hid f = real(name, flags, fcpl, fapl);
    nm_stop(&c);
    uint32_t file = f >= 0 ? nm_intern_path(name) : 0;
    if (file) nm_map_put(&files, f, file);
    nm_end(&c, file, 0, -1, -1, f, f < 0);
    return f;
}

hid H5Fopen(const char *name, unsigned flags, hid fapl)
{
    BEGIN(H5Fopen, hid (*)(const char *, unsigned, hid), (name, flags, fapl))
    hid f = real(name, flags, fapl);
    nm_stop(&c);
    uint32_t file = f >= 0 ? nm_intern_path(name) : 0;
    if (file) nm_map_put(&files, f, file);
    nm_end(&c, file, 0, -1, -1, f, f < 0);
    return f;
}

/* closes forget the handle first, traced or not: HDF5 reuses handle values */
int H5Fclose(hid f)
{
    uint32_t file = nm_map_get(&files, f);
    nm_map_del(&files, f);
    BEGIN(H5Fclose, int (*)(hid), (f))
    int rc = real(f);
    nm_stop(&c);
    nm_end(&c, file, 0, -1, -1, rc, rc < 0);
    return rc;
}

int H5Fflush(hid obj, int scope)
{
    BEGIN(H5Fflush, int (*)(hid, int), (obj, scope))
    int rc = real(obj, scope);
    nm_stop(&c);
    nm_end(&c, file_of_object(obj), 0, -1, -1, rc, rc < 0);
    return rc;
}

static hid opened_dataset(nm_call *c, hid d)
{
    uint32_t file = 0, var = 0;
    if (d >= 0) {
        file = file_of_object(d);
        var = name_of_object(d);
        nm_map_put(&dset_file, d, file);
        nm_map_put(&dset_var, d, var);
    }
    nm_end(c, file, var, -1, -1, d, d < 0);
    return d;
}

hid H5Dcreate2(hid loc, const char *name, hid type, hid space, hid lcpl, hid dcpl, hid dapl)
{
    BEGIN(H5Dcreate2, hid (*)(hid, const char *, hid, hid, hid, hid, hid), (loc, name, type, space, lcpl, dcpl, dapl))
    hid d = real(loc, name, type, space, lcpl, dcpl, dapl);
    nm_stop(&c);
    return opened_dataset(&c, d);
}

hid H5Dopen2(hid loc, const char *name, hid dapl)
{
    BEGIN(H5Dopen2, hid (*)(hid, const char *, hid), (loc, name, dapl))
    hid d = real(loc, name, dapl);
    nm_stop(&c);
    return opened_dataset(&c, d);
}

/* Datasets not opened through the wrappers (H5Oopen...) are named on each call. */
#define TRANSFER(fn, buf_type)                                                                      \
    int fn(hid dset, hid memtype, hid memspace, hid filespace, hid dxpl, buf_type buf)              \
    {                                                                                               \
        BEGIN(fn, int (*)(hid, hid, hid, hid, hid, buf_type), (dset, memtype, memspace, filespace, dxpl, buf)) \
        int rc = real(dset, memtype, memspace, filespace, dxpl, buf);                               \
        nm_stop(&c);                                                                                \
        uint32_t file = nm_map_get(&dset_file, dset), var = nm_map_get(&dset_var, dset);           \
        if (!file) file = file_of_object(dset);                                                     \
        if (!var) var = name_of_object(dset);                                                       \
        int64_t size = rc >= 0 ? transfer_bytes(dset, memtype, memspace, filespace) : -1;          \
        nm_end(&c, file, var, -1, size, rc, rc < 0);                                                \
        return rc;                                                                                  \
    }
TRANSFER(H5Dwrite, const void *)
TRANSFER(H5Dread, void *)

int H5Dclose(hid dset)
{
    uint32_t file = nm_map_get(&dset_file, dset), var = nm_map_get(&dset_var, dset);
    nm_map_del(&dset_file, dset);
    nm_map_del(&dset_var, dset);
    BEGIN(H5Dclose, int (*)(hid), (dset))
    int rc = real(dset);
    nm_stop(&c);
    nm_end(&c, file, var, -1, -1, rc, rc < 0);
    return rc;
}
