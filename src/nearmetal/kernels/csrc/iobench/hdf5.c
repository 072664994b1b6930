/* nm-iobench backend: parallel HDF5 through the MPI-IO virtual file driver. One dataset per
 * type, "/temp_r8" and "/temp_r4", dims {steps, nz, ny, nx}. Without a chunk layout the datasets
 * are contiguous and fixed-size (the fastest layout for parallel writes); with one they are
 * chunked as FMS's chunk_layout and the time axis may grow (H5S_UNLIMITED). */
#include "iobench.h"

#ifdef NM_HAVE_HDF5
#include <hdf5.h>
#ifndef H5_HAVE_PARALLEL /* a serial HDF5 has no MPI-IO driver */
#undef NM_HAVE_HDF5
#define NM_HDF5_SERIAL_ONLY
#endif
#endif

#ifdef NM_HAVE_HDF5
#include <stdio.h>
#include <stdlib.h>

struct nm_io_file {
    hid_t file;
    hid_t dxpl;                      /* collective or independent MPI-IO transfers */
    int collective;
    int nvars;
    hid_t dset[NM_IO_MAXVARS];
    hid_t fspace[NM_IO_MAXVARS];     /* the dataset's file dataspace, reselected per call */
    int is_double[NM_IO_MAXVARS];
};

struct h5_err_text {
    char desc[256];
    char minor[128];
};

/* Walked from the API call down: the last entry is where the error was detected. */
static herr_t h5_err_walk(unsigned n, const H5E_error2_t *err, void *data)
{
    struct h5_err_text *text = data;
    (void)n;
    snprintf(text->desc, sizeof text->desc, "%s", err->desc ? err->desc : "");
    text->minor[0] = '\0';
    H5Eget_msg(err->min_num, NULL, text->minor, sizeof text->minor);
    return 0;
}

static int h5_fail(const char *call)
{
    struct h5_err_text text = {"", ""};
    /* Walk a copy: every HDF5 API call (H5Eget_msg in the walk, too) clears the default stack. */
    hid_t stack = H5Eget_current_stack();
    if (stack >= 0) {
        H5Ewalk2(stack, H5E_WALK_DOWNWARD, h5_err_walk, &text);
        H5Eclose_stack(stack);
    }
    for (char *c = text.desc; *c; c++) /* MPICH's MPI error strings span lines: keep one */
        if (*c == '\n')
            *c = ' ';
    if (!text.desc[0] && !text.minor[0])
        snprintf(text.desc, sizeof text.desc, "no details on the HDF5 error stack");
    fprintf(stderr, "nm-iobench: hdf5: %s failed: %s%s%s%s\n", call, text.desc,
            text.minor[0] ? " (" : "", text.minor, text.minor[0] ? ")" : "");
    return 1;
}

static hid_t h5_fail_hid(const char *call)
{
    h5_fail(call);
    return H5I_INVALID_HID;
}

/* The error stack is read by h5_fail instead of HDF5 printing it from every rank. */
static void h5_quiet(void)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

static hsize_t ceil_div(hsize_t n, hsize_t parts)
{
    return (n + parts - 1) / parts;
}

static hid_t h5_type(int is_double)
{
    return is_double ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT;
}

static nm_io_file *h5_new(int nvars, int collective)
{
    nm_io_file *f = calloc(1, sizeof *f);
    if (!f) {
        fprintf(stderr, "nm-iobench: hdf5: out of memory\n");
        return NULL;
    }
    f->file = f->dxpl = H5I_INVALID_HID;
    for (int v = 0; v < NM_IO_MAXVARS; v++)
        f->dset[v] = f->fspace[v] = H5I_INVALID_HID;
    f->nvars = nvars;
    f->collective = collective;
    return f;
}

/* Closes whatever is open (also on the error paths); returns non-zero if a close failed. */
static int h5_release(nm_io_file *f)
{
    int rc = 0;
    for (int v = 0; v < NM_IO_MAXVARS; v++) {
        if (f->fspace[v] >= 0 && H5Sclose(f->fspace[v]) < 0)
            rc |= h5_fail("H5Sclose");
        if (f->dset[v] >= 0 && H5Dclose(f->dset[v]) < 0)
            rc |= h5_fail("H5Dclose");
    }
    if (f->dxpl >= 0 && H5Pclose(f->dxpl) < 0)
        rc |= h5_fail("H5Pclose");
    if (f->file >= 0 && H5Fclose(f->file) < 0)
        rc |= h5_fail("H5Fclose");
    free(f);
    return rc;
}

static hid_t h5_fapl(MPI_Comm comm, MPI_Info info)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0) {
        h5_fail("H5Pcreate(file access)");
        return H5I_INVALID_HID;
    }
    if (H5Pset_fapl_mpio(fapl, comm, info) < 0) {
        h5_fail("H5Pset_fapl_mpio");
        H5Pclose(fapl);
        return H5I_INVALID_HID;
    }
    return fapl;
}

