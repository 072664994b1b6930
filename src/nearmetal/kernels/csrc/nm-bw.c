/* nm-bw: OSU-compatible point-to-point bandwidth (osu_bw, OMB 7).
 * Exactly 2 ranks. Per iteration rank 0 posts a window of 64 MPI_Isend and MPI_Waitall,
 * then waits for a 4-byte acknowledgement; rank 1 posts 64 MPI_Irecv, MPI_Waitall, and
 * sends the acknowledgement. Every iteration is timed on rank 0; bandwidth in MB/s
 * (1 MB = 10^6 bytes) = size * window * iterations / time.
 * Sizes 1, 2, 4, ... 4 MiB; 100 iterations + 10 warm-up up to 8 KiB, 20 + 2 above.
 * Rank 1 checks every window's data (and all of the last one of each size); rank 0 checks
 * every acknowledgement.
 * usage: nm-bw [-m [MIN:]MAX] [-i ITER] [-x WARMUP] [-W WINDOW] [-h] */
#include "osu.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    struct nm_osu_opts o;
    nm_osu_init(&argc, &argv, &o, "nm-bw", "MPI Bandwidth Test", NM_OSU_BW, 2, 2);

    const int victim = 1;
    int rank = o.rank, window = o.window;
    /* As OSU's default (single buffer): every message of a window uses the same buffer. */
    char *s = nm_osu_alloc(o.max_size), *r = nm_osu_alloc(o.max_size);
    MPI_Request *req = malloc(sizeof(MPI_Request) * (size_t)window);
    MPI_Status *stat = malloc(sizeof(MPI_Status) * (size_t)window);  /* OSU passes statuses too */
    if (!req || !stat)
        MPI_Abort(MPI_COMM_WORLD, 3);
    nm_osu_header(&o, "MPI_CHAR");

    for (long size = o.min_size; size <= o.max_size; size = nm_osu_next_size(size)) {
        long iters, skip;
        nm_osu_iters(&o, size, &iters, &skip);
        int seed = nm_osu_seed(0, 1, size);
        if (rank == 0)
            nm_osu_fill(s, size, seed);
        int bad = 0;
        double total = 0.0, t_start, t_end;
        MPI_Barrier(MPI_COMM_WORLD);
        for (long i = 0; i < iters + skip; i++) {
            int ack = 0;
            if (rank == 0) {
                nm_osu_mark(s, size, seed, i);
                t_start = MPI_Wtime();
                for (int j = 0; j < window; j++)
                    MPI_Isend(s, (int)size, MPI_CHAR, 1, 100, MPI_COMM_WORLD, req + j);
                MPI_Waitall(window, req, stat);
                MPI_Recv(&ack, 4, MPI_CHAR, 1, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                t_end = MPI_Wtime();
                if (i >= skip)
                    total += t_end - t_start;
                if (!bad && ack != (int)(i & 0x7fffffff)) {
                    nm_osu_report(&o, -1, "acknowledgement", 0, (unsigned)ack, (unsigned)i);
                    bad = 1;
                }
            } else {
                for (int j = 0; j < window; j++)
                    MPI_Irecv(r, (int)size, MPI_CHAR, 0, 100, MPI_COMM_WORLD, req + j);
                MPI_Waitall(window, req, stat);
                nm_osu_corrupt(r, size, NM_OSU_SITE_MESSAGE, victim);
                if (!bad)
                    bad = nm_osu_verify(&o, r, size, size, seed, i, 0);
                ack = (int)(i & 0x7fffffff);
                MPI_Send(&ack, 4, MPI_CHAR, 0, 101, MPI_COMM_WORLD);
            }
            if (i + 1 == skip)  /* the first size's warm-up time floor */
                skip = nm_osu_warmup(&o, skip);
        }
        if (rank == 1) {
            nm_osu_corrupt(r, size, NM_OSU_SITE_FULL, victim);
            if (!bad)
                bad = nm_osu_verify(&o, r, size, size, seed, iters + skip - 1, 1);
        }
        nm_osu_agree(&o, size, bad);
        nm_osu_row_value(&o, size, (double)size / 1e6 * (double)iters * window / total);
    }
    free(req);
    free(stat);
    free(s);
    free(r);
    nm_osu_exit(0);
}
