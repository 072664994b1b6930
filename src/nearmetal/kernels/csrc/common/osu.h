/* Shared code of nearmetal's OSU-compatible MPI micro-benchmarks (nm-latency, nm-bw,
 * nm-bibw, nm-allgather, nm-alltoall, nm-allreduce, nm-bcast, nm-barrier) and of the
 * all-pairs matrix (nm-pairs): OSU Micro-Benchmarks 7.x options, defaults and output
 * formats, plus the data validation every kernel does.
 *
 * This file is linked into every kernel: every symbol is prefixed nm_osu_. */
#ifndef NM_OSU_H
#define NM_OSU_H

#include <mpi.h>

/* OSU 7 conventions (osu_util.h), but one more decimal: OSU prints 2, and at 0.19 us a step
 * of 0.01 us is 5%, more than a study's equivalence margin (3%): A/A points could not be
 * decided for rounding alone. Same columns and widths, so OSU parsers still read it. */
#define NM_OSU_FIELD_WIDTH 18
#define NM_OSU_FLOAT_PRECISION 3
#define NM_OSU_LARGE_MESSAGE_SIZE 8192L
#define NM_OSU_MAX_MSG_PT2PT (1L << 22)  /* 4 MiB */
#define NM_OSU_MAX_MSG_COLL (1L << 20)   /* 1 MiB */
#define NM_OSU_MAX_MSG_LIMIT (1L << 30)  /* what -m accepts at most */
#define NM_OSU_WINDOW 64
/* Warm-up time floor (see nm_osu_warmup): the run's first size warms up for at least this
 * long unless -x was given; NM_OSU_WARMUP_MS in rank 0's environment overrides it (0: none). */
#define NM_OSU_WARMUP_MIN_S 0.2

enum nm_osu_kind {
    NM_OSU_LAT,     /* pt2pt latency: sizes from 0, 10000/100 and 1000/10 iterations */
    NM_OSU_BW,      /* pt2pt bandwidth: sizes from 1, 100/10 and 20/2 iterations, window */
    NM_OSU_COLL,    /* collective with a size: 1000/100 and 100/10 iterations, -f */
    NM_OSU_BARRIER  /* collective without a size: 1000/100 iterations, -f, no -m */
};

/* NM_CORRUPT=1 corrupts a received message (first check), =2 the final whole-buffer check. */
enum nm_osu_site { NM_OSU_SITE_MESSAGE = 1, NM_OSU_SITE_FULL = 2 };

struct nm_osu_opts {
    const char *prog;   /* program name, e.g. "nm-latency" */
    const char *title;  /* e.g. "MPI Latency Test" */
    enum nm_osu_kind kind;
    long min_size, max_size;
    long iters, iters_large, skip, skip_large;
    int full;           /* -f (collectives): min, max, iterations columns */
    int window;         /* -W (bandwidth) */
    double warm_min;    /* warm-up time floor of the run's first size, seconds; 0: none (-x given, or done) */
    double warm_t0;     /* MPI_Wtime when the first size's warm-up began */
    int rank, nranks;
};

/* Defaults of a kind; also fills rank and nranks (MPI must be initialized). */
void nm_osu_defaults(struct nm_osu_opts *o, const char *prog, const char *title, enum nm_osu_kind kind);
/* Parses -m [MIN:]MAX, -i, -x, -f, -W, -h as OSU does. Returns -1 to go on; otherwise the
 * exit status (0 after -h, 2 after a usage error, already reported on rank 0's stderr). */
int nm_osu_options(int argc, char **argv, struct nm_osu_opts *o);
/* A non-negative decimal integer (the whole string); -1 if not one. */
long nm_osu_number(const char *s);
/* MPI_Finalize, then exit(code). */
void nm_osu_exit(int code) __attribute__((noreturn));
/* Refuses (message on rank 0, exit 2 after MPI_Finalize) a rank count outside min..max (max 0: any). */
void nm_osu_require_ranks(const struct nm_osu_opts *o, int min, int max);
/* The whole start of every OSU kernel: MPI_Init, defaults, options (usage errors exit),
 * and the rank-count check (max 0: no upper limit). */