static hid_t h5_dxpl(int collective)
{
    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
    if (dxpl < 0) {
        h5_fail("H5Pcreate(dataset transfer)");
        return H5I_INVALID_HID;
    }
    if (H5Pset_dxpl_mpio(dxpl, collective ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT) < 0) {
        h5_fail("H5Pset_dxpl_mpio");
        H5Pclose(dxpl);
        return H5I_INVALID_HID;
    }
    return dxpl;
}

static hid_t h5_dcpl(const nm_io_layout *lay)
{
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (dcpl < 0) {
        h5_fail("H5Pcreate(dataset create)");
        return H5I_INVALID_HID;
    }
    /* Every value is written, so filling would only double the write volume; parallel HDF5
     * needs the space allocated at creation (collectively), not at the first write. */
    if (H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) < 0) {
        h5_fail("H5Pset_fill_time");
        goto fail;
    }
    if (H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY) < 0) {
        h5_fail("H5Pset_alloc_time");
        goto fail;
    }
    if (lay->chunk_cx > 0 && lay->chunk_cy > 0) {
        hsize_t chunk[4] = {1, (hsize_t)lay->nz, ceil_div((hsize_t)lay->ny, (hsize_t)lay->chunk_cy),
                            ceil_div((hsize_t)lay->nx, (hsize_t)lay->chunk_cx)};
        if (H5Pset_chunk(dcpl, 4, chunk) < 0) {
            h5_fail("H5Pset_chunk");
            goto fail;
        }
    } else if (H5Pset_layout(dcpl, H5D_CONTIGUOUS) < 0) {
        h5_fail("H5Pset_layout");
        goto fail;
    }
    return dcpl;
fail:
    H5Pclose(dcpl);
    return H5I_INVALID_HID;
}

static int h5_create(MPI_Comm comm, const char *path, const nm_io_layout *lay, MPI_Info info,
                     nm_io_file **out)
{
    int chunked = lay->chunk_cx > 0 && lay->chunk_cy > 0;
    hsize_t dims[4] = {(hsize_t)lay->steps, (hsize_t)lay->nz, (hsize_t)lay->ny, (hsize_t)lay->nx};
    hsize_t maxdims[4] = {chunked ? H5S_UNLIMITED : dims[0], dims[1], dims[2], dims[3]};
    hid_t fapl, dcpl, space;
    nm_io_file *f;

    h5_quiet();
    if (!(f = h5_new(lay->nvars, 1)))
        return 1;
    if ((fapl = h5_fapl(comm, info)) < 0)
        goto fail;
    /* Metadata written once by one rank instead of by all (HDF5 >= 1.10). */
    if (H5Pset_coll_metadata_write(fapl, 1) < 0) {
        h5_fail("H5Pset_coll_metadata_write");
        H5Pclose(fapl);
        goto fail;
    }
    f->file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (f->file < 0)
        h5_fail("H5Fcreate"); /* before H5Pclose, which clears the error stack */
    H5Pclose(fapl);
    if (f->file < 0)
        goto fail;
    if ((dcpl = h5_dcpl(lay)) < 0)
        goto fail;
    if ((space = H5Screate_simple(4, dims, maxdims)) < 0) {
        h5_fail("H5Screate_simple");
        H5Pclose(dcpl);
        goto fail;
    }
    for (int v = 0; v < lay->nvars; v++) {
        char name[64];
        snprintf(name, sizeof name, "/%s", lay->names[v]);
        f->is_double[v] = lay->is_double[v];
        f->dset[v] = H5Dcreate2(f->file, name, h5_type(lay->is_double[v]), space, H5P_DEFAULT, dcpl,
                                H5P_DEFAULT);
        if (f->dset[v] < 0) {
            h5_fail("H5Dcreate2");
            break;
        }
        if ((f->fspace[v] = H5Dget_space(f->dset[v])) < 0) {
            h5_fail("H5Dget_space");
            break;
        }
    }
    H5Sclose(space);
    H5Pclose(dcpl);
    for (int v = 0; v < lay->nvars; v++)
        if (f->fspace[v] < 0)
            goto fail;
    if ((f->dxpl = h5_dxpl(1)) < 0)
        goto fail;
    *out = f;
    return 0;
fail:
    h5_release(f);
    return 1;
}

/* Selects record t's box in the file dataspace and makes the matching memory dataspace.
 * An empty box selects nothing on both sides: the rank still calls H5Dwrite/H5Dread, which
 * collective transfers require of every rank. */
