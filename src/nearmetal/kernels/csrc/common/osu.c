/* Shared code of the OSU-compatible kernels: see osu.h. Every symbol is prefixed nm_osu_
 * because this file is linked into every nearmetal kernel. */
#include "osu.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void nm_osu_defaults(struct nm_osu_opts *o, const char *prog, const char *title, enum nm_osu_kind kind)
{
    memset(o, 0, sizeof(*o));
    o->prog = prog;
    o->title = title;
    o->kind = kind;
    o->window = NM_OSU_WINDOW;
    o->warm_min = NM_OSU_WARMUP_MIN_S;
    const char *ms = getenv("NM_OSU_WARMUP_MS");
    if (ms && nm_osu_number(ms) >= 0)
        o->warm_min = (double)nm_osu_number(ms) / 1e3;
    MPI_Comm_rank(MPI_COMM_WORLD, &o->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &o->nranks);
    switch (kind) {
    case NM_OSU_LAT:  /* LAT_LOOP_SMALL/LAT_SKIP_SMALL, LAT_LOOP_LARGE/LAT_SKIP_LARGE */
        o->min_size = 0, o->max_size = NM_OSU_MAX_MSG_PT2PT;
        o->iters = 10000, o->skip = 100, o->iters_large = 1000, o->skip_large = 10;
        break;
    case NM_OSU_BW:   /* BW_LOOP_SMALL/BW_SKIP_SMALL, BW_LOOP_LARGE/BW_SKIP_LARGE */
        o->min_size = 1, o->max_size = NM_OSU_MAX_MSG_PT2PT;
        o->iters = 100, o->skip = 10, o->iters_large = 20, o->skip_large = 2;
        break;
    case NM_OSU_COLL: /* COLL_LOOP_SMALL/COLL_SKIP_SMALL, COLL_LOOP_LARGE/COLL_SKIP_LARGE */
    case NM_OSU_BARRIER:
        o->min_size = 1, o->max_size = NM_OSU_MAX_MSG_COLL;
        o->iters = 1000, o->skip = 100, o->iters_large = 100, o->skip_large = 10;
        break;
    }
}

/* The defaults of o's kind (usage shows them, not what a bad command line half set). */
static void nm_osu_usage(const struct nm_osu_opts *cur, FILE *f)
{
    struct nm_osu_opts d, *o = &d;
    nm_osu_defaults(&d, cur->prog, cur->title, cur->kind);
    fprintf(f, "usage: %s [options]\n", o->prog);
    fprintf(f, "nearmetal OSU-compatible %s (OSU Micro-Benchmarks 7 method and output format)\n", o->title);
    fprintf(f, "options:\n");
    if (o->kind == NM_OSU_BARRIER) {
        fprintf(f, "  -i ITER       timed iterations (default %ld)\n", o->iters);
        fprintf(f, "  -x WARMUP     untimed warm-up iterations (default %ld; without -x also at least %.0f ms)\n",
                o->skip, o->warm_min * 1e3);
    } else {
        fprintf(f, "  -m [MIN:]MAX  message sizes in bytes: MIN (default %ld), then doubling up to MAX (default %ld);\n"
                   "                -m MIN: sets only MIN, -m :MAX or -m MAX only MAX\n",
                o->min_size, o->max_size);
        fprintf(f, "  -i ITER       timed iterations per size (default %ld, %ld above %ld bytes)\n",
                o->iters, o->iters_large, NM_OSU_LARGE_MESSAGE_SIZE);
        fprintf(f, "  -x WARMUP     untimed warm-up iterations per size (default %ld, %ld above %ld bytes);\n"
                   "                without -x the first size warms up for at least %.0f ms too\n",
                o->skip, o->skip_large, NM_OSU_LARGE_MESSAGE_SIZE, o->warm_min * 1e3);
    }
    if (o->kind == NM_OSU_BW)
        fprintf(f, "  -W WINDOW     messages in flight per iteration (default %d)\n", NM_OSU_WINDOW);
    if (o->kind == NM_OSU_COLL || o->kind == NM_OSU_BARRIER)
        fprintf(f, "  -f            full output: also min and max latency over ranks, and iterations\n");
    fprintf(f, "  -h            this help\n");
    fprintf(f, "Received data is always validated; a mismatch exits with status 1.\n");
}

static int nm_osu_bad_usage(const struct nm_osu_opts *o, const char *msg, int opt, const char *arg)
{
    if (o->rank == 0) {  /* the reason last: launchers and nearmetal quote the last line */
        nm_osu_usage(o, stderr);
        if (arg)
            fprintf(stderr, "%s: %s [-%c %s]\n", o->prog, msg, opt, arg);
        else
            fprintf(stderr, "%s: %s [-%c]\n", o->prog, msg, opt);
        fflush(stderr);
    }
    return 2;
}

