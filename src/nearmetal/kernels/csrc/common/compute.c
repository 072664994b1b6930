/* Shared helpers of nearmetal's compute proxies; see compute.h. */
#include "compute.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#ifndef NM_BUILD
#define NM_BUILD "unknown"
#endif

const char *nm_compute_simd(void)
{
#if defined(__AVX512F__)
    return "avx512";
#elif defined(__AVX2__)
    return "avx2";
#elif defined(__AVX__)
    return "avx";
#elif defined(__SSE2__)
    return "sse2";
#else
    return "scalar";
#endif
}

const char *nm_compute_build(void)
{
    return NM_BUILD;
}

int nm_compute_threads(void)
{
#ifdef _OPENMP
    const char *env = getenv("OMP_NUM_THREADS");
    if (!env || !*env)
        omp_set_num_threads(1);
    return omp_get_max_threads();
#else
    return 1;
#endif
}

int nm_compute_corrupt(void)
{
    const char *env = getenv("NM_CORRUPT");
    return env && strcmp(env, "1") == 0;
}

int nm_compute_parse_long(const char *prog, int rank, int opt, const char *arg, long min, long *out)
{
    char *end;
    long v = strtol(arg, &end, 10);
    if (*arg == '\0' || *end != '\0' || v < min) {
        if (rank == 0)
            fprintf(stderr, "%s: bad value for -%c: '%s' (an integer >= %ld)\n", prog, opt, arg, min);
        return -1;
    }
    *out = v;
    return 0;
}

int nm_compute_parse_double(const char *prog, int rank, int opt, const char *arg, double *out)
{
    char *end;
    double v = strtod(arg, &end);
    if (*arg == '\0' || *end != '\0' || !(v > 0.0)) {
        if (rank == 0)
            fprintf(stderr, "%s: bad value for -%c: '%s' (a positive number)\n", prog, opt, arg);
        return -1;
    }
    *out = v;
    return 0;
}

int nm_compute_node_ranks(void)
{
    MPI_Comm node;
    int n = 1;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_size(node, &n);
        MPI_Comm_free(&node);
    }
    return n;
}

void nm_compute_print_build(int nranks, int nthreads, int node_ranks)
{
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(version, &len);
    version[len < MPI_MAX_LIBRARY_VERSION_STRING ? len : MPI_MAX_LIBRARY_VERSION_STRING - 1] = '\0';
    /* First line, up to the first comma, whitespace runs as one '_': "Open_MPI_v4.1.4". */
    char *cut = strpbrk(version, ",\r\n");
    if (cut)
        *cut = '\0';
    char *w = version;
    for (const char *r = version; *r; r++) {
        if (*r == ' ' || *r == '\t') {
            if (w > version && w[-1] != '_')
                *w++ = '_';
        } else {
            *w++ = *r;
        }
    }
    while (w > version && w[-1] == '_')
        w--;
    *w = '\0';
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    printf("# build=%s simd=%s ranks=%d threads=%d mpi=%s node_ranks=%d cpus=%ld\n", nm_compute_build(),
           nm_compute_simd(), nranks, nthreads, version, node_ranks, cpus);
    if (cpus > 0 && (long)node_ranks * nthreads > cpus) {
        const char *policy = getenv("OMP_WAIT_POLICY");
        printf("# warning: %d ranks x %d threads on %ld CPUs: oversubscribed, timings include waiting for a CPU%s\n",
               node_ranks, nthreads, cpus,
               nthreads > 1 && !policy ? " (and OpenMP threads spinning at barriers: set OMP_WAIT_POLICY=passive)"
                                      : "");
    }
}
