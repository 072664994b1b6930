/* nm-bcast: OSU-compatible MPI_Bcast latency (osu_bcast, OMB 7).
 * Each iteration times one MPI_Bcast of SIZE bytes (MPI_CHAR) from rank 0, followed by an
 * untimed MPI_Barrier; each rank's average time per iteration, then the average (and with
 * -f the minimum and maximum) over ranks, in microseconds.
 * Sizes 1, 2, 4, ... 1 MiB; 1000 iterations + 100 warm-up up to 8 KiB, 100 + 10 above.
 * Every non-root rank checks every broadcast (and all of the last one of each size).
 * usage: nm-bcast [-m [MIN:]MAX] [-i ITER] [-x WARMUP] [-f] [-h] */
#include "osu.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    struct nm_osu_opts o;
    nm_osu_init(&argc, &argv, &o, "nm-bcast", "MPI Broadcast Latency Test", NM_OSU_COLL, 2, 0);

    const int root = 0;
    int rank = o.rank, victim = o.nranks - 1;
    char *buf = nm_osu_alloc(o.max_size);
    nm_osu_header(&o, "MPI_CHAR");

    for (long size = o.min_size; size <= o.max_size; size = nm_osu_next_size(size)) {
        long iters, skip;
        nm_osu_iters(&o, size, &iters, &skip);
        int seed = nm_osu_seed(root, -1, size);
        if (rank == root)
            nm_osu_fill(buf, size, seed);
        int bad = 0;
        double timer = 0.0, t_start, t_stop;
        MPI_Barrier(MPI_COMM_WORLD);
        for (long i = 0; i < iters + skip; i++) {
            if (rank == root)
                nm_osu_mark(buf, size, seed, i);
            t_start = MPI_Wtime();
            MPI_Bcast(buf, (int)size, MPI_CHAR, root, MPI_COMM_WORLD);
            t_stop = MPI_Wtime();
            MPI_Barrier(MPI_COMM_WORLD);
            if (rank != root) {
                nm_osu_corrupt(buf, size, NM_OSU_SITE_MESSAGE, victim);
                if (!bad)
                    bad = nm_osu_verify(&o, buf, size, size, seed, i, 0);
            }
            if (i >= skip)
                timer += t_stop - t_start;
            if (i + 1 == skip)  /* the first size's warm-up time floor */
                skip = nm_osu_warmup(&o, skip);
        }
        if (rank != root) {
            nm_osu_corrupt(buf, size, NM_OSU_SITE_FULL, victim);
            if (!bad)
                bad = nm_osu_verify(&o, buf, size, size, seed, iters + skip - 1, 1);
        }
        nm_osu_agree(&o, size, bad);
        double avg, min, max;
        nm_osu_coll_stats(timer * 1e6 / iters, &avg, &min, &max);
        nm_osu_row_coll(&o, size, avg, min, max, iters);
    }
    free(buf);
    nm_osu_exit(0);
}