long nm_osu_number(const char *s)
{
    if (!s || !*s || *s == '-' || *s == '+')
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*end || errno)
        return -1;
    return v;
}

static int nm_osu_sizes(struct nm_osu_opts *o, const char *arg)
{
    const char *colon = strchr(arg, ':');
    if (!colon) {
        long v = nm_osu_number(arg);
        if (v < 0)
            return -1;
        o->max_size = v;
        return 0;
    }
    if (strchr(colon + 1, ':'))
        return -1;
    char lo[32];
    size_t len = (size_t)(colon - arg);
    if (len >= sizeof(lo))
        return -1;
    memcpy(lo, arg, len);
    lo[len] = 0;
    if (len == 0 && !colon[1])
        return -1;
    if (len) {
        long v = nm_osu_number(lo);
        if (v < 0)
            return -1;
        o->min_size = v;
    }
    if (colon[1]) {
        long v = nm_osu_number(colon + 1);
        if (v < 0)
            return -1;
        o->max_size = v;
    }
    return 0;
}

int nm_osu_options(int argc, char **argv, struct nm_osu_opts *o)
{
    const char *optstring;
    switch (o->kind) {
    case NM_OSU_LAT: optstring = ":hm:i:x:"; break;
    case NM_OSU_BW: optstring = ":hm:i:x:W:"; break;
    case NM_OSU_COLL: optstring = ":hfm:i:x:"; break;
    default: optstring = ":hfi:x:"; break;
    }
    opterr = 0;
    optind = 1;
    int opt;
    long v;
    while ((opt = getopt(argc, argv, optstring)) != -1) {
        switch (opt) {
        case 'h':
            if (o->rank == 0) {
                nm_osu_usage(o, stdout);
                fflush(stdout);
            }
            return 0;
        case 'f':
            o->full = 1;
            break;
        case 'm':
            if (nm_osu_sizes(o, optarg) < 0)
                return nm_osu_bad_usage(o, "invalid message size", opt, optarg);
            break;
        case 'i':
            v = nm_osu_number(optarg);
            if (v < 1 || v > 1000000000L)
                return nm_osu_bad_usage(o, "invalid iteration count", opt, optarg);
            o->iters = o->iters_large = v;  /* as OSU: -i sets both */
            break;
        case 'x':
            v = nm_osu_number(optarg);
            if (v < 0 || v > 1000000000L)
                return nm_osu_bad_usage(o, "invalid warm-up count", opt, optarg);
            o->skip = o->skip_large = v;    /* as OSU: -x sets both */
            o->warm_min = 0.0;              /* and the warm-up is exactly OSU's: no time floor */
            break;
        case 'W':
            v = nm_osu_number(optarg);
            if (v < 1 || v > 4096)
                return nm_osu_bad_usage(o, "invalid window size (1..4096)", opt, optarg);
            o->window = (int)v;
            break;
        case ':':
            return nm_osu_bad_usage(o, "option needs a value", optopt, NULL);
        default:
            if (optopt == '-' && optind < argc && strncmp(argv[optind], "--", 2) == 0) { /* "--bogus": not [--] */
                if (o->rank == 0) {
                    nm_osu_usage(o, stderr);
                    fprintf(stderr, "%s: invalid option [%s]: the kernels take short options only\n", o->prog,
                            argv[optind]);
                    fflush(stderr);
                }
                return 2;
            }
            return nm_osu_bad_usage(o, "invalid option", optopt, NULL);
        }
    }
    if (optind < argc) {
        if (o->rank == 0) {
            nm_osu_usage(o, stderr);
            fprintf(stderr, "%s: unexpected argument '%s'\n", o->prog, argv[optind]);
            fflush(stderr);
        }
        return 2;
    }
    if (o->max_size > NM_OSU_MAX_MSG_LIMIT || o->min_size > o->max_size) {
        if (o->rank == 0) {
            nm_osu_usage(o, stderr);
            fprintf(stderr, "%s: invalid message sizes %ld:%ld (need MIN <= MAX <= %ld)\n", o->prog,
                    o->min_size, o->max_size, NM_OSU_MAX_MSG_LIMIT);
            fflush(stderr);
        }
        return 2;
    }
    /* Size 0 is measured by the latency test only (OSU 7 skips sizes of no element). */
    if (o->kind != NM_OSU_LAT && o->min_size == 0)
        o->min_size = 1;
    return -1;
}

void nm_osu_exit(int code)
{
    fflush(stdout);
    fflush(stderr);
    MPI_Finalize();
    exit(code);
}

