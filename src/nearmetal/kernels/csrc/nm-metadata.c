/* nm-metadata: the start-up metadata storm of a job that imports hundreds of Python files
 * and loads hundreds of shared libraries (an ATLAS job: many open()/stat()/mmap() on the
 * release's file system). Every rank, right after MPI_Init, opens and reads FILES small
 * files and dlopens LIBS small shared libraries from a generated tree, timing each phase.
 * Then, outside the timed phases, it verifies what it got: every file's header carries its
 * index, its body length and the body's FNV-1a hash; every library exports
 * nm_md_lib_index(), which must return the index in the library's own file name (so a
 * loader that returned another object is caught). Any mismatch exits 1.
 *
 * usage: nm-metadata [-n FILES] [-m LIBS] [-d DIR] [-C]
 *   -n FILES  files to read (default: all in the tree, normally 1000)
 *   -m LIBS   libraries to dlopen (default: all in the tree, normally 100)
 *   -d DIR    the tree (default: ../share/metadata next to this executable)
 *   -C        corrupt the expected values (as NM_CORRUPT=1): verification must fail
 * Output (rank 0): '#' header lines, then one row per rank and a "max" row:
 *   rank files libraries bytes files_s dlopen_s total_s
 * Exit: 0 ok, 1 verification failed, 2 usage error or missing/incomplete tree. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HEADER_FMT "# nm-metadata file %06ld bytes %06zu fnv1a64 %016llx\n"
#define MAX_REPORTS 5 /* mismatches printed per rank */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static unsigned long long fnv1a64(const char *s, size_t n)
{
    unsigned long long h = 1469598103934665603ULL;
    for (size_t k = 0; k < n; k++) { h ^= (unsigned char)s[k]; h *= 1099511628211ULL; }
    return h;
}

static void file_path(char *buf, size_t len, const char *dir, long i)
{
    snprintf(buf, len, "%s/py/p%02ld/s%ld/mod_%06ld.py", dir, i / 100, (i / 10) % 10, i);
}

static void lib_path(char *buf, size_t len, const char *dir, long j)
{
    snprintf(buf, len, "%s/lib/d%02ld/libnmmd_%04ld.so", dir, j / 10, j);
}

/* The default tree: ../share/metadata next to the executable. /proc/self/exe is the
 * program, except when it was started through the dynamic loader (bind mode may run
 * `ld.so --preload ... PROGRAM`): then argv[0] names the program. */
static int default_dir(char *out, size_t len, const char *argv0)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) exe[n] = '\0';
    const char *base = n > 0 ? strrchr(exe, '/') : NULL;
    if (!base || strncmp(base + 1, "nm-", 3) != 0) {
        if (!argv0 || !strchr(argv0, '/') || !realpath(argv0, exe)) return -1;
    }
    char *slash = strrchr(exe, '/');
    if (!slash) return -1;
    *slash = '\0';
    if (strlen(exe) + sizeof "/../share/metadata" > len) return -1;
    memcpy(out, exe, strlen(exe));
    strcpy(out + strlen(exe), "/../share/metadata");
    return 0;
}

static int usage(int rank)
{
    if (rank == 0) fprintf(stderr, "usage: nm-metadata [-n FILES] [-m LIBS] [-d DIR] [-C]\n");
    return 2;
}

