/* nm-allreduce: OSU-compatible MPI_Allreduce latency (osu_allreduce, OMB 7).
 * Each iteration times one MPI_Allreduce (MPI_SUM) of SIZE bytes of MPI_FLOAT (SIZE/4
 * elements), followed by an untimed MPI_Barrier; each rank's average time per iteration,
 * then the average (and with -f the minimum and maximum) over ranks, in microseconds.
 * Sizes 4, 8, ... 1 MiB (sizes of no whole float are skipped, as OSU 7 does); 1000
 * iterations + 100 warm-up up to 8 KiB, 100 + 10 above.
 * Rank r contributes (r+1)*((k%7)+1) at element k, and (r+1)*((i%16)+1) at the first,
 * middle and last element in iteration i: all sums are small integers, exact in float.
 * Every rank checks those three elements of every result, and every element of the last
 * result of each size, against the expected sum.
 * usage: nm-allreduce [-m [MIN:]MAX] [-i ITER] [-x WARMUP] [-f] [-h] */
#include "osu.h"

#include <stdio.h>
#include <stdlib.h>

static float nm_allreduce_value(long count, long k, long i, double factor)
{
    if (k == 0 || k == count / 2 || k == count - 1)
        return (float)(factor * (double)((i % 16) + 1));
    return (float)(factor * (double)((k % 7) + 1));
}

static void nm_allreduce_mark(float *s, long count, long i, double factor)
{
    s[0] = s[count / 2] = s[count - 1] = nm_allreduce_value(count, 0, i, factor);
}

/* Checks every element (full) or the three marked ones; 1 if wrong (reported). */
static int nm_allreduce_check(const struct nm_osu_opts *o, const float *r, long count, long size, long i,
                              double total, int full)
{
    long marks[3] = {0, count / 2, count - 1};
    long n = full ? count : 3;
    for (long m = 0; m < n; m++) {
        long k = full ? m : marks[m];
        float want = nm_allreduce_value(count, k, i, total);
        if (r[k] != want) {
            fprintf(stderr, "%s: rank %d: wrong sum at message size %ld, element %ld: got %g, expected %g\n",
                    o->prog, o->rank, size, k, (double)r[k], (double)want);
            fflush(stderr);
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct nm_osu_opts o;
    nm_osu_init(&argc, &argv, &o, "nm-allreduce", "MPI Allreduce Latency Test", NM_OSU_COLL, 2, 0);

    int rank = o.rank, n = o.nranks, victim = n - 1;
    double mine = rank + 1, total = (double)n * (n + 1) / 2.0;
    float *s = nm_osu_alloc(o.max_size), *r = nm_osu_alloc(o.max_size);
    nm_osu_header(&o, "MPI_FLOAT");

    for (long size = o.min_size; size <= o.max_size; size = nm_osu_next_size(size)) {
        long count = size / (long)sizeof(float);
        if (count == 0)
            continue;
        long iters, skip;
        nm_osu_iters(&o, size, &iters, &skip);
        for (long k = 0; k < count; k++)
            s[k] = nm_allreduce_value(count, k, 0, mine);
        int bad = 0;
        double timer = 0.0, t_start, t_stop;
        MPI_Barrier(MPI_COMM_WORLD);
        for (long i = 0; i < iters + skip; i++) {
            nm_allreduce_mark(s, count, i, mine);
            t_start = MPI_Wtime();
            MPI_Allreduce(s, r, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            t_stop = MPI_Wtime();
            MPI_Barrier(MPI_COMM_WORLD);
            nm_osu_corrupt(r, size, NM_OSU_SITE_MESSAGE, victim);
            if (!bad)
                bad = nm_allreduce_check(&o, r, count, size, i, total, 0);
            if (i >= skip)
                timer += t_stop - t_start;
            if (i + 1 == skip)  /* the first size's warm-up time floor */
                skip = nm_osu_warmup(&o, skip);
        }
        nm_osu_corrupt(r, size, NM_OSU_SITE_FULL, victim);
        if (!bad)
            bad = nm_allreduce_check(&o, r, count, size, iters + skip - 1, total, 1);
        nm_osu_agree(&o, size, bad);
        double avg, min, max;
        nm_osu_coll_stats(timer * 1e6 / iters, &avg, &min, &max);
        nm_osu_row_coll(&o, size, avg, min, max, iters);
    }
    free(s);
    free(r);
    nm_osu_exit(0);
}
