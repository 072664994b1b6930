/* nm-alltoall: OSU-compatible MPI_Alltoall latency (osu_alltoall, OMB 7: "All-to-All
 * Personalized Exchange"). Each iteration times one MPI_Alltoall of SIZE bytes to every
 * rank (MPI_CHAR), followed by an untimed MPI_Barrier; each rank's average time per
 * iteration, then the average (and with -f the minimum and maximum) over ranks, in us.
 * Sizes 1, 2, 4, ... 1 MiB; 1000 iterations + 100 warm-up up to 8 KiB, 100 + 10 above.
 * Every rank checks every received block (and all of the last result of each size).
 * usage: nm-alltoall [-m [MIN:]MAX] [-i ITER] [-x WARMUP] [-f] [-h] */
#include "osu.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    struct nm_osu_opts o;
    nm_osu_init(&argc, &argv, &o, "nm-alltoall", "MPI All-to-All Personalized Exchange Latency Test", NM_OSU_COLL, 2, 0);

    int rank = o.rank, n = o.nranks, victim = n - 1;
    char *s = nm_osu_alloc(o.max_size * n), *r = nm_osu_alloc(o.max_size * n);
    nm_osu_header(&o, "MPI_CHAR");

    for (long size = o.min_size; size <= o.max_size; size = nm_osu_next_size(size)) {
        long iters, skip;
        nm_osu_iters(&o, size, &iters, &skip);
        /* Block j of rank r's send buffer goes to rank j: its pattern names both. */
        for (int j = 0; j < n; j++)
            nm_osu_fill(s + (long)j * size, size, nm_osu_seed(rank, j, size));
        int bad = 0;
        double timer = 0.0, t_start, t_stop;
        MPI_Barrier(MPI_COMM_WORLD);
        for (long i = 0; i < iters + skip; i++) {
            for (int j = 0; j < n; j++)
                nm_osu_mark(s + (long)j * size, size, nm_osu_seed(rank, j, size), i);
            t_start = MPI_Wtime();
            MPI_Alltoall(s, (int)size, MPI_CHAR, r, (int)size, MPI_CHAR, MPI_COMM_WORLD);
            t_stop = MPI_Wtime();
            MPI_Barrier(MPI_COMM_WORLD);
            nm_osu_corrupt(r, size, NM_OSU_SITE_MESSAGE, victim);
            for (int j = 0; j < n && !bad; j++)
                bad = nm_osu_verify(&o, r + (long)j * size, size, size, nm_osu_seed(j, rank, size), i, 0);
            if (i >= skip)
                timer += t_stop - t_start;
            if (i + 1 == skip)  /* the first size's warm-up time floor */
                skip = nm_osu_warmup(&o, skip);
        }
        nm_osu_corrupt(r, size * n, NM_OSU_SITE_FULL, victim);
        for (int j = 0; j < n && !bad; j++)
            bad = nm_osu_verify(&o, r + (long)j * size, size, size, nm_osu_seed(j, rank, size), iters + skip - 1, 1);
        nm_osu_agree(&o, size, bad);
        double avg, min, max;
        nm_osu_coll_stats(timer * 1e6 / iters, &avg, &min, &max);
        nm_osu_row_coll(&o, size, avg, min, max, iters);
    }
    free(s);
    free(r);
    nm_osu_exit(0);
}
