/* nm-iobench: FMS/MOM5-style parallel output. A 4-D field (t, z, y, x) of doubles
 * (temp_r8, restart-like) and floats (temp_r4, diagnostic-like) on an nx x ny x nz grid is
 * decomposed over a px x py layout of ranks (rank r = j*px + i, x fastest; uneven blocks,
 * the first n % p get one more point) and written for STEPS records along an unlimited time
 * axis in one of four patterns (seed 004, Table 1):
 *   serial         gather to rank 0, one file over the global grid, one writer
 *   file-per-rank  every rank writes its own block to its own file
 *   io-domains     ranks grouped by io_layout ix x iy; each domain root gathers its domain
 *                  and writes it to its own file
 *   shared         domain roots gather as in io-domains, then the roots (their own
 *                  communicator, as in the paper) write collectively into ONE file
 * through one I/O library (iobench/: posix, mpiio, pnetcdf, netcdf4, hdf5), then
 * every rank reads its own block back and verifies it exactly against the formula
 *   g = (z*ny + y)*nx + x;  value = (g % 1000003) + 0.25*t (+ 0.5 for temp_r4)
 * (exact in float). Timers per rank: open (create + define), write (gather + all records),
 * close, read (open + read + close of the read-back). MPI-IO hints (-H) are passed through
 * MPI_Info; after the write phase the file is reopened with plain MPI_File_open and the hints
 * in effect (MPI_File_get_info) are reported against those requested.
 *
 * usage: see usage_line below and docs/kernel-iobench.md.
 * Exit: 0 ok, 1 verification failed, 2 usage error (one line on stderr, before any I/O),
 * 3 an I/O call failed (the library's message on stderr; MPI_Abort so no rank hangs in a
 * collective the failed rank will never enter). */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "iobench.h"

#define MAX_REPORTS 5 /* mismatches printed per rank */
#define MAX_HINTS 16
#define VALUE_MOD 1000003L

static const char usage_line[] =
    "usage: nm-iobench [-x NX] [-y NY] [-z NZ] [-t STEPS] [-l PXxPY] [-i IXxIY] [-p PATTERN] [-L LIBRARY] "
    "[-T TYPES] [-c CHUNK] [-H KEY=VALUE]... [-r READ] [-d DIR] [-k] [-V] [-C] [-A]";

enum pattern { SERIAL, FILE_PER_RANK, IO_DOMAINS, SHARED, NPATTERNS };
static const char *const pattern_names[NPATTERNS] = {"serial", "file-per-rank", "io-domains", "shared"};
enum readmode { READ_NONE, READ_SERIAL, READ_PARALLEL, NREADS };
static const char *const read_names[NREADS] = {"none", "serial", "parallel"};

#define NM_IO_BACKEND(name, packages) &nm_io_##name,
static const nm_io_backend *const backends[] = {
#include "backends.def"
};
#undef NM_IO_BACKEND
#define NM_IO_BACKEND(name, packages) " " #name
static const char unknown_library[] = "unknown library '%s' (choose from:"
#include "backends.def"
    ")";
#undef NM_IO_BACKEND
enum { NBACKENDS = sizeof backends / sizeof backends[0] };

/* The hints nm-iobench passes on; ROMIO_ONLY: OMPIO has its own parameters instead. */
static const struct { const char *key; int numeric, romio_only; } hint_keys[] = {
    {"cb_nodes", 1, 0}, {"cb_config_list", 0, 1}, {"cb_buffer_size", 1, 0}, {"romio_cb_write", 0, 1},
    {"romio_cb_read", 0, 1}, {"striping_factor", 1, 0}, {"striping_unit", 1, 0},
};
enum { NHINTKEYS = sizeof hint_keys / sizeof hint_keys[0] };

typedef struct {
    long nx, ny, nz, steps;
    int px, py, ix, iy;
    int pattern, read;
    const nm_io_backend *lib;
    const char *types;
    int nvars, is_double[NM_IO_MAXVARS];
    const char *var_names[NM_IO_MAXVARS];
    int chunk_given, cx, cy;
    int nhints;
    char hint_key[MAX_HINTS][64], hint_value[MAX_HINTS][256];
    char dir[PATH_MAX - 128]; /* room for the file names under it */
    int keep, verify, corrupt, availability;
} options;

/* The rank's place: its block, its I/O domain, the file that holds it. */
typedef struct {
    int i, j;                 /* position in the layout */
    long xs, xl, ys, yl;      /* block start and length along x and y */
    int rx, ry;               /* ranks per domain along x and y */
    int domain, root;         /* domain index (dj*ix + di) and its root's world rank */
    long dxs, dxl, dys, dyl;  /* domain start and length */
    int file;                 /* index of the file that holds this rank's block */
} place;