void nm_osu_init(int *argc, char ***argv, struct nm_osu_opts *o, const char *prog, const char *title,
                 enum nm_osu_kind kind, int min_ranks, int max_ranks);
/* Page-aligned buffer of at least n bytes (never NULL: aborts with a message). */
void *nm_osu_alloc(long n);

/* Sizes: min, then doubling (0 -> 1), as OSU's loop. */
long nm_osu_next_size(long size);
/* Iterations and warm-up for a size (OSU: the large values above LARGE_MESSAGE_SIZE); the
 * first call also starts the clock of the warm-up time floor. */
void nm_osu_iters(struct nm_osu_opts *o, long size, long *iters, long *skip);
/* The warm-up time floor. OSU warms up every size with a fixed count of iterations, which a
 * full sweep can afford (the smaller sizes before a size warm the process up for it) but a
 * run restricted to one size cannot: it reads lower than the same size in a full sweep. So,
 * unless -x was given (then the warm-up is exactly OSU's), the run's first size goes on
 * warming up past its iterations until warm_min seconds have passed since its first warm-up
 * iteration; later sizes get OSU's count only. Every rank calls it right after the last
 * warm-up iteration (i + 1 == skip) and continues with the count it returns:
 *     if (i + 1 == skip) skip = nm_osu_warmup(&o, skip);
 * Collective (one MPI_Bcast of rank 0's decision) while the floor is pending, then free. */
long nm_osu_warmup(struct nm_osu_opts *o, long skip);

/* Output, rank 0 only (the functions check). */
void nm_osu_header(const struct nm_osu_opts *o, const char *datatype);
void nm_osu_row_value(const struct nm_osu_opts *o, long size, double value);
void nm_osu_row_coll(const struct nm_osu_opts *o, long size, double avg, double min, double max, long iters);
/* OSU's statistics of a collective: each rank's average latency (us), then avg/min/max over ranks on rank 0. */
void nm_osu_coll_stats(double latency_us, double *avg, double *min, double *max);

/* Validation. A message from a sender carries a fixed pattern (nm_osu_fill, by seed) whose
 * first, middle and last bytes are overwritten every iteration (nm_osu_mark, by seed and
 * iteration): the receiver checks those three bytes of every message (cheap, so timing is
 * unaffected), and every byte of the last message of each size after the timed loop. */
int nm_osu_seed(int from, int to, long size);
void nm_osu_fill(void *buf, long n, int seed);
void nm_osu_mark(void *buf, long n, int seed, long it);
unsigned char nm_osu_expected(long n, long pos, int seed, long it);
/* -1 when right, else the offset of the first wrong byte. */
long nm_osu_check_marks(const void *buf, long n, int seed, long it);
long nm_osu_check_full(const void *buf, long n, int seed, long it);
/* Checks a received block of n bytes (its marks, or every byte when full), reports the first
 * wrong byte (naming `size`, the message size) and returns 1 if wrong, else 0. */
int nm_osu_verify(const struct nm_osu_opts *o, const void *buf, long n, long size, int seed, long it, int full);
/* Test hook: with NM_CORRUPT=site in the environment, rank `victim` flips one byte of buf
 * (once per process) where it checks received data at that site. */
void nm_osu_corrupt(void *buf, long n, enum nm_osu_site site, int victim);
/* Reports a wrong byte on stderr (every rank that finds one; first one per size). */
void nm_osu_report(const struct nm_osu_opts *o, long size, const char *what, long offset,
                   unsigned got, unsigned expected);
/* All ranks agree whether any rank saw wrong data for this size; if so rank 0 says so and
 * every rank leaves with exit status 1 (after MPI_Finalize). */
void nm_osu_agree(const struct nm_osu_opts *o, long size, int bad);

#endif
