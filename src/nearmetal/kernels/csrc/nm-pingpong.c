/* nm-pingpong: blocking ping-pong between ranks 0 and 1.
 * Prints one line per message size: size (bytes), one-way latency (us, half the
 * round trip) and bandwidth (MB/s, 1 MB = 1e6 bytes). Rank 1 verifies every
 * received message, so a broken transport exits non-zero instead of reporting
 * a number.
 * usage: nm-pingpong [-s SIZE]... [-i ITERS] [-x WARMUP] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_SIZES 64

int main(int argc, char **argv)
{
    long sizes[MAX_SIZES];
    int nsizes = 0, iters = 1000, warmup = 100, opt;
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    while ((opt = getopt(argc, argv, "s:i:x:")) != -1) {
        if (opt == '?') {
            if (rank == 0) fprintf(stderr, "usage: nm-pingpong [-s SIZE]... [-i ITERS] [-x WARMUP]\n");
            MPI_Finalize();
            return 2;
        }
        char *end;
        long v = strtol(optarg, &end, 10);
        if (*end || v < 0 || (opt != 's' && v == 0)) {
            if (rank == 0) fprintf(stderr, "nm-pingpong: bad value for -%c: %s\n", opt, optarg);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        if (opt == 's' && nsizes < MAX_SIZES) sizes[nsizes++] = v;
        else if (opt == 'i') iters = (int)v;
        else if (opt == 'x') warmup = (int)v;
        else if (opt != 's') MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (nsizes == 0) { sizes[0] = 8; sizes[1] = 1 << 20; nsizes = 2; }
    if (nranks < 2) {
        if (rank == 0) fprintf(stderr, "nm-pingpong: needs at least 2 ranks, got %d\n", nranks);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long maxsize = 0;
    for (int k = 0; k < nsizes; k++) if (sizes[k] > maxsize) maxsize = sizes[k];
    char *buf = malloc((size_t)maxsize + 1);
    if (!buf) MPI_Abort(MPI_COMM_WORLD, 3);
    int bad = 0;
    if (rank == 0) printf("# nm-pingpong\n# %-10s %14s %14s\n", "Size", "Latency(us)", "Bandwidth(MB/s)");
    for (int k = 0; k < nsizes; k++) {
        long n = sizes[k];
        double t0 = 0.0;
        MPI_Barrier(MPI_COMM_WORLD);
        for (int it = 0; it < iters + warmup; it++) {
            if (it == warmup) t0 = MPI_Wtime();
            char tag = (char)(it & 0x7f);
            if (rank == 0) {
                memset(buf, tag, (size_t)n);
                MPI_Send(buf, (int)n, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
                MPI_Recv(buf, (int)n, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                MPI_Recv(buf, (int)n, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                if (n > 0 && (buf[0] != tag || buf[n - 1] != tag)) bad = 1;
                MPI_Send(buf, (int)n, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
            }
        }
        double elapsed = MPI_Wtime() - t0;
        if (rank == 0) {
            double lat_us = elapsed * 1e6 / (2.0 * iters);
            double mbps = n > 0 ? (double)n / (lat_us) : 0.0; /* bytes/us == MB/s */
            printf("  %-10ld %14.2f %14.2f\n", n, lat_us, mbps);
            fflush(stdout);
        }
    }
    int anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (anybad && rank == 0) fprintf(stderr, "nm-pingpong: received data did not match what was sent\n");
    free(buf);
    MPI_Finalize();
    return anybad ? 1 : 0;
}