/* ------------------------------------------------------------------ options */

static int fail_usage(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(err, len, "nm-iobench: ");
    vsnprintf(err + n, len - (size_t)n, fmt, ap);
    va_end(ap);
    return 2;
}

static int parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end || errno || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

/* "AxB" with positive integers */
static int parse_pair(const char *s, int *a, int *b)
{
    char buf[64], *x;
    long va, vb;
    if (strlen(s) >= sizeof buf) return -1;
    strcpy(buf, s);
    if (!(x = strchr(buf, 'x'))) return -1;
    *x = '\0';
    if (parse_long(buf, 1, 1 << 20, &va) || parse_long(x + 1, 1, 1 << 20, &vb)) return -1;
    *a = (int)va;
    *b = (int)vb;
    return 0;
}

static int index_of(const char *s, const char *const *names, int n)
{
    for (int k = 0; k < n; k++) if (strcmp(s, names[k]) == 0) return k;
    return -1;
}

static const nm_io_backend *backend_named(const char *s)
{
    for (int k = 0; k < NBACKENDS; k++) if (strcmp(s, backends[k]->name) == 0) return backends[k];
    return NULL;
}

/* The names of the backends that can write a shared file (chunked 0) or have chunk layouts
 * (chunked 1), for messages: "a, b, c" + `last` + "d". */
static const char *backend_list(int chunked, const char *last, char *out, size_t len)
{
    int n = 0, k, i = 0;
    for (k = 0; k < NBACKENDS; k++) n += chunked ? backends[k]->chunked : backends[k]->shared_capable;
    out[0] = '\0';
    for (k = 0; k < NBACKENDS; k++) {
        if (!(chunked ? backends[k]->chunked : backends[k]->shared_capable)) continue;
        size_t used = strlen(out);
        snprintf(out + used, len - used, "%s%s", i == 0 ? "" : i == n - 1 ? last : ", ", backends[k]->name);
        i++;
    }
    return out;
}

static int hint_index(const char *key)
{
    for (int k = 0; k < NHINTKEYS; k++) if (strcmp(key, hint_keys[k].key) == 0) return k;
    return -1;
}

static int check_hint(options *o, const char *arg, char *err, size_t len)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || !eq[1]) return fail_usage(err, len, "-H wants KEY=VALUE, got '%s'", arg);
    size_t klen = (size_t)(eq - arg);
    char key[64];
    if (klen >= sizeof key) return fail_usage(err, len, "unknown hint '%.40s...'", arg);
    memcpy(key, arg, klen);
    key[klen] = '\0';
    int h = hint_index(key);
    if (h < 0)
        return fail_usage(err, len, "unknown hint '%s' (choose from: cb_nodes cb_config_list cb_buffer_size "
                          "romio_cb_write romio_cb_read striping_factor striping_unit)", key);
    const char *value = eq + 1;
    long v;
    if (hint_keys[h].numeric && parse_long(value, 1, INT_MAX, &v))
        return fail_usage(err, len, "hint %s wants a positive integer, got '%s'", key, value);
    if (strncmp(key, "romio_cb_", 9) == 0 && strcmp(value, "enable") && strcmp(value, "disable")
        && strcmp(value, "automatic"))
        return fail_usage(err, len, "hint %s wants enable, disable or automatic, got '%s'", key, value);
    if (strlen(value) >= sizeof o->hint_value[0]) return fail_usage(err, len, "hint %s: value too long", key);
    for (int k = 0; k < o->nhints; k++)
        if (strcmp(o->hint_key[k], key) == 0) return fail_usage(err, len, "hint %s given twice", key);
    if (o->nhints == MAX_HINTS) return fail_usage(err, len, "too many hints");
    strcpy(o->hint_key[o->nhints], key);
    strcpy(o->hint_value[o->nhints], value);
    o->nhints++;
    return 0;
}

