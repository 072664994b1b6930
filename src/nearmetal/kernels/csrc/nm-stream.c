/* nm-stream: McCalpin's STREAM (copy, scale, add, triad) with OpenMP, every MPI rank on its
 * own three arrays. The ranks start each kernel together (a barrier before each timed loop),
 * so they compete for memory bandwidth as the ranks of a real application do.
 *
 * Rates follow STREAM: bytes counted per element are copy 16, scale 16, add 24, triad 24
 * (no write-allocate traffic), best rate = bytes / minimum time over iterations 2..NTIMES
 * (the first iteration is discarded, as STREAM does), 1 GB = 1e9 bytes. Every rank prints
 * one row per kernel; the "total" row is the sum of the ranks' best rates (and the largest
 * of their times).
 *
 * Verification is STREAM's checkSTREAMresults: the expected values are replayed in scalars
 * and the average absolute error of each array must stay below 1e-13 relative; any rank
 * failing makes every rank exit 1. NM_CORRUPT=1 zeroes one element of array a on the last
 * rank after the timed loops, which the check must catch.
 *
 * usage: nm-stream [-s ELEMENTS] [-n NTIMES]
 *   -s  elements per array per rank (default 33554432 = 2^25 doubles, 268 MB per array,
 *       805 MB per rank: 4x more than the 36 MiB of L2+L3 of the machine it was sized on)
 *   -n  timed iterations, >= 2 (default 10) */
#include <mpi.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compute.h"

#define NKERNELS 4
static const char *const kernel_name[NKERNELS] = {"Copy", "Scale", "Add", "Triad"};
static const double bytes_per_elem[NKERNELS] = {16.0, 16.0, 24.0, 24.0};

static void usage(int rank)
{
    if (rank == 0)
        fprintf(stderr, "usage: nm-stream [-s ELEMENTS] [-n NTIMES]\n");
}

/* checkSTREAMresults: 0 when the arrays match the replayed scalars. */
static int check_results(const double *a, const double *b, const double *c, long n, int ntimes, int rank)
{
    double aj = 1.0, bj = 2.0, cj = 0.0, scalar = 3.0;
    aj = 2.0E0 * aj; /* the timing-granularity loop of the initialisation */
    for (int k = 0; k < ntimes; k++) {
        cj = aj;
        bj = scalar * cj;
        cj = aj + bj;
        aj = bj + scalar * cj;
    }
    double asum = 0.0, bsum = 0.0, csum = 0.0;
#pragma omp parallel for reduction(+ : asum, bsum, csum) schedule(static)
    for (long j = 0; j < n; j++) {
        asum += fabs(a[j] - aj);
        bsum += fabs(b[j] - bj);
        csum += fabs(c[j] - cj);
    }
    double aavg = asum / (double)n, bavg = bsum / (double)n, cavg = csum / (double)n;
    const double epsilon = 1.e-13;
    int bad = 0;
    const double avg[3] = {aavg, bavg, cavg}, expect[3] = {aj, bj, cj};
    const double *arr[3] = {a, b, c};
    for (int x = 0; x < 3; x++) {
        if (fabs(avg[x] / expect[x]) > epsilon) {
            long ierr = 0;
            for (long j = 0; j < n; j++)
                if (fabs(arr[x][j] / expect[x] - 1.0) > epsilon)
                    ierr++;
            fprintf(stderr,
                    "nm-stream: rank %d: Failed Validation on array %c[], AvgRelAbsErr > epsilon (%e): "
                    "expected %e, AvgAbsErr %e, AvgRelAbsErr %e; %ld of %ld elements over epsilon\n",
                    rank, "abc"[x], epsilon, expect[x], avg[x], fabs(avg[x]) / fabs(expect[x]), ierr, n);
            bad = 1;
        }
    }
    return bad;
}

