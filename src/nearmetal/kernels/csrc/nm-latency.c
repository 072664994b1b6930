/* nm-latency: OSU-compatible point-to-point latency (osu_latency, OMB 7).
 * Blocking ping-pong between exactly 2 ranks: rank 0 MPI_Send then MPI_Recv, rank 1
 * MPI_Recv then MPI_Send; MPI_Barrier before each size; every iteration is timed on rank 0
 * and the latency is half the average round trip, in microseconds.
 * Sizes 0, 1, 2, 4, ... 4 MiB; 10000 iterations + 100 warm-up up to 8 KiB, 1000 + 10 above.
 * Both ranks check every received message (and all of the last one of each size).
 * usage: nm-latency [-m [MIN:]MAX] [-i ITER] [-x WARMUP] [-h] */
#include "osu.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    struct nm_osu_opts o;
    nm_osu_init(&argc, &argv, &o, "nm-latency", "MPI Latency Test", NM_OSU_LAT, 2, 2);

    const int victim = 1;  /* NM_CORRUPT: the rank that flips a received byte */
    int rank = o.rank, peer = 1 - o.rank;
    char *s = nm_osu_alloc(o.max_size), *r = nm_osu_alloc(o.max_size);
    nm_osu_header(&o, "MPI_CHAR");

    for (long size = o.min_size; size <= o.max_size; size = nm_osu_next_size(size)) {
        long iters, skip;
        nm_osu_iters(&o, size, &iters, &skip);
        int my_seed = nm_osu_seed(rank, peer, size), peer_seed = nm_osu_seed(peer, rank, size);
        nm_osu_fill(s, size, my_seed);
        int bad = 0;
        double total = 0.0, t_start, t_end;
        MPI_Barrier(MPI_COMM_WORLD);
        for (long i = 0; i < iters + skip; i++) {
            nm_osu_mark(s, size, my_seed, i);
            if (rank == 0) {
                t_start = MPI_Wtime();
                MPI_Send(s, (int)size, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
                MPI_Recv(r, (int)size, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                t_end = MPI_Wtime();
                if (i >= skip)
                    total += t_end - t_start;
            } else {
                MPI_Recv(r, (int)size, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
            nm_osu_corrupt(r, size, NM_OSU_SITE_MESSAGE, victim);
            if (!bad)
                bad = nm_osu_verify(&o, r, size, size, peer_seed, i, 0);
            if (rank == 1)
                MPI_Send(s, (int)size, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
            if (i + 1 == skip)  /* the first size's warm-up time floor */
                skip = nm_osu_warmup(&o, skip);
        }
        /* The last message of this size, every byte (after the timed loop). */
        nm_osu_corrupt(r, size, NM_OSU_SITE_FULL, victim);
        if (!bad)
            bad = nm_osu_verify(&o, r, size, size, peer_seed, iters + skip - 1, 1);
        nm_osu_agree(&o, size, bad);
        nm_osu_row_value(&o, size, total * 1e6 / (2.0 * iters));
    }
    free(s);
    free(r);
    nm_osu_exit(0);
}