/* Every rank parses the same argv; only rank 0 looks at the file system (check_dir). */
static int parse_options(int argc, char **argv, int nranks, options *o, char *err, size_t len)
{
    const char *layout = NULL, *io_layout = "1x1", *pattern = "shared", *library = NULL, *chunk = NULL;
    const char *readmode = "serial", *dir = ".";
    o->nx = 128; o->ny = 128; o->nz = 16; o->steps = 2;
    o->types = "double,float";
    o->verify = 1;
    opterr = 0;
    int opt;
    long v;
    while ((opt = getopt(argc, argv, ":x:y:z:t:l:i:p:L:T:c:H:r:d:kVCA")) != -1) {
        switch (opt) {
        case 'x': case 'y': case 'z': case 't':
            if (parse_long(optarg, 1, opt == 't' ? 1000000 : 1 << 24, &v))
                return fail_usage(err, len, "bad value for -%c: '%s' (a positive integer%s)", opt, optarg,
                                  opt == 't' ? " up to 1000000" : "");
            *(opt == 'x' ? &o->nx : opt == 'y' ? &o->ny : opt == 'z' ? &o->nz : &o->steps) = v;
            break;
        case 'l': layout = optarg; break;
        case 'i': io_layout = optarg; break;
        case 'p': pattern = optarg; break;
        case 'L': library = optarg; break;
        case 'T': o->types = optarg; break;
        case 'c': chunk = optarg; break;
        case 'H': if (check_hint(o, optarg, err, len)) return 2; break;
        case 'r': readmode = optarg; break;
        case 'd': dir = optarg; break;
        case 'k': o->keep = 1; break;
        case 'V': o->verify = 0; break;
        case 'C': o->corrupt = 1; break;
        case 'A': o->availability = 1; break;
        case ':': return fail_usage(err, len, "option -%c needs a value (%s)", optopt, usage_line);
        default: return fail_usage(err, len, "unknown option -%c (%s)", optopt, usage_line);
        }
    }
    if (optind < argc) return fail_usage(err, len, "unexpected argument '%s' (%s)", argv[optind], usage_line);
    if (o->availability) return 0;

    if (layout) {
        if (parse_pair(layout, &o->px, &o->py)) return fail_usage(err, len, "bad layout '%s' (want PXxPY)", layout);
        if ((long)o->px * o->py != nranks)
            return fail_usage(err, len, "layout %dx%d has %ld ranks, but %d are running", o->px, o->py,
                              (long)o->px * o->py, nranks);
    } else {
        int dims[2] = {0, 0};
        MPI_Dims_create(nranks, 2, dims);
        o->px = dims[0];
        o->py = dims[1];
    }
    if (parse_pair(io_layout, &o->ix, &o->iy)) return fail_usage(err, len, "bad io_layout '%s' (want IXxIY)", io_layout);
    if (o->px % o->ix || o->py % o->iy)
        return fail_usage(err, len, "io_layout %dx%d does not divide layout %dx%d (ix must divide px and iy must "
                          "divide py)", o->ix, o->iy, o->px, o->py);
    if ((o->pattern = index_of(pattern, pattern_names, NPATTERNS)) < 0)
        return fail_usage(err, len, "unknown pattern '%s' (choose from: serial file-per-rank io-domains shared)", pattern);
    if (!library) library = o->pattern == SHARED ? "mpiio" : "posix";
    if (!(o->lib = backend_named(library)))
        return fail_usage(err, len, unknown_library, library);
    if (o->lib->unavailable)
        return fail_usage(err, len, "library %s is not available in this build: %s", library, o->lib->unavailable);
    char names[256];
    if (o->pattern == SHARED && !o->lib->shared_capable)
        return fail_usage(err, len, "library %s cannot write a shared file (one writer per file descriptor); "
                          "use %s", library, backend_list(0, " or ", names, sizeof names));
    if (strcmp(o->types, "double,float") == 0) {
        o->nvars = 2;
    } else if (strcmp(o->types, "double") == 0 || strcmp(o->types, "float") == 0) {
        o->nvars = 1;
    } else {
        return fail_usage(err, len, "bad types '%s' (choose from: double,float double float)", o->types);
    }
    for (int k = 0; k < o->nvars; k++) {
        o->is_double[k] = o->nvars == 2 ? k == 0 : o->types[0] == 'd';
        o->var_names[k] = o->is_double[k] ? "temp_r8" : "temp_r4";
    }
    if (chunk) {
        if (!o->lib->chunked)
            return fail_usage(err, len, "-c (chunk layout) applies to %s only, not %s",
                              backend_list(1, " and ", names, sizeof names), o->lib->name);
        o->chunk_given = 1;
        if (strcmp(chunk, "default") != 0) {
            if (parse_pair(chunk, &o->cx, &o->cy)) return fail_usage(err, len, "bad chunk '%s' (want default or CXxCY)", chunk);
            if (o->cx > o->nx || o->cy > o->ny)
                return fail_usage(err, len, "chunk layout %dx%d splits the grid %ldx%ld into more segments than points",
                                  o->cx, o->cy, o->nx, o->ny);
        }
    }
    if ((o->read = index_of(readmode, read_names, NREADS)) < 0)
        return fail_usage(err, len, "unknown read mode '%s' (choose from: none serial parallel)", readmode);
    if (o->nx < o->px || o->ny < o->py)
        return fail_usage(err, len, "grid %ldx%ld is smaller than layout %dx%d: every rank needs at least one point",
                          o->nx, o->ny, o->px, o->py);
    if (o->nx * o->ny * o->nz > INT_MAX)
        return fail_usage(err, len, "grid %ldx%ldx%ld has more than %d points per variable and record", o->nx, o->ny,
                          o->nz, INT_MAX);
    if (o->corrupt && (!o->verify || o->read == READ_NONE))
        return fail_usage(err, len, "-C (corrupt the expected values) needs verification: not with -V or -r none");
    if (strlen(dir) >= sizeof o->dir) return fail_usage(err, len, "target directory name too long");
    strcpy(o->dir, dir);
    return 0;
}