int main(int argc, char **argv)
{
    int provided, rank, nranks;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    long n = 1L << 25, ntimes = 10;
    int opt, bad_args = 0;
    while ((opt = getopt(argc, argv, "s:n:")) != -1) {
        if (opt == 's')
            bad_args |= nm_compute_parse_long("nm-stream", rank, opt, optarg, 1, &n);
        else if (opt == 'n')
            bad_args |= nm_compute_parse_long("nm-stream", rank, opt, optarg, 2, &ntimes);
        else {
            usage(rank);
            bad_args = 1;
        }
    }
    if (bad_args || optind < argc) {
        if (!bad_args)
            usage(rank);
        MPI_Finalize();
        return 2;
    }
    int nthreads = nm_compute_threads();
    int node_ranks = nm_compute_node_ranks();

    double *a = NULL, *b = NULL, *c = NULL;
    size_t bytes = (size_t)n * sizeof(double);
    int alloc_bad = posix_memalign((void **)&a, 64, bytes) | posix_memalign((void **)&b, 64, bytes) |
                    posix_memalign((void **)&c, 64, bytes);
    int any_alloc_bad = 0;
    MPI_Allreduce(&alloc_bad, &any_alloc_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any_alloc_bad) {
        if (alloc_bad)
            fprintf(stderr, "nm-stream: rank %d: cannot allocate 3 x %zu bytes\n", rank, bytes);
        MPI_Finalize();
        return 3;
    }
    /* First touch by the threads that use the data (page placement), as STREAM does. */
#pragma omp parallel for schedule(static)
    for (long j = 0; j < n; j++) {
        a[j] = 1.0;
        b[j] = 2.0;
        c[j] = 0.0;
    }
#pragma omp parallel for schedule(static)
    for (long j = 0; j < n; j++)
        a[j] = 2.0E0 * a[j];

    double *times = malloc(sizeof(double) * NKERNELS * (size_t)ntimes);
    if (!times)
        MPI_Abort(MPI_COMM_WORLD, 3);
    const double scalar = 3.0;
    for (long k = 0; k < ntimes; k++) {
        double t;
        MPI_Barrier(MPI_COMM_WORLD);
        t = MPI_Wtime();
#pragma omp parallel for schedule(static)
        for (long j = 0; j < n; j++)
            c[j] = a[j];
        times[0 * ntimes + k] = MPI_Wtime() - t;

        MPI_Barrier(MPI_COMM_WORLD);
        t = MPI_Wtime();
#pragma omp parallel for schedule(static)
        for (long j = 0; j < n; j++)
            b[j] = scalar * c[j];
        times[1 * ntimes + k] = MPI_Wtime() - t;

        MPI_Barrier(MPI_COMM_WORLD);
        t = MPI_Wtime();
#pragma omp parallel for schedule(static)
        for (long j = 0; j < n; j++)
            c[j] = a[j] + b[j];
        times[2 * ntimes + k] = MPI_Wtime() - t;

        MPI_Barrier(MPI_COMM_WORLD);
        t = MPI_Wtime();
#pragma omp parallel for schedule(static)
        for (long j = 0; j < n; j++)
            a[j] = b[j] + scalar * c[j];
        times[3 * ntimes + k] = MPI_Wtime() - t;
    }

    /* Per kernel: best rate, avg/min/max time over iterations 2..NTIMES. */
    double mine[NKERNELS][4]; /* rate GB/s, avg, min, max */
    for (int kk = 0; kk < NKERNELS; kk++) {
        double sum = 0.0, mn = FLT_MAX, mx = 0.0;
        for (long k = 1; k < ntimes; k++) {
            double t = times[kk * ntimes + k];
            sum += t;
            mn = t < mn ? t : mn;
            mx = t > mx ? t : mx;
        }
        if (mn <= 0.0)
            mn = 1e-9; /* below the clock's resolution: report a finite rate */
        mine[kk][0] = 1.0e-9 * bytes_per_elem[kk] * (double)n / mn;
        mine[kk][1] = sum / (double)(ntimes - 1);
        mine[kk][2] = mn;
        mine[kk][3] = mx;
    }
    free(times);

    if (nm_compute_corrupt() && rank == nranks - 1)
        a[n / 2] = 0.0;
    int bad = check_results(a, b, c, n, (int)ntimes, rank);
    int nbad = 0;
    MPI_Allreduce(&bad, &nbad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);

    double *all = rank == 0 ? malloc(sizeof(mine) * (size_t)nranks) : NULL;
    if (rank == 0 && !all)
        MPI_Abort(MPI_COMM_WORLD, 3);
    MPI_Gather(mine, NKERNELS * 4, MPI_DOUBLE, all, NKERNELS * 4, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("# nm-stream: STREAM copy/scale/add/triad per rank, OpenMP threads within a rank\n");
        nm_compute_print_build(nranks, nthreads, node_ranks);
        printf("# elements=%ld ntimes=%ld bytes_per_array=%zu bytes_per_rank=%zu (1 GB = 1e9 bytes)\n", n, ntimes,
               bytes, 3 * bytes);
        printf("# %-8s %-6s %14s %12s %12s %12s\n", "Function", "Rank", "Best Rate GB/s", "Avg time", "Min time",
               "Max time");
        for (int kk = 0; kk < NKERNELS; kk++) {
            double total = 0.0, avg = 0.0, mn = 0.0, mx = 0.0;
            char label[16];
            snprintf(label, sizeof label, "%s:", kernel_name[kk]);
            for (int r = 0; r < nranks; r++) {
                const double *v = all + ((size_t)r * NKERNELS + kk) * 4;
                printf("  %-8s %-6d %14.3f %12.6f %12.6f %12.6f\n", label, r, v[0], v[1], v[2], v[3]);
                total += v[0];
                avg = v[1] > avg ? v[1] : avg;
                mn = v[2] > mn ? v[2] : mn;
                mx = v[3] > mx ? v[3] : mx;
            }
            printf("  %-8s %-6s %14.3f %12.6f %12.6f %12.6f\n", label, "total", total, avg, mn, mx);
        }
        if (nbad == 0)
            printf("Solution Validates: avg error less than 1.000000e-13 on all three arrays, all %d ranks\n", nranks);
        fflush(stdout);
        free(all);
    }
    free(a);
    free(b);
    free(c);
    if (nbad && rank == 0)
        fprintf(stderr, "nm-stream: validation failed on %d of %d ranks\n", nbad, nranks);
    MPI_Finalize();
    return nbad ? 1 : 0;
}