/* Options and the tree's manifest; 0 or an exit status (2), decided by every rank alike. */
static int setup(int rank, int argc, char **argv, long *pfiles, long *plibs, int *pcorrupt, char *dir, size_t dirlen)
{
    long nfiles = -1, nlibs = -1;
    int corrupt = 0, opt;
    const char *env = getenv("NM_CORRUPT");
    if (env && *env && strcmp(env, "0") != 0) corrupt = 1;
    while ((opt = getopt(argc, argv, "n:m:d:C")) != -1) {
        if (opt == 'C') { corrupt = 1; continue; }
        if (opt == 'd') { snprintf(dir, dirlen, "%s", optarg); continue; }
        if (opt == '?') return usage(rank);
        char *end;
        long v = strtol(optarg, &end, 10);
        if (*optarg == '\0' || *end || v < 0) {
            if (rank == 0) fprintf(stderr, "nm-metadata: bad value for -%c: %s\n", opt, optarg);
            return 2;
        }
        if (opt == 'n') nfiles = v; else nlibs = v;
    }
    if (optind < argc) return usage(rank);
    if (!*dir && default_dir(dir, dirlen, argv[0]) != 0) {
        if (rank == 0) fprintf(stderr, "nm-metadata: cannot locate my executable to find the tree; give -d DIR\n");
        return 2;
    }

    /* The manifest says how big the tree is; without it there is no tree. */
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/MANIFEST", dir);
    FILE *mf = fopen(path, "r");
    long tree_files = -1, tree_libs = -1;
    int version = 0;
    if (!mf) {
        if (rank == 0)
            fprintf(stderr, "nm-metadata: no metadata tree at %s (%s: %s); it is built by `make data` in "
                    "the kernels' source directory (data/metadata.mk), or give -d DIR\n", dir, path, strerror(errno));
        return 2;
    }
    if (fscanf(mf, "nm-metadata-tree %d files %ld libraries %ld", &version, &tree_files, &tree_libs) != 3
        || version != 1) {
        fclose(mf);
        if (rank == 0) fprintf(stderr, "nm-metadata: %s is not a version 1 nm-metadata manifest\n", path);
        return 2;
    }
    fclose(mf);
    char real[PATH_MAX];
    if (realpath(dir, real) && strlen(real) < dirlen) strcpy(dir, real);
    if (nfiles < 0) nfiles = tree_files;
    if (nlibs < 0) nlibs = tree_libs;
    if (nfiles > tree_files || nlibs > tree_libs) {
        if (rank == 0)
            fprintf(stderr, "nm-metadata: asked for %ld files and %ld libraries, the tree at %s has %ld and %ld\n",
                    nfiles, nlibs, dir, tree_files, tree_libs);
        return 2;
    }
    if (corrupt && nfiles == 0 && nlibs == 0) {
        if (rank == 0) fprintf(stderr, "nm-metadata: corruption (-C / NM_CORRUPT) needs at least one file or library\n");
        return 2;
    }
    *pfiles = nfiles;
    *plibs = nlibs;
    *pcorrupt = corrupt;
    return 0;
}