void nm_osu_require_ranks(const struct nm_osu_opts *o, int min, int max)
{
    if (o->nranks >= min && (max == 0 || o->nranks <= max))
        return;
    if (o->rank == 0) {
        if (min == max)
            fprintf(stderr, "%s: this test needs exactly %d MPI ranks, got %d\n", o->prog, min, o->nranks);
        else
            fprintf(stderr, "%s: this test needs at least %d MPI ranks, got %d\n", o->prog, min, o->nranks);
    }
    nm_osu_exit(2);
}

void *nm_osu_alloc(long n)
{
    void *p = NULL;
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0)
        page = 4096;
    if (posix_memalign(&p, (size_t)page, (size_t)(n > 0 ? n : 1)) != 0 || !p) {
        fprintf(stderr, "nearmetal: cannot allocate %ld bytes\n", n);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    memset(p, 0, (size_t)(n > 0 ? n : 1));
    return p;
}

long nm_osu_next_size(long size)
{
    return size ? size * 2 : 1;
}

void nm_osu_iters(struct nm_osu_opts *o, long size, long *iters, long *skip)
{
    int large = size > NM_OSU_LARGE_MESSAGE_SIZE;
    *iters = large ? o->iters_large : o->iters;
    *skip = large ? o->skip_large : o->skip;
    if (o->warm_min > 0 && o->warm_t0 == 0.0)
        o->warm_t0 = MPI_Wtime();
}

