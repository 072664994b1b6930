/* nm-allgather: OSU-compatible MPI_Allgather latency (osu_allgather, OMB 7).
 * Each iteration times one MPI_Allgather of SIZE bytes per rank (MPI_CHAR), followed by an
 * untimed MPI_Barrier; each rank's average time per iteration, then the average (and with -f
 * the minimum and maximum) over ranks, in microseconds.
 * Sizes 1, 2, 4, ... 1 MiB; 1000 iterations + 100 warm-up up to 8 KiB, 100 + 10 above.
 * Every rank checks every gathered block (and all of the last result of each size).
 * usage: nm-allgather [-m [MIN:]MAX] [-i ITER] [-x WARMUP] [-f] [-h] */
#include "osu.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    struct nm_osu_opts o;
    nm_osu_init(&argc, &argv, &o, "nm-allgather", "MPI Allgather Latency Test", NM_OSU_COLL, 2, 0);

    int rank = o.rank, n = o.nranks, victim = n - 1;
    char *s = nm_osu_alloc(o.max_size), *r = nm_osu_alloc(o.max_size * n);
    nm_osu_header(&o, "MPI_CHAR");

    for (long size = o.min_size; size <= o.max_size; size = nm_osu_next_size(size)) {
        long iters, skip;
        nm_osu_iters(&o, size, &iters, &skip);
        nm_osu_fill(s, size, nm_osu_seed(rank, -1, size));
        int bad = 0;
        double timer = 0.0, t_start, t_stop;
        MPI_Barrier(MPI_COMM_WORLD);
        for (long i = 0; i < iters + skip; i++) {
            nm_osu_mark(s, size, nm_osu_seed(rank, -1, size), i);
            t_start = MPI_Wtime();
            MPI_Allgather(s, (int)size, MPI_CHAR, r, (int)size, MPI_CHAR, MPI_COMM_WORLD);
            t_stop = MPI_Wtime();
            MPI_Barrier(MPI_COMM_WORLD);
            nm_osu_corrupt(r, size, NM_OSU_SITE_MESSAGE, victim);
            for (int j = 0; j < n && !bad; j++)
                bad = nm_osu_verify(&o, r + (long)j * size, size, size, nm_osu_seed(j, -1, size), i, 0);
            if (i >= skip)
                timer += t_stop - t_start;
            if (i + 1 == skip)  /* the first size's warm-up time floor */
                skip = nm_osu_warmup(&o, skip);
        }
        nm_osu_corrupt(r, size * n, NM_OSU_SITE_FULL, victim);
        for (int j = 0; j < n && !bad; j++)
            bad = nm_osu_verify(&o, r + (long)j * size, size, size, nm_osu_seed(j, -1, size), iters + skip - 1, 1);
        nm_osu_agree(&o, size, bad);
        double avg, min, max;
        nm_osu_coll_stats(timer * 1e6 / iters, &avg, &min, &max);
        nm_osu_row_coll(&o, size, avg, min, max, iters);
    }
    free(s);
    free(r);
    nm_osu_exit(0);
}