static int run(int rank, int nranks, int argc, char **argv)
{
    long nfiles = 0, nlibs = 0;
    int corrupt = 0;
    char dir[PATH_MAX] = "", path[PATH_MAX + 64];
    int pre = setup(rank, argc, argv, &nfiles, &nlibs, &corrupt, dir, sizeof dir), anypre = 0;
    MPI_Allreduce(&pre, &anypre, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (anypre) return anypre;

    char **bufs = calloc((size_t)nfiles + 1, sizeof *bufs);
    size_t *lens = calloc((size_t)nfiles + 1, sizeof *lens);
    void **handles = calloc((size_t)nlibs + 1, sizeof *handles);
    int (**fns)(void) = calloc((size_t)nlibs + 1, sizeof *fns);
    if (!bufs || !lens || !handles || !fns) { fprintf(stderr, "nm-metadata: out of memory\n"); return 2; }

    /* Timed phases: open+fstat+read+close every file, then dlopen+dlsym every library. */
    int missing = 0; /* 1: a file or library could not be opened (reported below, exit 2) */
    char failed[PATH_MAX + 64] = "", why[512] = "";
    long long bytes = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    for (long i = 0; i < nfiles && !missing; i++) {
        file_path(path, sizeof path, dir, i);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0) {
            missing = 1;
            snprintf(failed, sizeof failed, "%s", path);
            snprintf(why, sizeof why, "%s", strerror(errno));
            if (fd >= 0) close(fd);
            break;
        }
        size_t cap = (size_t)st.st_size + 1, n = 0;
        char *b = malloc(cap + 1);
        ssize_t r = 0;
        while (b && (r = read(fd, b + n, cap - n)) > 0) {
            n += (size_t)r;
            if (n == cap) { char *nb = realloc(b, (cap *= 2) + 1); if (!nb) { free(b); b = NULL; } else b = nb; }
        }
        close(fd);
        if (!b || r < 0) {
            missing = 1;
            snprintf(failed, sizeof failed, "%s", path);
            snprintf(why, sizeof why, "%s", b ? strerror(errno) : "out of memory");
            free(b);
            break;
        }
        b[n] = '\0';
        bufs[i] = b;
        lens[i] = n;
        bytes += (long long)n;
    }
    double t1 = now();
    for (long j = 0; j < nlibs && !missing; j++) {
        lib_path(path, sizeof path, dir, j);
        handles[j] = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (handles[j]) fns[j] = (int (*)(void))dlsym(handles[j], "nm_md_lib_index");
        if (!handles[j] || !fns[j]) {
            missing = 1;
            snprintf(failed, sizeof failed, "%s", path);
            const char *e = dlerror();
            snprintf(why, sizeof why, "%s", e ? e : "no nm_md_lib_index symbol");
        }
    }
    double t2 = now();

    /* Verification, untimed. */
    long bad = 0;
    int reported = 0;
    for (long i = 0; i < nfiles && !missing; i++) {
        long idx = -1;
        size_t body = 0;
        unsigned long long sum = 0;
        int hdr = 0;
        char *nl = strchr(bufs[i], '\n');
        if (nl && sscanf(bufs[i], "# nm-metadata file %ld bytes %zu fnv1a64 %llx", &idx, &body, &sum) == 3) hdr = 1;
        const char *start = nl ? nl + 1 : bufs[i];
        size_t have = lens[i] - (size_t)(start - bufs[i]);
        unsigned long long got = fnv1a64(start, have);
        unsigned long long want = corrupt && i == 0 ? sum ^ 1ULL : sum;
        const char *what = !hdr ? "no nm-metadata header" : idx != i ? "wrong file index in header"
                         : body != have ? "body length differs from header" : got != want ? "checksum mismatch" : NULL;
        if (what) {
            bad++;
            if (reported++ < MAX_REPORTS) {
                file_path(path, sizeof path, dir, i);
                fprintf(stderr, "nm-metadata: rank %d: %s: %s (expected: index %ld, %zu bytes, fnv1a64 %016llx; "
                        "read: %zu bytes, fnv1a64 %016llx)\n", rank, path, what, idx, body, want, have, got);
            }
        }
    }
    for (long j = 0; j < nlibs && !missing; j++) {
        int got = fns[j]();
        long want = corrupt && j == 0 ? j + 1 : j;
        if (got != want) {
            bad++;
            if (reported++ < MAX_REPORTS) {
                lib_path(path, sizeof path, dir, j);
                fprintf(stderr, "nm-metadata: rank %d: %s: nm_md_lib_index() returned %d, expected %ld "
                        "(the loader did not give this file its own object)\n", rank, path, got, want);
            }
        }
    }
    if (reported > MAX_REPORTS)
        fprintf(stderr, "nm-metadata: rank %d: ... %ld mismatches in all\n", rank, bad);
    for (long j = 0; j < nlibs; j++) if (handles[j]) dlclose(handles[j]);
    for (long i = 0; i < nfiles; i++) free(bufs[i]);
    free(bufs); free(lens); free(handles); free(fns);
    if (missing)
        fprintf(stderr, "nm-metadata: rank %d: cannot load %s: %s (incomplete tree at %s?)\n", rank, failed, why, dir);

    /* Per-rank rows and the max over ranks, printed by rank 0. */
    double mine[6] = {(double)nfiles, (double)nlibs, (double)bytes, t1 - t0, t2 - t1, t2 - t0};
    double *all = rank == 0 ? malloc(sizeof mine * (size_t)nranks) : NULL;
    int status = missing ? 2 : bad ? 1 : 0, worst = 0;
    MPI_Gather(mine, 6, MPI_DOUBLE, all, 6, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Allreduce(&status, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) {
        double mx[6] = {0, 0, 0, 0, 0, 0};
        printf("# nm-metadata: open+read small files, then dlopen small shared libraries, on every rank\n");
        printf("# dir=%s files=%ld libraries=%ld ranks=%d\n", dir, nfiles, nlibs, nranks);
        printf("# %-6s %8s %10s %12s %12s %12s %12s\n", "rank", "files", "libraries", "bytes", "files_s",
               "dlopen_s", "total_s");
        for (int r = 0; r < nranks; r++) {
            double *v = all + 6 * r;
            for (int k = 0; k < 6; k++) if (v[k] > mx[k]) mx[k] = v[k];
            printf("  %-6d %8.0f %10.0f %12.0f %12.6f %12.6f %12.6f\n", r, v[0], v[1], v[2], v[3], v[4], v[5]);
        }
        printf("  %-6s %8.0f %10.0f %12.0f %12.6f %12.6f %12.6f\n", "max", mx[0], mx[1], mx[2], mx[3], mx[4], mx[5]);
        fflush(stdout);
        if (worst == 1) fprintf(stderr, "nm-metadata: verification failed: files or libraries did not hold what was expected\n");
        free(all);
    }
    return worst;
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