/* Rank 0 only: the target directory must exist and take new files. */
static int check_dir(options *o, char *err, size_t len)
{
    struct stat st;
    if (stat(o->dir, &st) != 0)
        return fail_usage(err, len, "target directory %s: %s", o->dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return fail_usage(err, len, "target directory %s is not a directory", o->dir);
    /* Create a file rather than ask access(): root passes access() on read-only or immutable
     * directories and on pseudo file systems. */
    char probe[PATH_MAX];
    snprintf(probe, sizeof probe, "%s/.nmio-probe-XXXXXX", o->dir);
    int fd = mkstemp(probe);
    if (fd < 0) return fail_usage(err, len, "target directory %s is not writable: %s", o->dir, strerror(errno));
    close(fd);
    unlink(probe);
    return 0;
}

/* ------------------------------------------------------------------ decomposition */

static void block_range(long n, int p, int k, long *start, long *count)
{
    long base = n / p, extra = n % p;
    *start = k * base + (k < extra ? k : extra);
    *count = base + (k < extra);
}

/* Effective io_layout: serial is one domain, file-per-rank one domain per rank. */
static void domains_of(const options *o, int *ix, int *iy)
{
    *ix = o->pattern == SERIAL ? 1 : o->pattern == FILE_PER_RANK ? o->px : o->ix;
    *iy = o->pattern == SERIAL ? 1 : o->pattern == FILE_PER_RANK ? o->py : o->iy;
}

static place place_of(const options *o, int rank)
{
    place p;
    int ix, iy;
    domains_of(o, &ix, &iy);
    p.i = rank % o->px;
    p.j = rank / o->px;
    block_range(o->nx, o->px, p.i, &p.xs, &p.xl);
    block_range(o->ny, o->py, p.j, &p.ys, &p.yl);
    p.rx = o->px / ix;
    p.ry = o->py / iy;
    int di = p.i / p.rx, dj = p.j / p.ry;
    p.domain = dj * ix + di;
    p.root = dj * p.ry * o->px + di * p.rx;
    long s, c;
    block_range(o->nx, o->px, di * p.rx, &p.dxs, &c);
    block_range(o->nx, o->px, di * p.rx + p.rx - 1, &s, &c);
    p.dxl = s + c - p.dxs;
    block_range(o->ny, o->py, dj * p.ry, &p.dys, &c);
    block_range(o->ny, o->py, dj * p.ry + p.ry - 1, &s, &c);
    p.dyl = s + c - p.dys;
    p.file = o->pattern == SERIAL || o->pattern == SHARED ? 0 : p.domain;
    return p;
}

static int file_count(const options *o)
{
    int ix, iy;
    domains_of(o, &ix, &iy);
    return o->pattern == SERIAL || o->pattern == SHARED ? 1 : ix * iy;
}

static int writer_count(const options *o)
{
    int ix, iy;
    domains_of(o, &ix, &iy);
    return ix * iy;
}

static void file_name(char *buf, size_t len, const options *o, long pid, int index)
{
    if (o->pattern == SERIAL || o->pattern == SHARED)
        snprintf(buf, len, "%s/nmio-%ld-%s%s", o->dir, pid, pattern_names[o->pattern], o->lib->ext);
    else
        snprintf(buf, len, "%s/nmio-%ld-%s.%04d%s", o->dir, pid, pattern_names[o->pattern], index, o->lib->ext);
}

/* The layout of the file holding this rank's block: global grid or the rank's domain. */
static nm_io_layout file_layout(const options *o, const place *p)
{
    nm_io_layout l;
    memset(&l, 0, sizeof l);
    l.nvars = o->nvars;
    for (int v = 0; v < o->nvars; v++) { l.names[v] = o->var_names[v]; l.is_double[v] = o->is_double[v]; }
    int global = o->pattern == SERIAL || o->pattern == SHARED;
    l.nx = (int)(global ? o->nx : p->dxl);
    l.ny = (int)(global ? o->ny : p->dyl);
    l.nz = (int)o->nz;
    l.steps = (int)o->steps;
    l.chunk_cx = o->cx;
    l.chunk_cy = o->cy;
    return l;
}

/* ------------------------------------------------------------------ data */

static double expected(const options *o, long x, long y, long z, long t, int var)
{
    long g = (z * o->ny + y) * o->nx + x;
    return (double)(g % VALUE_MOD) + 0.25 * (double)t + (o->is_double[var] ? 0.0 : 0.5);
}

/* The rank's block of (var, t), packed [z][y][x]. */
static void fill(const options *o, const place *p, int var, long t, void *buf)
{
    size_t k = 0;
    for (long z = 0; z < o->nz; z++)
        for (long y = p->ys; y < p->ys + p->yl; y++)
            for (long x = p->xs; x < p->xs + p->xl; x++, k++) {
                double v = expected(o, x, y, z, t, var);
                if (o->is_double[var]) ((double *)buf)[k] = v;
                else ((float *)buf)[k] = (float)v;
            }
}

/* Mismatches of a read-back block against the formula (-C shifts one expected value per rank). */
static long verify_block(const options *o, const place *p, int rank, int var, long t, const void *buf, int *reported)
{
    long bad = 0;
    size_t k = 0;
    for (long z = 0; z < o->nz; z++)
        for (long y = p->ys; y < p->ys + p->yl; y++)
            for (long x = p->xs; x < p->xs + p->xl; x++, k++) {
                double want = expected(o, x, y, z, t, var);
                if (o->corrupt && k == 0 && var == 0 && t == 0) want += 1.0;
                double got = o->is_double[var] ? ((const double *)buf)[k] : (double)((const float *)buf)[k];
                int same = o->is_double[var] ? got == want : (float)got == (float)want;
                if (!same) {
                    bad++;
                    if ((*reported)++ < MAX_REPORTS)
                        fprintf(stderr, "nm-iobench: rank %d: %s t=%ld (z,y,x)=(%ld,%ld,%ld): read %.17g, expected %.17g\n",
                                rank, o->var_names[var], t, z, y, x, got, want);
                }
            }
    return bad;
}

static void io_failed(void)
{
    MPI_Abort(MPI_COMM_WORLD, 3);
}

/* ------------------------------------------------------------------ hints */

static int is_ompio(void)
{
#ifdef OPEN_MPI
    const char *v = getenv("OMPI_MCA_io");
    if (!v || !*v) return 1;
    return v[0] == '^' ? strstr(v, "ompio") == NULL : strstr(v, "ompio") != NULL;
#else
    return 0;
#endif
}

static const char *mpiio_component(void)
{
#ifdef OPEN_MPI
    const char *v = getenv("OMPI_MCA_io");
    return v && *v ? v : "ompio";
#else
    return "romio";
#endif
}

static void fs_name(const char *dir, char *buf, size_t len)
{
    struct statfs s;
    if (statfs(dir, &s) != 0) { snprintf(buf, len, "unknown"); return; }
    unsigned long m = (unsigned long)s.f_type;
    const char *name = m == 0x0BD00BD0UL ? "lustre" : m == 0x01021994UL ? "tmpfs" : m == 0xEF53UL ? "ext4"
                     : m == 0x58465342UL ? "xfs" : m == 0x9123683EUL ? "btrfs" : m == 0x794C7630UL ? "overlayfs"
                     : m == 0x6969UL ? "nfs" : m == 0x47504653UL ? "gpfs" : NULL;
    if (name) snprintf(buf, len, "%s", name);
    else snprintf(buf, len, "0x%lx", m);
}

static MPI_Info make_info(const options *o)
{
    if (o->nhints == 0) return MPI_INFO_NULL;
    MPI_Info info;
    MPI_Info_create(&info);
    for (int k = 0; k < o->nhints; k++) MPI_Info_set(info, o->hint_key[k], o->hint_value[k]);
    return info;
}

static int same_value(const char *a, const char *b)
{
    long va, vb;
    if (!parse_long(a, LONG_MIN, LONG_MAX, &va) && !parse_long(b, LONG_MIN, LONG_MAX, &vb)) return va == vb;
    return strcmp(a, b) == 0;
}

/* Rank 0: the hint lines and the "# effective" line from the info of the probe open. */
static void print_hints(const options *o, MPI_Info got, const char *fs)
{
    int lustre = strcmp(fs, "lustre") == 0, posix = strcmp(o->lib->name, "posix") == 0;
    for (int k = 0; k < o->nhints; k++) {
        const char *key = o->hint_key[k];
        char eff[MPI_MAX_INFO_VAL + 1] = "-";
        int flag = 0;
        if (got != MPI_INFO_NULL) MPI_Info_get(got, key, MPI_MAX_INFO_VAL, eff, &flag);
        if (!flag) strcpy(eff, "-");
        char status[256];
        if (posix)
            snprintf(status, sizeof status, "ignored: posix does not use MPI-IO");
        else if (hint_keys[hint_index(key)].romio_only && is_ompio())
            snprintf(status, sizeof status, "ignored: OMPIO does not use ROMIO hints");
        else if (strncmp(key, "striping_", 9) == 0 && !lustre)
            snprintf(status, sizeof status, "ignored: %s is not Lustre", fs);
        else if (!flag)
            snprintf(status, sizeof status, "ignored: not in the info the MPI library returned");
        else
            snprintf(status, sizeof status, "%s", same_value(o->hint_value[k], eff) ? "honoured" : "changed");
        printf("# hint %s requested=%s effective=%s %s\n", key, o->hint_value[k], eff, status);
    }
    if (got == MPI_INFO_NULL) return;
    int nkeys = 0;
    MPI_Info_get_nkeys(got, &nkeys);
    printf("# effective");
    for (int k = 0; k < nkeys; k++) {
        char key[MPI_MAX_INFO_KEY + 1], val[MPI_MAX_INFO_VAL + 1];
        int flag = 0;
        MPI_Info_get_nthkey(got, k, key);
        MPI_Info_get(got, key, MPI_MAX_INFO_VAL, val, &flag);
        /* one token per key: trailing blanks dropped (ROMIO's aggregator list has one), inner ones as '_' */
        for (size_t n = strlen(val); n > 0 && val[n - 1] == ' '; n--) val[n - 1] = '\0';
        for (char *c = val; *c; c++) if (*c == ' ') *c = '_';
        printf(" %s=%s", key, flag ? val : "-");
    }
    printf("\n");
}

/* After the write phase, untimed: the writers of the shared (or first) file reopen it with
 * plain MPI-IO and the same info; rank 0 (always one of them) keeps what MPI reports. */
static MPI_Info probe_hints(const options *o, MPI_Comm writers, int rank, long pid, MPI_Info info)
{
    if (strcmp(o->lib->name, "posix") == 0) return MPI_INFO_NULL;
    MPI_Comm comm = MPI_COMM_NULL;
    if (o->pattern == SHARED) comm = writers;
    else if (rank == 0) comm = MPI_COMM_SELF;
    MPI_Info got = MPI_INFO_NULL;
    if (comm == MPI_COMM_NULL) return MPI_INFO_NULL; /* not a writer of that file */
    char path[PATH_MAX];
    file_name(path, sizeof path, o, pid, 0);
    MPI_File fh;
    int rc = MPI_File_open(comm, path, MPI_MODE_RDONLY, info, &fh);
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int n;
        MPI_Error_string(rc, msg, &n);
        fprintf(stderr, "nm-iobench: reopening %s for its hints: %s\n", path, msg);
        io_failed();
    }
    MPI_File_get_info(fh, &got);
    MPI_File_close(&fh);
    if (rank != 0) { MPI_Info_free(&got); return MPI_INFO_NULL; }
    return got;
}

