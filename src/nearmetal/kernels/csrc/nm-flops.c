/* nm-flops: the floating-point rate of a compute-bound loop, per rank, summed over ranks.
 *
 * Each rank updates an array that fits in L1 (-s doubles, default 512 = 4 KiB), -i times:
 * a[j] = a[j] * B + C, one multiply and one add per element (2 flops; one FMA where the build
 * has FMA). The elements are independent, so the inner loop vectorizes to whatever width
 * the build allows: an SSE2 build does 2 doubles per instruction, an AVX2 build 4 with FMA,
 * and the rate follows (seed 001: a portable build in the image against the host's). Nothing
 * is read from memory beyond L1, and the only MPI is the final reduction, so neither the
 * memory system nor the transport decides the figure.
 *
 * Output (rank 0): the build line (common/compute.c), then
 *   gflops  RATE     the sum over ranks of 2*s*i / that rank's loop time, in GFLOP/s
 *   time_s  SECONDS  the slowest rank's loop time
 * and a verification line: every element against the closed form of the recurrence. */
#include "compute.h"

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define B 0.999999
#define C 1e-6

static void usage(int rank)
{
    if (rank == 0)
        fprintf(stderr, "usage: nm-flops [-s DOUBLES_PER_RANK] [-i ITERATIONS]\n");
}

/* Element j's value before the loop. */
static double start(long j)
{
    return (double)(j % 97) / 97.0;
}

/* Kept out of line so that the compiler cannot fold the repeated update into one. */
__attribute__((noinline)) static void update(double *restrict a, long n, long iters)
{
    for (long k = 0; k < iters; k++)
#pragma omp simd /* as wide as the build allows: -O2 alone leaves this loop scalar */
        for (long j = 0; j < n; j++)
            a[j] = a[j] * B + C;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    long n = 512, iters = 4000000;
    int opt, bad_args = 0;
    while ((opt = getopt(argc, argv, "s:i:")) != -1) {
        switch (opt) {
        case 's': bad_args |= nm_compute_parse_long("nm-flops", rank, opt, optarg, 8, &n); break;
        case 'i': bad_args |= nm_compute_parse_long("nm-flops", rank, opt, optarg, 1, &iters); break;
        default: usage(rank); bad_args = 1;
        }
    }
    if (!bad_args && (optind < argc || n > 1L << 24)) {
        if (rank == 0)
            fprintf(stderr, "nm-flops: %s\n", optind < argc ? "unexpected argument" : "array too large (> 2^24 doubles)");
        bad_args = 1;
    }
    if (bad_args) {
        MPI_Finalize();
        return 2;
    }
    int node_ranks = nm_compute_node_ranks();
    size_t bytes = sizeof(double) * (size_t)((n + 7) / 8 * 8);
    double *a = aligned_alloc(64, bytes);
    if (!a) {
        fprintf(stderr, "nm-flops: rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(a, 0, bytes);
    update(a, n, 1); /* the array and the code touched once before the timing */
    for (long j = 0; j < n; j++)
        a[j] = start(j);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    update(a, n, iters);
    double mine = MPI_Wtime() - t0;
    if (nm_compute_corrupt())
        a[n / 2] += 1.0;

    /* a_k = B^k a_0 + C (1 - B^k) / (1 - B) */
    double bk = pow(B, (double)iters), worst = 0.0;
    for (long j = 0; j < n; j++) {
        double want = bk * start(j) + C * (1.0 - bk) / (1.0 - B);
        double err = fabs(a[j] - want) / fmax(fabs(want), 1e-300);
        if (err > worst)
            worst = err;
    }
    double rate = mine > 0.0 ? 2.0 * (double)n * (double)iters / mine * 1e-9 : 0.0, total = 0.0, slowest = 0.0,
           worst_all = 0.0;
    MPI_Reduce(&rate, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&worst, &worst_all, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    int failed = 0;
    if (rank == 0) {
        printf("# nm-flops: a[j] = a[j] * %g + %g over %ld doubles per rank (L1), %ld times\n", B, C, n, iters);
        nm_compute_print_build(nranks, 1, node_ranks);
        printf("gflops          %.4f\n", total);
        printf("time_s          %.6f\n", slowest);
        failed = !(worst_all <= 1e-8);
        if (failed)
            fprintf(stderr, "nm-flops: verification FAILED: relative error %.3e > 1e-8\n", worst_all);
        else
            printf("Verification PASSED: relative error %.3e <= 1e-8\n", worst_all);
    }
    MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(a);
    MPI_Finalize();
    return failed ? 1 : 0;
}
