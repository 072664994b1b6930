/* nm-barrier: OSU-compatible MPI_Barrier latency (osu_barrier, OMB 7).
 * Each iteration times one MPI_Barrier; each rank's average time per iteration, then the
 * average (and with -f the minimum and maximum) over ranks, in microseconds. No size
 * column. 1000 iterations + 100 warm-up.
 * A barrier carries no data, so after the timed loop an untimed check proves it
 * synchronizes: in each of 10 rounds every rank but 0 sends rank 0 a token after leaving
 * the barrier, and rank 0 checks that no token of the round has arrived before it entered
 * the barrier, then receives and checks every token.
 * usage: nm-barrier [-i ITER] [-x WARMUP] [-f] [-h] */
#include "osu.h"

#include <stdio.h>
#include <stdlib.h>

#define NM_BARRIER_ROUNDS 10
#define NM_BARRIER_TAG 1000

static int nm_barrier_token(int round, int rank)
{
    return round * 100003 + rank * 7 + 1;
}

int main(int argc, char **argv)
{
    struct nm_osu_opts o;
    nm_osu_init(&argc, &argv, &o, "nm-barrier", "MPI Barrier Latency Test", NM_OSU_BARRIER, 2, 0);
    int rank = o.rank, n = o.nranks;
    const int victim = 0;  /* rank 0 receives the tokens */
    nm_osu_header(&o, NULL);

    long iters, skip;
    nm_osu_iters(&o, 0, &iters, &skip);
    double timer = 0.0, t_start, t_stop;
    MPI_Barrier(MPI_COMM_WORLD);
    for (long i = 0; i < iters + skip; i++) {
        t_start = MPI_Wtime();
        MPI_Barrier(MPI_COMM_WORLD);
        t_stop = MPI_Wtime();
        if (i >= skip)
            timer += t_stop - t_start;
        if (i + 1 == skip)  /* the warm-up time floor */
            skip = nm_osu_warmup(&o, skip);
    }

    int bad = 0;
    for (int round = 0; round < NM_BARRIER_ROUNDS; round++) {
        int tag = NM_BARRIER_TAG + round;
        if (rank == 0) {
            int early = 0;
            MPI_Iprobe(MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &early, MPI_STATUS_IGNORE);
            if (early && !bad) {
                fprintf(stderr, "%s: rank 0: a token of round %d arrived before rank 0 entered the barrier\n",
                        o.prog, round);
                bad = 1;
            }
            MPI_Barrier(MPI_COMM_WORLD);
            for (int src = 1; src < n; src++) {
                int token = -1;
                MPI_Recv(&token, 1, MPI_INT, src, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                nm_osu_corrupt(&token, (long)sizeof(token), NM_OSU_SITE_MESSAGE, victim);
                nm_osu_corrupt(&token, (long)sizeof(token), NM_OSU_SITE_FULL, victim);
                if (!bad && token != nm_barrier_token(round, src)) {
                    nm_osu_report(&o, -1, "barrier token", 0, (unsigned)token,
                                  (unsigned)nm_barrier_token(round, src));
                    bad = 1;
                }
            }
        } else {
            MPI_Barrier(MPI_COMM_WORLD);
            int token = nm_barrier_token(round, rank);
            MPI_Send(&token, 1, MPI_INT, 0, tag, MPI_COMM_WORLD);
        }
    }
    nm_osu_agree(&o, -1, bad);

    double avg, min, max;
    nm_osu_coll_stats(timer * 1e6 / iters, &avg, &min, &max);
    nm_osu_row_coll(&o, 0, avg, min, max, iters);
    nm_osu_exit(0);
}