static hid_t h5_select(nm_io_file *f, int var, int t, const int start[3], const int count[3],
                       int *empty)
{
    hid_t mspace;
    *empty = count[0] == 0 || count[1] == 0 || count[2] == 0;
    if (*empty) {
        hsize_t one = 1;
        if (H5Sselect_none(f->fspace[var]) < 0)
            return h5_fail_hid("H5Sselect_none");
        if ((mspace = H5Screate_simple(1, &one, NULL)) < 0)
            return h5_fail_hid("H5Screate_simple");
        if (H5Sselect_none(mspace) < 0) {
            h5_fail("H5Sselect_none");
            H5Sclose(mspace);
            return H5I_INVALID_HID;
        }
        return mspace;
    }
    hsize_t fstart[4] = {(hsize_t)t, (hsize_t)start[0], (hsize_t)start[1], (hsize_t)start[2]};
    hsize_t fcount[4] = {1, (hsize_t)count[0], (hsize_t)count[1], (hsize_t)count[2]};
    if (H5Sselect_hyperslab(f->fspace[var], H5S_SELECT_SET, fstart, NULL, fcount, NULL) < 0)
        return h5_fail_hid("H5Sselect_hyperslab");
    if ((mspace = H5Screate_simple(3, fcount + 1, NULL)) < 0)
        return h5_fail_hid("H5Screate_simple");
    return mspace;
}

static int h5_write(nm_io_file *f, int var, int t, const int start[3], const int count[3],
                    const void *buf)
{
    static const double nothing = 0; /* a valid pointer for an empty selection */
    int empty, rc = 0;
    hid_t mspace = h5_select(f, var, t, start, count, &empty);
    if (mspace < 0)
        return 1;
    if (H5Dwrite(f->dset[var], h5_type(f->is_double[var]), mspace, f->fspace[var], f->dxpl,
                 empty || !buf ? (const void *)&nothing : buf) < 0)
        rc = h5_fail("H5Dwrite");
    H5Sclose(mspace);
    return rc;
}

static int h5_close(nm_io_file *f)
{
    return h5_release(f);
}

static int h5_open_read(MPI_Comm comm, const char *path, const nm_io_layout *lay, MPI_Info info,
                        int collective, nm_io_file **out)
{
    hid_t fapl;
    nm_io_file *f;

    h5_quiet();
    if (!(f = h5_new(lay->nvars, collective)))
        return 1;
    if ((fapl = h5_fapl(comm, info)) < 0)
        goto fail;
    f->file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    if (f->file < 0)
        h5_fail("H5Fopen"); /* before H5Pclose, which clears the error stack */
    H5Pclose(fapl);
    if (f->file < 0)
        goto fail;
    for (int v = 0; v < lay->nvars; v++) {
        char name[64];
        snprintf(name, sizeof name, "/%s", lay->names[v]);
        f->is_double[v] = lay->is_double[v];
        if ((f->dset[v] = H5Dopen2(f->file, name, H5P_DEFAULT)) < 0) {
            h5_fail("H5Dopen2");
            goto fail;
        }
        if ((f->fspace[v] = H5Dget_space(f->dset[v])) < 0) {
            h5_fail("H5Dget_space");
            goto fail;
        }
    }
    if ((f->dxpl = h5_dxpl(collective)) < 0)
        goto fail;
    *out = f;
    return 0;
fail:
    h5_release(f);
    return 1;
}

static int h5_read(nm_io_file *f, int var, int t, const int start[3], const int count[3], void *buf)
{
    static double nothing; /* a valid pointer for an empty selection */
    int empty, rc = 0;
    if (!f->collective && (count[0] == 0 || count[1] == 0 || count[2] == 0))
        return 0; /* independent: nothing to fetch, nobody to wait for */
    hid_t mspace = h5_select(f, var, t, start, count, &empty);
    if (mspace < 0)
        return 1;
    if (H5Dread(f->dset[var], h5_type(f->is_double[var]), mspace, f->fspace[var], f->dxpl,
                empty || !buf ? (void *)&nothing : buf) < 0)
        rc = h5_fail("H5Dread");
    H5Sclose(mspace);
    return rc;
}

const nm_io_backend nm_io_hdf5 = {
    .name = "hdf5",
    .ext = ".h5",
    .unavailable = NULL,
    .shared_capable = 1,
    .chunked = 1,
    .create = h5_create,
    .write = h5_write,
    .close = h5_close,
    .open_read = h5_open_read,
    .read = h5_read,
};

#else /* !NM_HAVE_HDF5 */

#ifndef NM_MPI_LABEL
#define NM_MPI_LABEL "this MPI"
#endif
#ifndef NM_MPI_FAMILY
#define NM_MPI_FAMILY "<mpi>"
#endif
#if defined(NM_HDF5_SERIAL_ONLY)
#define NM_HDF5_WHY "the HDF5 found at build time is a serial build (no H5_HAVE_PARALLEL); " \
    "nm-iobench needs parallel HDF5 for " NM_MPI_LABEL
#elif defined(NM_HDF5_OTHER_MPI)
#define NM_HDF5_WHY "parallel HDF5 is not installed for " NM_MPI_LABEL " here: the HDF5 library " \
    "found is built for another MPI"
#else
#define NM_HDF5_WHY "parallel HDF5 is not installed for " NM_MPI_LABEL " here (no pkg-config package " \
    "'hdf5-" NM_MPI_FAMILY "' at build time: libhdf5-" NM_MPI_FAMILY "-dev)"
#endif

const nm_io_backend nm_io_hdf5 = {
    .name = "hdf5",
    .ext = ".h5",
    .unavailable = NM_HDF5_WHY,
    .shared_capable = 1,
    .chunked = 1,
};

#endif