/* ------------------------------------------------------------------ the run */

static void copy_block_into_domain(char *dom, const char *blk, const place *d, const place *b, long nz, size_t es)
{
    for (long z = 0; z < nz; z++)
        for (long y = 0; y < b->yl; y++)
            memcpy(dom + (((size_t)z * d->dyl + (size_t)(b->ys - d->dys + y)) * d->dxl + (size_t)(b->xs - d->dxs)) * es,
                   blk + (((size_t)z * b->yl + y) * b->xl) * es, (size_t)b->xl * es);
}

static int run(int rank, int nranks, int argc, char **argv)
{
    static options o;
    char err[1024] = "";
    int verdict = parse_options(argc, argv, nranks, &o, err, sizeof err);
    if (verdict == 0 && rank == 0 && !o.availability) verdict = check_dir(&o, err, sizeof err);
    MPI_Bcast(&verdict, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (verdict) {
        if (rank == 0) fprintf(stderr, "%s\n", err);
        return verdict;
    }
    if (o.availability) {
        for (int k = 0; rank == 0 && k < NBACKENDS; k++) {
            if (backends[k]->unavailable) printf("%s unavailable: %s\n", backends[k]->name, backends[k]->unavailable);
            else printf("%s available\n", backends[k]->name);
        }
        return 0;
    }

    long pid = (long)getpid();
    MPI_Bcast(&pid, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    place me = place_of(&o, rank);
    int writer = rank == me.root;
    MPI_Comm domain_comm, writers_comm, read_comm = MPI_COMM_SELF;
    MPI_Comm_split(MPI_COMM_WORLD, me.domain, rank, &domain_comm);
    MPI_Comm_split(MPI_COMM_WORLD, writer ? 0 : MPI_UNDEFINED, rank, &writers_comm);
    if (o.read == READ_PARALLEL) MPI_Comm_split(MPI_COMM_WORLD, me.file, rank, &read_comm);
    int dsize;
    MPI_Comm_size(domain_comm, &dsize);
    MPI_Info info = make_info(&o);

    /* Buffers: the block, and on domain roots the members' packed blocks and the domain array. */
    size_t block_n = (size_t)o.nz * me.yl * me.xl, dom_n = (size_t)o.nz * me.dyl * me.dxl;
    char *block = malloc(block_n * 8), *packed = NULL, *dom = NULL;
    int *counts = NULL, *displs = NULL;
    place *members = NULL;
    if (writer && dsize > 1) {
        packed = malloc(dom_n * 8);
        dom = malloc(dom_n * 8);
        counts = malloc(sizeof *counts * (size_t)dsize);
        displs = malloc(sizeof *displs * (size_t)dsize);
        members = malloc(sizeof *members * (size_t)dsize);
        /* domain-communicator ranks follow world ranks (split key): j outer, i inner */
        int k = 0, off = 0;
        for (int jj = me.j; jj < me.j + me.ry; jj++)
            for (int ii = me.i; ii < me.i + me.rx; ii++, k++) {
                members[k] = place_of(&o, jj * o.px + ii);
                counts[k] = (int)(o.nz * members[k].yl * members[k].xl);
                displs[k] = off;
                off += counts[k];
            }
    }
    if (!block || (writer && dsize > 1 && (!packed || !dom || !counts || !displs || !members))) {
        fprintf(stderr, "nm-iobench: rank %d: out of memory for the blocks\n", rank);
        io_failed();
    }

    nm_io_layout lay = file_layout(&o, &me);
    char path[PATH_MAX];
    file_name(path, sizeof path, &o, pid, me.file);
    /* Where the writer's data goes in its file, and where this rank's block sits in its file. */
    int global = o.pattern == SERIAL || o.pattern == SHARED;
    int wstart[3] = {0, o.pattern == SHARED ? (int)me.dys : 0, o.pattern == SHARED ? (int)me.dxs : 0};
    int wcount[3] = {(int)o.nz, (int)me.dyl, (int)me.dxl};
    int rstart[3] = {0, (int)(global ? me.ys : me.ys - me.dys), (int)(global ? me.xs : me.xs - me.dxs)};
    int rcount[3] = {(int)o.nz, (int)me.yl, (int)me.xl};
    MPI_Comm create_comm = o.pattern == SHARED ? writers_comm : MPI_COMM_SELF;
    double t_open = 0, t_write = 0, t_close = 0, t_read = 0, t;
    nm_io_file *f = NULL;

    /* open: create + define */
    MPI_Barrier(MPI_COMM_WORLD);
    if (writer) {
        t = MPI_Wtime();
        if (o.lib->create(create_comm, path, &lay, info, &f)) io_failed();
        t_open = MPI_Wtime() - t;
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* write: gather within the domain, then the writer's library call, for every record */
    for (long ts = 0; ts < o.steps; ts++)
        for (int v = 0; v < o.nvars; v++) {
            fill(&o, &me, v, ts, block); /* the model's data exists before mpp_write: untimed */
            size_t es = o.is_double[v] ? 8 : 4;
            MPI_Datatype et = o.is_double[v] ? MPI_DOUBLE : MPI_FLOAT;
            t = MPI_Wtime();
            const char *out = block;
            if (dsize > 1) {
                MPI_Gatherv(block, (int)block_n, et, packed, counts, displs, et, 0, domain_comm);
                if (writer) {
                    for (int k = 0; k < dsize; k++)
                        copy_block_into_domain(dom, packed + (size_t)displs[k] * es, &me, &members[k], o.nz, es);
                    out = dom;
                }
            }
            if (writer && o.lib->write(f, v, (int)ts, wstart, wcount, out)) io_failed();
            t_write += MPI_Wtime() - t;
        }
    MPI_Barrier(MPI_COMM_WORLD);
    if (writer) {
        t = MPI_Wtime();
        if (o.lib->close(f)) io_failed();
        t_close = MPI_Wtime() - t;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Info effective = probe_hints(&o, writers_comm, rank, pid, info);

    /* read back this rank's own block from the file that holds it; verify, untimed */
    long bad = 0;
    int reported = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (o.read != READ_NONE) {
        nm_io_file *r = NULL;
        t = MPI_Wtime();
        if (o.lib->open_read(read_comm, path, &lay, info, o.read == READ_PARALLEL, &r)) io_failed();
        t_read += MPI_Wtime() - t;
        for (long ts = 0; ts < o.steps; ts++)
            for (int v = 0; v < o.nvars; v++) {
                memset(block, 0xff, block_n * 8); /* NaN everywhere: nothing left from the write survives */
                t = MPI_Wtime();
                if (o.lib->read(r, v, (int)ts, rstart, rcount, block)) io_failed();
                t_read += MPI_Wtime() - t;
                if (o.verify) bad += verify_block(&o, &me, rank, v, ts, block, &reported);
            }
        t = MPI_Wtime();
        if (o.lib->close(r)) io_failed();
        t_read += MPI_Wtime() - t;
    }
    if (reported > MAX_REPORTS) fprintf(stderr, "nm-iobench: rank %d: ... %ld mismatches in all\n", rank, bad);
    MPI_Barrier(MPI_COMM_WORLD);
    if (writer && !o.keep && (!global || rank == 0)) unlink(path); /* a shared file: rank 0 removes it */

    /* report */
    double mine[4] = {t_open, t_write, t_close, t_read};
    double *all = rank == 0 ? malloc(sizeof mine * (size_t)nranks) : NULL;
    long total_bad = 0;
    MPI_Gather(mine, 4, MPI_DOUBLE, all, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Reduce(&bad, &total_bad, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        char fs[32], real[PATH_MAX];
        fs_name(o.dir, fs, sizeof fs);
        int ix, iy;
        domains_of(&o, &ix, &iy);
        char chunk[32] = "default";
        if (o.cx) snprintf(chunk, sizeof chunk, "%dx%d", o.cx, o.cy);
        printf("# nm-iobench 1\n");
        printf("# config pattern=%s library=%s grid=%ldx%ldx%ld steps=%ld layout=%dx%d io_layout=%dx%d types=%s "
               "chunk=%s read=%s writers=%d files=%d mpiio=%s\n", pattern_names[o.pattern], o.lib->name, o.nx, o.ny,
               o.nz, o.steps, o.px, o.py, ix, iy, o.types, chunk, read_names[o.read], writer_count(&o),
               file_count(&o), mpiio_component());
        printf("# fs %s %s\n", realpath(o.dir, real) ? real : o.dir, fs);
        print_hints(&o, effective, fs);
        for (int k = 0; o.keep && k < file_count(&o); k++) {
            file_name(path, sizeof path, &o, pid, k);
            printf("# file %s\n", realpath(path, real) ? real : path);
        }
        printf("rank open_s write_s close_s read_s total_s\n");
        double mx[5] = {0, 0, 0, 0, 0}, max_wr = 0, max_rd = 0;
        for (int r = 0; r < nranks; r++) {
            double *v = all + 4 * r, row[5] = {v[0], v[1], v[2], v[3], v[0] + v[1] + v[2] + v[3]};
            for (int k = 0; k < 5; k++) if (row[k] > mx[k]) mx[k] = row[k];
            if (v[0] + v[1] + v[2] > max_wr) max_wr = v[0] + v[1] + v[2];
            if (v[3] > max_rd) max_rd = v[3];
            printf("%d %.6f %.6f %.6f %.6f %.6f\n", r, row[0], row[1], row[2], row[3], row[4]);
        }
        printf("max %.6f %.6f %.6f %.6f %.6f\n", mx[0], mx[1], mx[2], mx[3], mx[4]);
        long long bytes = 0;
        for (int v = 0; v < o.nvars; v++) bytes += (long long)o.nx * o.ny * o.nz * o.steps * (o.is_double[v] ? 8 : 4);
        char rbw[32] = "-", verdict_text[64];
        if (o.read != READ_NONE) snprintf(rbw, sizeof rbw, "%.6g", max_rd > 0 ? bytes / max_rd / 1e6 : 0.0);
        if (!o.verify || o.read == READ_NONE) snprintf(verdict_text, sizeof verdict_text, "skipped");
        else if (total_bad) snprintf(verdict_text, sizeof verdict_text, "FAILED %ld mismatches", total_bad);
        else snprintf(verdict_text, sizeof verdict_text, "ok");
        printf("# bytes %lld files %d write_MBps %.6g read_MBps %s verify %s\n", bytes, file_count(&o),
               max_wr > 0 ? bytes / max_wr / 1e6 : 0.0, rbw, verdict_text);
        fflush(stdout);
        if (total_bad)
            fprintf(stderr, "nm-iobench: verification failed: %ld values read back differ from what was written\n",
                    total_bad);
        free(all);
    }
    if (effective != MPI_INFO_NULL) MPI_Info_free(&effective);
    if (info != MPI_INFO_NULL) MPI_Info_free(&info);
    MPI_Bcast(&total_bad, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    free(block); free(packed); free(dom); free(counts); free(displs); free(members);
    MPI_Comm_free(&domain_comm);
    if (writers_comm != MPI_COMM_NULL) MPI_Comm_free(&writers_comm);
    if (read_comm != MPI_COMM_SELF) MPI_Comm_free(&read_comm);
    return total_bad ? 1 : 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    int rc = run(rank, nranks, argc, argv);
    MPI_Finalize();
    return rc;
}
