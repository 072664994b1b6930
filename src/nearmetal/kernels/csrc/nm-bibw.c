/* nm-bibw: OSU-compatible bidirectional bandwidth (osu_bibw, OMB 7).
 * Exactly 2 ranks, both sending and receiving a window of 64 messages at once: each rank
 * posts 64 MPI_Irecv, then 64 MPI_Isend, then waits for all. Every iteration is timed on
 * rank 0; bandwidth in MB/s (1 MB = 10^6 bytes) = 2 * size * window * iterations / time.
 * Sizes 1, 2, 4, ... 4 MiB; 100 iterations + 10 warm-up up to 8 KiB, 20 + 2 above.
 * Both ranks check every window's data (and all of the last one of each size).
 * usage: nm-bibw [-m [MIN:]MAX] [-i ITER] [-x WARMUP] [-W WINDOW] [-h] */
#include "osu.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    struct nm_osu_opts o;
    nm_osu_init(&argc, &argv, &o, "nm-bibw", "MPI Bi-Directional Bandwidth Test", NM_OSU_BW, 2, 2);

    const int victim = 1;
    int rank = o.rank, peer = 1 - o.rank, window = o.window;
    /* OSU tags: rank 0 -> 1 uses 100, rank 1 -> 0 uses 10. */
    int send_tag = rank == 0 ? 100 : 10, recv_tag = rank == 0 ? 10 : 100;
    char *s = nm_osu_alloc(o.max_size), *r = nm_osu_alloc(o.max_size);
    MPI_Request *sreq = malloc(sizeof(MPI_Request) * (size_t)window);
    MPI_Request *rreq = malloc(sizeof(MPI_Request) * (size_t)window);
    MPI_Status *stat = malloc(sizeof(MPI_Status) * (size_t)window);  /* OSU passes statuses too */
    if (!sreq || !rreq || !stat)
        MPI_Abort(MPI_COMM_WORLD, 3);
    nm_osu_header(&o, "MPI_CHAR");

    for (long size = o.min_size; size <= o.max_size; size = nm_osu_next_size(size)) {
        long iters, skip;
        nm_osu_iters(&o, size, &iters, &skip);
        int my_seed = nm_osu_seed(rank, peer, size), peer_seed = nm_osu_seed(peer, rank, size);
        nm_osu_fill(s, size, my_seed);
        int bad = 0;
        double total = 0.0, t_start = 0.0, t_end;
        MPI_Barrier(MPI_COMM_WORLD);
        for (long i = 0; i < iters + skip; i++) {
            nm_osu_mark(s, size, my_seed, i);
            if (rank == 0)
                t_start = MPI_Wtime();
            for (int j = 0; j < window; j++)
                MPI_Irecv(r, (int)size, MPI_CHAR, peer, recv_tag, MPI_COMM_WORLD, rreq + j);
            for (int j = 0; j < window; j++)
                MPI_Isend(s, (int)size, MPI_CHAR, peer, send_tag, MPI_COMM_WORLD, sreq + j);
            if (rank == 0) {
                MPI_Waitall(window, sreq, stat);
                MPI_Waitall(window, rreq, stat);
                t_end = MPI_Wtime();
                if (i >= skip)
                    total += t_end - t_start;
            } else {
                MPI_Waitall(window, rreq, stat);
                MPI_Waitall(window, sreq, stat);
            }
            nm_osu_corrupt(r, size, NM_OSU_SITE_MESSAGE, victim);
            if (!bad)
                bad = nm_osu_verify(&o, r, size, size, peer_seed, i, 0);
            if (i + 1 == skip)  /* the first size's warm-up time floor */
                skip = nm_osu_warmup(&o, skip);
        }
        nm_osu_corrupt(r, size, NM_OSU_SITE_FULL, victim);
        if (!bad)
            bad = nm_osu_verify(&o, r, size, size, peer_seed, iters + skip - 1, 1);
        nm_osu_agree(&o, size, bad);
        nm_osu_row_value(&o, size, (double)size / 1e6 * (double)iters * window * 2.0 / total);
    }
    free(sreq);
    free(rreq);
    free(stat);
    free(s);
    free(r);
    nm_osu_exit(0);
}