long nm_osu_warmup(struct nm_osu_opts *o, long skip)
{
    if (o->warm_min <= 0)
        return skip;
    long extra = 0;
    if (o->rank == 0) {
        double elapsed = MPI_Wtime() - o->warm_t0;
        if (elapsed < o->warm_min) {
            /* Iterations for half the time left at the pace so far, at most 8 times as many
             * as so far: the floor is approached without overshooting it when the pace
             * changes (noise, or cold first iterations), in a few dozen calls at most. */
            double per = skip > 0 ? elapsed / (double)skip : 0.0;
            double need = per > 0 ? (o->warm_min - elapsed) / per / 2.0 + 1.0 : 1.0;
            double cap = 8.0 * (double)skip + 8.0;
            extra = (long)(need < cap ? need : cap);
            if (extra < 1)
                extra = 1;
        }
    }
    MPI_Bcast(&extra, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    if (extra == 0)
        o->warm_min = 0.0;  /* warm: later sizes get OSU's count only, and no more broadcasts */
    return skip + extra;
}

void nm_osu_header(const struct nm_osu_opts *o, const char *datatype)
{
    if (o->rank != 0)
        return;
    int w = NM_OSU_FIELD_WIDTH;
    printf("# nearmetal OSU-compatible %s\n", o->title);
    switch (o->kind) {
    case NM_OSU_LAT:
        printf("%-*s%*s\n", 10, "# Size", w, "Latency (us)");
        break;
    case NM_OSU_BW:
        printf("%-*s%*s\n", 10, "# Size", w, "Bandwidth (MB/s)");
        break;
    case NM_OSU_COLL:
    case NM_OSU_BARRIER:
        if (o->kind == NM_OSU_COLL)
            printf("%-*s%*s", 10, "# Size", w, "Avg Latency(us)");
        else
            printf("# Avg Latency(us)");
        if (o->full)
            printf("%*s%*s%*s", w, "Min Latency(us)", w, "Max Latency(us)", 12, "Iterations");
        printf("\n");
        break;
    }
    if (datatype)
        printf("# Datatype: %s.\n", datatype);
    fflush(stdout);
}

void nm_osu_row_value(const struct nm_osu_opts *o, long size, double value)
{
    if (o->rank != 0)
        return;
    printf("%-*ld%*.*f\n", 10, size, NM_OSU_FIELD_WIDTH, NM_OSU_FLOAT_PRECISION, value);
    fflush(stdout);
}

void nm_osu_row_coll(const struct nm_osu_opts *o, long size, double avg, double min, double max, long iters)
{
    if (o->rank != 0)
        return;
    if (o->kind == NM_OSU_BARRIER)
        printf("%*.*f", 17, NM_OSU_FLOAT_PRECISION, avg);
    else
        printf("%-*ld%*.*f", 10, size, NM_OSU_FIELD_WIDTH, NM_OSU_FLOAT_PRECISION, avg);
    if (o->full)
        printf("%*.*f%*.*f%*ld", NM_OSU_FIELD_WIDTH, NM_OSU_FLOAT_PRECISION, min, NM_OSU_FIELD_WIDTH,
               NM_OSU_FLOAT_PRECISION, max, 12, iters);
    printf("\n");
    fflush(stdout);
}

void nm_osu_coll_stats(double latency_us, double *avg, double *min, double *max)
{
    int nranks;
    double sum = 0.0;
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    *min = *max = 0.0;
    MPI_Reduce(&latency_us, min, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
    MPI_Reduce(&latency_us, max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&latency_us, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    *avg = sum / nranks;
}

int nm_osu_seed(int from, int to, long size)
{
    return (int)(((long)from * 1009L + (long)to * 131L + size % 65521L) & 0x7fffffffL);
}

static unsigned char nm_osu_static_byte(long pos, int seed)
{
    return (unsigned char)(((unsigned long)pos * 131UL + (unsigned long)seed * 29UL + 7UL) & 0xffUL);
}

static unsigned char nm_osu_mark_byte(int seed, long it)
{
    return (unsigned char)(((unsigned long)seed * 37UL + (unsigned long)it * 11UL + 101UL) & 0xffUL);
}

void nm_osu_fill(void *buf, long n, int seed)
{
    unsigned char *b = buf;
    for (long i = 0; i < n; i++)
        b[i] = nm_osu_static_byte(i, seed);
}

void nm_osu_mark(void *buf, long n, int seed, long it)
{
    if (n <= 0)
        return;
    unsigned char *b = buf, m = nm_osu_mark_byte(seed, it);
    b[0] = m;
    b[n / 2] = m;
    b[n - 1] = m;
}

unsigned char nm_osu_expected(long n, long pos, int seed, long it)
{
    if (n > 0 && (pos == 0 || pos == n / 2 || pos == n - 1))
        return nm_osu_mark_byte(seed, it);
    return nm_osu_static_byte(pos, seed);
}

long nm_osu_check_marks(const void *buf, long n, int seed, long it)
{
    if (n <= 0)
        return -1;
    const unsigned char *b = buf;
    unsigned char m = nm_osu_mark_byte(seed, it);
    if (b[0] != m)
        return 0;
    if (b[n / 2] != m)
        return n / 2;
    if (b[n - 1] != m)
        return n - 1;
    return -1;
}

long nm_osu_check_full(const void *buf, long n, int seed, long it)
{
    const unsigned char *b = buf;
    for (long i = 0; i < n; i++)
        if (b[i] != nm_osu_expected(n, i, seed, it))
            return i;
    return -1;
}

int nm_osu_verify(const struct nm_osu_opts *o, const void *buf, long n, long size, int seed, long it, int full)
{
    long offset = full ? nm_osu_check_full(buf, n, seed, it) : nm_osu_check_marks(buf, n, seed, it);
    if (offset < 0)
        return 0;
    nm_osu_report(o, size, full ? "data (whole last message)" : "message", offset,
                  ((const unsigned char *)buf)[offset], nm_osu_expected(n, offset, seed, it));
    return 1;
}

void nm_osu_corrupt(void *buf, long n, enum nm_osu_site site, int victim)
{
    static int mode = -1, done = 0, rank = -1;
    if (mode < 0) {
        const char *e = getenv("NM_CORRUPT");
        mode = e ? atoi(e) : 0;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    }
    if (done || mode != (int)site || rank != victim || n <= 0)
        return;
    unsigned char *b = buf;
    b[site == NM_OSU_SITE_FULL ? n / 3 : 0] ^= 0xff;
    done = 1;
}

void nm_osu_report(const struct nm_osu_opts *o, long size, const char *what, long offset,
                   unsigned got, unsigned expected)
{
    if (size >= 0)
        fprintf(stderr, "%s: rank %d: wrong %s at message size %ld, byte %ld: got 0x%02x, expected 0x%02x\n",
                o->prog, o->rank, what, size, offset, got & 0xffU, expected & 0xffU);
    else
        fprintf(stderr, "%s: rank %d: wrong %s: got %u, expected %u\n", o->prog, o->rank, what, got, expected);
    fflush(stderr);
}

void nm_osu_agree(const struct nm_osu_opts *o, long size, int bad)
{
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!any)
        return;
    if (o->rank == 0) {
        fflush(stdout);
        if (size >= 0)
            fprintf(stderr, "%s: DATA VALIDATION ERROR at message size %ld: received data did not match "
                            "what was sent (no result for this size)\n", o->prog, size);
        else
            fprintf(stderr, "%s: DATA VALIDATION ERROR: received data did not match what was sent\n", o->prog);
    }
    nm_osu_exit(1);
}

void nm_osu_init(int *argc, char ***argv, struct nm_osu_opts *o, const char *prog, const char *title,
                 enum nm_osu_kind kind, int min_ranks, int max_ranks)
{
    MPI_Init(argc, argv);
    nm_osu_defaults(o, prog, title, kind);
    int rc = nm_osu_options(*argc, *argv, o);
    if (rc >= 0)
        nm_osu_exit(rc);
    nm_osu_require_ranks(o, min_ranks, max_ranks);
    /* Every rank follows rank 0's floor (nm_osu_warmup is collective while it is pending). */
    MPI_Bcast(&o->warm_min, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
}
