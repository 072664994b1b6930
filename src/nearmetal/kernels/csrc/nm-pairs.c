/* nm-pairs: all-pairs ping-pong latency and bandwidth matrix (the HLRS communication
 * benchmark: a message passed between each pair of cores).
 * Every unordered pair of ranks {i, j}, i < j, is measured once, rank i starting a blocking
 * ping-pong (MPI_Send/MPI_Recv) with rank j, while all other ranks wait in MPI_Barrier:
 *   latency   = half the average round trip of LAT_SIZE-byte messages (us),
 *   bandwidth = BW_SIZE bytes / half the average round trip of BW_SIZE-byte messages
 *               (MB/s, 1 MB = 10^6 bytes).
 * Output: a header with the parameters and each rank's host, a text heat map of each matrix
 * (darker = slower), and one machine-readable row per pair:
 *   PAIR src dst latency_us bandwidth_MBps
 * Every received message is checked (and every byte of the last one of each measurement).
 * usage: nm-pairs [-s LAT_SIZE] [-i LAT_ITER] [-x LAT_WARMUP] [-S BW_SIZE] [-I BW_ITER]
 *                 [-X BW_WARMUP] [-h] */
#include "osu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char nm_pairs_shades[] = ".:;=+*#%@"; /* no "-": that marks the diagonal */

struct nm_pairs_opts {
    long lat_size, lat_iters, lat_warmup, bw_size, bw_iters, bw_warmup;
};

static void nm_pairs_usage(FILE *f)
{
    fprintf(f, "usage: nm-pairs [options]\n"
               "All-pairs ping-pong latency and bandwidth matrix (each unordered pair once).\n"
               "options:\n"
               "  -s LAT_SIZE    latency message size in bytes (default 4)\n"
               "  -i LAT_ITER    latency round trips per pair (default 10000)\n"
               "  -x LAT_WARMUP  untimed latency round trips per pair (default 100)\n"
               "  -S BW_SIZE     bandwidth message size in bytes (default 1048576)\n"
               "  -I BW_ITER     bandwidth round trips per pair (default 50)\n"
               "  -X BW_WARMUP   untimed bandwidth round trips per pair (default 5)\n"
               "  -h             this help\n"
               "Received data is always validated; a mismatch exits with status 1.\n");
}

/* -1 to go on, else the exit status. */
static int nm_pairs_options(int argc, char **argv, int rank, struct nm_pairs_opts *p)
{
    p->lat_size = 4, p->lat_iters = 10000, p->lat_warmup = 100;
    p->bw_size = 1L << 20, p->bw_iters = 50, p->bw_warmup = 5;
    opterr = 0;
    optind = 1;
    int opt;
    while ((opt = getopt(argc, argv, ":hs:i:x:S:I:X:")) != -1) {
        if (opt == 'h') {
            if (rank == 0)
                nm_pairs_usage(stdout);
            return 0;
        }
        if (opt == ':' || opt == '?') {
            if (rank == 0) {  /* the reason last: launchers and nearmetal quote the last line */
                nm_pairs_usage(stderr);
                fprintf(stderr, "nm-pairs: %s [-%c]\n", opt == ':' ? "option needs a value" : "invalid option", optopt);
            }
            return 2;
        }
        long v = nm_osu_number(optarg);
        long lo = (opt == 'i' || opt == 'I') ? 1 : 0;
        if (v < lo || v > ((opt == 's' || opt == 'S') ? NM_OSU_MAX_MSG_LIMIT : 1000000000L)) {
            if (rank == 0) {
                nm_pairs_usage(stderr);
                fprintf(stderr, "nm-pairs: invalid value [-%c %s]\n", opt, optarg);
            }
            return 2;
        }
        switch (opt) {
        case 's': p->lat_size = v; break;
        case 'i': p->lat_iters = v; break;
        case 'x': p->lat_warmup = v; break;
        case 'S': p->bw_size = v; break;
        case 'I': p->bw_iters = v; break;
        default: p->bw_warmup = v; break;
        }
    }
    if (optind < argc) {
        if (rank == 0) {
            nm_pairs_usage(stderr);
            fprintf(stderr, "nm-pairs: unexpected argument '%s'\n", argv[optind]);
        }
        return 2;
    }
    return -1;
}

/* One ping-pong measurement with `peer`; the initiator's elapsed time of the timed round
 * trips (s); *bad set when a received message is wrong. */
static double nm_pairs_pingpong(const struct nm_osu_opts *o, int peer, int initiator, char *s, char *r,
                                long size, long iters, long warmup, int *bad)
{
    int my_seed = nm_osu_seed(o->rank, peer, size), peer_seed = nm_osu_seed(peer, o->rank, size);
    int victim = o->nranks - 1;
    double t_start = 0.0;
    int was_bad = *bad;
    nm_osu_fill(s, size, my_seed);
    for (long i = 0; i < iters + warmup; i++) {
        if (i == warmup)
            t_start = MPI_Wtime();
        nm_osu_mark(s, size, my_seed, i);
        if (initiator) {
            MPI_Send(s, (int)size, MPI_CHAR, peer, 7, MPI_COMM_WORLD);
            MPI_Recv(r, (int)size, MPI_CHAR, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(r, (int)size, MPI_CHAR, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        nm_osu_corrupt(r, size, NM_OSU_SITE_MESSAGE, victim);
        if (!*bad)
            *bad = nm_osu_verify(o, r, size, size, peer_seed, i, 0);
        if (!initiator)
            MPI_Send(s, (int)size, MPI_CHAR, peer, 7, MPI_COMM_WORLD);
    }
    double elapsed = MPI_Wtime() - t_start;
    nm_osu_corrupt(r, size, NM_OSU_SITE_FULL, victim);
    if (!*bad)
        *bad = nm_osu_verify(o, r, size, size, peer_seed, iters + warmup - 1, 1);
    if (*bad && !was_bad)
        fprintf(stderr, "nm-pairs: rank %d: the wrong message came from rank %d\n", o->rank, peer);
    return elapsed;
}

/* Text heat map of an n x n matrix (upper triangle measured, mirrored). */
static void nm_pairs_heatmap(const double *m, int n, const char *title, const char *fmt, int higher_is_slower)
{
    double lo = 0.0, hi = 0.0;
    int first = 1;
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++) {
            double v = m[a * n + b];
            if (first || v < lo)
                lo = v;
            if (first || v > hi)
                hi = v;
            first = 0;
        }
    int levels = (int)sizeof(nm_pairs_shades) - 2;  /* index of the last shade */
    printf("\n%s\n", title);
    printf("%6s", "rank");
    for (int b = 0; b < n; b++)
        printf(" %10d  ", b);
    printf("\n");
    for (int a = 0; a < n; a++) {
        printf("%6d", a);
        for (int b = 0; b < n; b++) {
            if (a == b) {
                printf(" %10s  ", "-");
                continue;
            }
            double v = a < b ? m[a * n + b] : m[b * n + a];
            double rel = hi > lo ? (v - lo) / (hi - lo) : 0.0;
            if (!higher_is_slower && hi > lo)
                rel = 1.0 - rel;
            int k = (int)(rel * levels + 0.5);
            printf(" ");
            printf(fmt, v);
            printf(" %c", nm_pairs_shades[k < 0 ? 0 : k > levels ? levels : k]);
        }
        printf("\n");
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    struct nm_osu_opts o;
    nm_osu_defaults(&o, "nm-pairs", "all-pairs ping-pong", NM_OSU_LAT);
    struct nm_pairs_opts p;
    int rc = nm_pairs_options(argc, argv, o.rank, &p);
    if (rc >= 0)
        nm_osu_exit(rc);
    nm_osu_require_ranks(&o, 2, 0);
    int rank = o.rank, n = o.nranks;

    long maxsize = p.lat_size > p.bw_size ? p.lat_size : p.bw_size;
    char *s = nm_osu_alloc(maxsize), *r = nm_osu_alloc(maxsize);
    double *lat = calloc((size_t)n * n, sizeof(double)), *bw = calloc((size_t)n * n, sizeof(double));
    double *lat0 = calloc((size_t)n * n, sizeof(double)), *bw0 = calloc((size_t)n * n, sizeof(double));
    char *hosts = calloc((size_t)n, MPI_MAX_PROCESSOR_NAME);
    char host[MPI_MAX_PROCESSOR_NAME];
    int hostlen = 0, bad = 0;
    if (!lat || !bw || !lat0 || !bw0 || !hosts)
        MPI_Abort(MPI_COMM_WORLD, 3);
    memset(host, 0, sizeof(host));
    MPI_Get_processor_name(host, &hostlen);
    MPI_Gather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, hosts, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, MPI_COMM_WORLD);

    MPI_Barrier(MPI_COMM_WORLD);
    for (int a = 0; a < n; a++) {
        for (int b = a + 1; b < n; b++) {
            if (rank == a || rank == b) {
                int initiator = rank == a, peer = initiator ? b : a;
                double t = nm_pairs_pingpong(&o, peer, initiator, s, r, p.lat_size, p.lat_iters, p.lat_warmup, &bad);
                if (initiator)
                    lat[a * n + b] = t * 1e6 / (2.0 * p.lat_iters);
                t = nm_pairs_pingpong(&o, peer, initiator, s, r, p.bw_size, p.bw_iters, p.bw_warmup, &bad);
                if (initiator)
                    bw[a * n + b] = (double)p.bw_size * 2.0 * p.bw_iters / t / 1e6;
            }
            MPI_Barrier(MPI_COMM_WORLD);
        }
    }
    nm_osu_agree(&o, -1, bad);
    MPI_Reduce(lat, lat0, n * n, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(bw, bw0, n * n, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);

    if (rank == 0) {
        printf("# nearmetal all-pairs ping-pong matrix (HLRS-style), %d ranks\n", n);
        printf("# pairs: ranks=%d order=unordered latency_size=%ld latency_iterations=%ld latency_warmup=%ld "
               "bandwidth_size=%ld bandwidth_iterations=%ld bandwidth_warmup=%ld\n",
               n, p.lat_size, p.lat_iters, p.lat_warmup, p.bw_size, p.bw_iters, p.bw_warmup);
        printf("# each unordered pair i<j is measured once, rank i starting the ping-pong, while all other "
               "ranks wait in MPI_Barrier\n");
        for (int k = 0; k < n; k++)
            printf("# rank %d host %.*s\n", k, MPI_MAX_PROCESSOR_NAME, hosts + (size_t)k * MPI_MAX_PROCESSOR_NAME);
        char title[200];
        snprintf(title, sizeof(title), "Latency (us), half round trip of %ld-byte messages; shade %s: lowest to highest",
                 p.lat_size, nm_pairs_shades);
        nm_pairs_heatmap(lat0, n, title, "%10.2f", 1);
        snprintf(title, sizeof(title), "Bandwidth (MB/s), %ld bytes / half round trip; shade %s: highest to lowest",
                 p.bw_size, nm_pairs_shades);
        nm_pairs_heatmap(bw0, n, title, "%10.1f", 0);
        printf("\n# PAIR src dst latency_us bandwidth_MBps\n");
        for (int a = 0; a < n; a++)
            for (int b = a + 1; b < n; b++)
                printf("PAIR %d %d %.3f %.2f\n", a, b, lat0[a * n + b], bw0[a * n + b]);
        fflush(stdout);
    }
    free(s);
    free(r);
    free(lat);
    free(bw);
    free(lat0);
    free(bw0);
    free(hosts);
    nm_osu_exit(0);
}
