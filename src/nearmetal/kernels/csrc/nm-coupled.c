/* nm-coupled: a coupled-model proxy. Two components, an atmosphere ("atm") and an ocean
 * ("ocn"), run concurrently on disjoint sets of ranks ("pelists", as GFDL ESM4's
 * atmosphere/land and ocean/ice) that share MPI_COMM_WORLD, and exchange surface fields
 * across MPI_COMM_WORLD once per coupling step.
 *
 * Roles. One program, two roles. MPMD launch (a heterogeneous job, one executable per
 * component): every rank gets --role atm|ocn, e.g.
 *     mpirun -np 1 nm-coupled --role atm : -np 2 nm-coupled --role ocn
 * SPMD launch (one command line for every rank): no --role; world ranks 0..K-1 are the
 * atmosphere, K..size-1 the ocean (--atm-ranks K, default size/2). Every rank learns every
 * other rank's role (MPI_Allgather) and MPI_COMM_WORLD is split by role (MPI_Comm_split,
 * key = world rank), so component rank order is world rank order. Options given to only
 * some ranks of an MPMD launch (--atm-nx only on the atm command line) apply to all;
 * ranks that give one option different values are refused.
 *
 * Components. Each has its own global grid (atm AX x AY x AZ, ocn OX x OY x OZ; x is
 * longitude, periodic; y latitude, closed walls: ghost = boundary value; z levels, closed at
 * the bottom and top; level 0 is the surface), cut in x and y into PX x PY blocks of whole
 * columns by MPI_Dims_create (more blocks along the longer side; block sizes differ by at
 * most one; component rank r holds block (r % PX, r / PX)). A step is a halo exchange of
 * all levels inside the component communicator, then an explicit 7-point diffusion with
 * OpenMP over (level, row), and at the surface the coupling terms:
 *     atm: T' = T + CA*lap(T) [+ KA*(SST - T);  flux += KA*(T - SST)  at level 0]
 *     ocn: S' = S + CO*lap(S) [+ KO*FLUX  at level 0]
 * The atmosphere makes --atm-steps-per-coupling steps (default 3) per coupling, the ocean
 * --ocn-steps-per-coupling (default 1), concurrently.
 *
 * Coupling (every coupling step c = 1..N, before the steps of the interval): the atmosphere
 * sends its mean flux over the last interval (the accumulated flux / atm steps, then reset;
 * zero at c = 1) to the ocean and the ocean its SST S to the atmosphere, both at once, over
 * MPI_COMM_WORLD (MPI_Irecv/MPI_Isend/MPI_Waitall). Regridding is nearest-cell injection
 * on cell centres: target cell i of n takes source cell (2i+1)*m / (2n) of m, per axis
 * (integer arithmetic; the identity for equal grids). Routing is MxN, as a coupler's
 * router: rank s of the source component sends to rank t of the target component exactly
 * the source values of the cells of t's block whose source cell lies in s's block, in
 * t's row-major order; pairs with no such cell exchange no message. This works for any
 * rank counts >= 1 on each side and any grid sizes. Only surface (level 0) fields travel.
 *
 * Verification. Every message carries a header (kind, coupling, sender and receiver world
 * ranks, count) and a 64-bit checksum (FNV-1a over 64-bit words: any change of one value,
 * even one bit, changes it) of header and payload; the receiver checks each field against
 * what it expects and the checksum against its own over what arrived. After the main loop
 * the root of each component gathers its 3-D field and compares it bit for bit with a serial
 * replay of the whole coupled model on the global grids (no decomposition, no MPI: the same
 * update functions, the same injection maps), unless --no-reference. The per-point
 * arithmetic does not depend on the decomposition or thread count, so the checksums (sums
 * of the global field in (level, row, column) order) are identical for every rank split and
 * launch style; the initial fields use no libm, so they agree across builds as well. Any error: every rank exits 1, after "verification FAILED" on stderr.
 * NM_CORRUPT=1 flips the lowest bit of the first value of one flux message (coupling 2, or 1
 * if there is only one; the highest world rank of the atmosphere that sends any) after its
 * checksum is taken.
 *
 * Timing (per rank): main loop (after a barrier, to the end of the last coupling
 * interval), compute (the updates), halo (component halo exchanges), exchange (the
 * coupling exchange: packing, waiting for the other component, checks, unpacking). Rank 0
 * prints a row per rank and, per component, the largest value of each column over its ranks.
 *
 * usage: see usage() below. Bad options or a role with no rank: exit 2. */
#include <mpi.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute.h"

#define CA 0.15 /* atm diffusion (7-point: stable for <= 1/6) */
#define KA 0.05 /* atm relaxation to the SST at the surface */
#define CO 0.1  /* ocn diffusion */
#define KO 0.5  /* ocn response to the surface flux */
#define HDR 7   /* kind, coupling, src world rank, dst world rank, count, hash hi, hash lo */
#define MAXGRID (1L << 20)
#define MAXPOINTS (1L << 28)

enum { ATM = 0, OCN = 1 };
static const char *const ROLE[2] = {"atm", "ocn"};
enum { KIND_FLUX = 1, KIND_SST = 2 };
static const char *const KIND[3] = {"", "flux", "sst"};

/* options: value and whether this rank set it (merged over all ranks) */
enum { O_COUPLINGS, O_ANX, O_ANY, O_ANZ, O_ONX, O_ONY, O_ONZ, O_ASTEPS, O_OSTEPS, O_ATMRANKS, O_QUIET, O_NOREF,
       O_HELP, NOPT };
static const char *const OPTNAME[NOPT] = {"--couplings", "--atm-nx", "--atm-ny", "--atm-nz", "--ocn-nx", "--ocn-ny",
                                          "--ocn-nz", "--atm-steps-per-coupling", "--ocn-steps-per-coupling",
                                          "--atm-ranks", "-q", "--no-reference", "--help"};
static const long OPTDEF[NOPT] = {20, 192, 96, 16, 288, 144, 20, 3, 1, -1, 0, 0, 0};

typedef struct { /* one component, as every rank knows it */
    long nx, ny, nz, steps;
    int nranks, px, py;
    int *world; /* world rank of each component rank */
} Comp;

typedef struct { /* this rank's block of its component (or a whole grid, for the replay) */
    long nx, ny, nz, ox, oy; /* interior size, global offset */
    long st, sp;             /* row stride nx + 2, level stride (ny + 2) * st */
    double *u, *v;           /* nz levels of (ny + 2) x (nx + 2): ghost layer in x and y */
    double *force, *flux;    /* one (ny + 2) x (nx + 2) plane: the surface (level 0) forcing */
    int me, nb[4];           /* component ranks: this one, west, east, south, north (-1: wall) */
    double *in[4], *out[4];  /* halo buffers per face */
    MPI_Comm comm;
    MPI_Request req[8];
    MPI_Status sts[8];
} Block;

typedef struct { /* one direction of the coupling router, on one rank */
    int npeer;
    int *peer;               /* world ranks */
    long *count, *off, *idx; /* idx: surface-plane indices into this rank's block */
    double **buf;
} Route;

static long blk_start(long n, int p, int b)
{
    long q = n / p, r = n % p;
    return b * q + (b < r ? b : r);
}

static long blk_size(long n, int p, int b)
{
    return n / p + (b < n % p ? 1 : 0);
}

static int blk_owner(long n, int p, long i)
{
    long q = n / p, r = n % p;
    return i < r * (q + 1) ? (int)(i / (q + 1)) : (int)(r + (i - r * (q + 1)) / q);
}

/* nearest-cell injection: source cell (of m) of target cell i (of n), cell centres */
static long inject(long i, long n, long m)
{
    return ((2 * i + 1) * m) / (2 * n);
}

static void proc_grid(Comp *c)
{
    int d[2] = {0, 0};
    MPI_Dims_create(c->nranks, 2, d); /* d[0] >= d[1] */
    c->px = c->nx >= c->ny ? d[0] : d[1];
    c->py = c->nx >= c->ny ? d[1] : d[0];
}

/* initial fields: polynomials of the cell centre, no libm (the same bits on every build) */
static double init_value(int role, long i, long j, long k, const Comp *c)
{
    double x = (i + 0.5) / (double)c->nx, y = (j + 0.5) / (double)c->ny, z = (k + 0.5) / (double)c->nz;
    if (role == ATM)
        return (4.0 * y * (1.0 - y) + 0.5 * x * (1.0 - x) + 0.1 * (double)((i * 37 + j * 101 + k * 7) % 17) / 17.0) *
               (1.0 - 0.5 * z);
    return (3.5 * y * (1.0 - y) + 0.05 * (double)((i * 53 + j * 29 + k * 11) % 13) / 13.0) * (1.0 - 0.8 * z);
}

static uint64_t fnv_words(uint64_t h, const double *w, long n)
{
    for (long k = 0; k < n; k++) {
        uint64_t b;
        memcpy(&b, &w[k], sizeof b);
        h = (h ^ b) * 0x100000001b3ULL;
    }
    return h;
}

/* header words 0..4 and the payload; words 5, 6 (the hash itself) are skipped */
static uint64_t msg_hash(const double *buf, long count)
{
    uint64_t h = fnv_words(0xcbf29ce484222325ULL, buf, 5);
    return fnv_words(h, buf + HDR, count);
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fprintf(stderr, "nm-coupled: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    return p;
}

static long face_count(const Block *b, int f)
{
    return (f < 2 ? b->ny : b->nx) * b->nz;
}

/* arrays of block b (nx, ny, ox, oy set) of component c, with the initial field */
static void block_alloc(Block *b, int role, const Comp *c)
{
    b->nz = c->nz;
    b->st = b->nx + 2;
    b->sp = b->st * (b->ny + 2);
    b->u = xcalloc((size_t)(b->sp * b->nz), sizeof(double));
    b->v = xcalloc((size_t)(b->sp * b->nz), sizeof(double));
    b->force = xcalloc((size_t)b->sp, sizeof(double));
    b->flux = role == ATM ? xcalloc((size_t)b->sp, sizeof(double)) : NULL;
    for (int f = 0; f < 4; f++) {
        b->in[f] = xcalloc((size_t)face_count(b, f), sizeof(double));
        b->out[f] = xcalloc((size_t)face_count(b, f), sizeof(double));
    }
    for (long k = 0; k < b->nz; k++)
        for (long j = 1; j <= b->ny; j++)
            for (long i = 1; i <= b->nx; i++)
                b->u[k * b->sp + j * b->st + i] = init_value(role, b->ox + i - 1, b->oy + j - 1, k, c);
}

static void block_free(Block *b)
{
    free(b->u);
    free(b->v);
    free(b->force);
    free(b->flux);
    for (int f = 0; f < 4; f++) {
        free(b->in[f]);
        free(b->out[f]);
    }
}

/* Copy the plane next to face f (0 west, 1 east, 2 south, 3 north) of every level: the
 * interior one (ghost = 0) or the ghost one (ghost = 1), to (dir = 1) or from (dir = 0) buf. */
static void face_copy(const Block *b, double *u, int f, int ghost, double *buf, int dir)
{
    long n = 0;
    for (long k = 0; k < b->nz; k++) {
        double *lev = u + k * b->sp;
        if (f < 2) {
            long i = f == 0 ? (ghost ? 0 : 1) : (ghost ? b->nx + 1 : b->nx);
            for (long j = 1; j <= b->ny; j++, n++) {
                if (dir)
                    buf[n] = lev[j * b->st + i];
                else
                    lev[j * b->st + i] = buf[n];
            }
        } else {
            long j = f == 2 ? (ghost ? 0 : 1) : (ghost ? b->ny + 1 : b->ny);
            if (dir)
                memcpy(buf + n, lev + j * b->st + 1, sizeof(double) * (size_t)b->nx);
            else
                memcpy(lev + j * b->st + 1, buf + n, sizeof(double) * (size_t)b->nx);
            n += b->nx;
        }
    }
}

/* Ghost layer of u: periodic in x (a local copy when this rank spans x), closed walls in y
 * (ghost = boundary value). The message that fills the receiver's face f has tag f. */
static void halo(Block *b, double *u)
{
    int n = 0;
    for (int f = 0; f < 4; f++) {
        int remote = b->nb[f] >= 0 && b->nb[f] != b->me;
        if (remote)
            MPI_Irecv(b->in[f], (int)face_count(b, f), MPI_DOUBLE, b->nb[f], f, b->comm, &b->req[n++]);
    }
    for (int f = 0; f < 4; f++) {
        face_copy(b, u, f, 0, b->out[f], 1);
        if (b->nb[f] >= 0 && b->nb[f] != b->me)
            MPI_Isend(b->out[f], (int)face_count(b, f), MPI_DOUBLE, b->nb[f], f ^ 1, b->comm, &b->req[n++]);
    }
    for (int f = 0; f < 4; f++) {
        if (b->nb[f] < 0) /* wall */
            face_copy(b, u, f, 1, b->out[f], 0);
        else if (b->nb[f] == b->me) /* periodic onto itself */
            face_copy(b, u, f, 1, b->out[f ^ 1], 0);
    }
    MPI_Waitall(n, b->req, b->sts);
    for (int f = 0; f < 4; f++)
        if (b->nb[f] >= 0 && b->nb[f] != b->me)
            face_copy(b, u, f, 1, b->in[f], 0);
}

/* The updates: explicit 7-point diffusion (closed at the bottom and top level), plus the
 * surface coupling at level 0. One machine-code instance each (noinline) serves the
 * parallel run and the serial replay; every point's arithmetic is the same in both, for
 * any decomposition and any number of threads. */
__attribute__((noinline)) static void atm_sweep(const Block *b, const double *restrict u, double *restrict v,
                                                const double *restrict sst, double *restrict flux)
{
    const long nx = b->nx, ny = b->ny, nz = b->nz, st = b->st, sp = b->sp;
#pragma omp parallel for collapse(2) schedule(static)
    for (long k = 0; k < nz; k++)
        for (long j = 1; j <= ny; j++) {
            const long dn = k > 0 ? -sp : 0, up = k < nz - 1 ? sp : 0, p0 = k * sp + j * st;
            if (k == 0) {
                for (long p = p0 + 1; p <= p0 + nx; p++) {
                    double t = u[p];
                    double lap = u[p - 1] + u[p + 1] + u[p - st] + u[p + st] + u[p + dn] + u[p + up] - 6.0 * t;
                    double d = sst[p] - t;
                    v[p] = t + CA * lap + KA * d;
                    flux[p] -= KA * d; /* heat flux into the ocean: KA * (T - SST) */
                }
            } else {
                for (long p = p0 + 1; p <= p0 + nx; p++) {
                    double t = u[p];
                    double lap = u[p - 1] + u[p + 1] + u[p - st] + u[p + st] + u[p + dn] + u[p + up] - 6.0 * t;
                    v[p] = t + CA * lap;
                }
            }
        }
}

__attribute__((noinline)) static void ocn_sweep(const Block *b, const double *restrict u, double *restrict v,
                                                const double *restrict flux)
{
    const long nx = b->nx, ny = b->ny, nz = b->nz, st = b->st, sp = b->sp;
#pragma omp parallel for collapse(2) schedule(static)
    for (long k = 0; k < nz; k++)
        for (long j = 1; j <= ny; j++) {
            const long dn = k > 0 ? -sp : 0, up = k < nz - 1 ? sp : 0, p0 = k * sp + j * st;
            if (k == 0) {
                for (long p = p0 + 1; p <= p0 + nx; p++) {
                    double s = u[p];
                    double lap = u[p - 1] + u[p + 1] + u[p - st] + u[p + st] + u[p + dn] + u[p + up] - 6.0 * s;
                    v[p] = s + CO * lap + KO * flux[p];
                }
            } else {
                for (long p = p0 + 1; p <= p0 + nx; p++) {
                    double s = u[p];
                    double lap = u[p - 1] + u[p + 1] + u[p - st] + u[p + st] + u[p + dn] + u[p + up] - 6.0 * s;
                    v[p] = s + CO * lap;
                }
            }
        }
}

static void step(Block *b, int role, double *t_halo, double *t_comp)
{
    double t0 = MPI_Wtime();
    halo(b, b->u);
    double t1 = MPI_Wtime();
    if (role == ATM)
        atm_sweep(b, b->u, b->v, b->force, b->flux);
    else
        ocn_sweep(b, b->u, b->v, b->force);
    double *t = b->u;
    b->u = b->v;
    b->v = t;
    *t_halo += t1 - t0;
    *t_comp += MPI_Wtime() - t1;
}

/* Router of one direction. send = 1: this rank (block b of component src) sends to the
 * ranks of component dst; send = 0: this rank (block b of dst) receives from those of src.
 * Both sides list the cells in the target block's row-major order. */
static void route_build(Route *r, int send, const Block *b, const Comp *src, const Comp *dst, int my_crank)
{
    const Comp *peers = send ? dst : src;
    long *cnt = xcalloc((size_t)peers->nranks, sizeof(long));
    long **lists = xcalloc((size_t)peers->nranks, sizeof(long *));
    for (int pass = 0; pass < 2; pass++) {
        for (int q = 0; q < peers->nranks; q++) {
            if (pass == 1)
                lists[q] = xcalloc((size_t)cnt[q], sizeof(long));
            cnt[q] = 0;
        }
        if (send) {
            int sbx = my_crank % src->px, sby = my_crank / src->px;
            for (int t = 0; t < dst->nranks; t++) {
                int tbx = t % dst->px, tby = t / dst->px;
                long tx0 = blk_start(dst->nx, dst->px, tbx), tnx = blk_size(dst->nx, dst->px, tbx);
                long ty0 = blk_start(dst->ny, dst->py, tby), tny = blk_size(dst->ny, dst->py, tby);
                for (long tj = ty0; tj < ty0 + tny; tj++) {
                    long sj = inject(tj, dst->ny, src->ny);
                    if (blk_owner(src->ny, src->py, sj) != sby)
                        continue;
                    for (long ti = tx0; ti < tx0 + tnx; ti++) {
                        long si = inject(ti, dst->nx, src->nx);
                        if (blk_owner(src->nx, src->px, si) != sbx)
                            continue;
                        if (pass == 1)
                            lists[t][cnt[t]] = (sj - b->oy + 1) * b->st + (si - b->ox + 1);
                        cnt[t]++;
                    }
                }
            }
        } else {
            for (long j = 0; j < b->ny; j++) {
                long sj = inject(b->oy + j, dst->ny, src->ny);
                int sby = blk_owner(src->ny, src->py, sj);
                for (long i = 0; i < b->nx; i++) {
                    long si = inject(b->ox + i, dst->nx, src->nx);
                    int s = blk_owner(src->nx, src->px, si) + sby * src->px;
                    if (pass == 1)
                        lists[s][cnt[s]] = (j + 1) * b->st + (i + 1);
                    cnt[s]++;
                }
            }
        }
    }
    r->npeer = 0;
    long total = 0;
    for (int q = 0; q < peers->nranks; q++)
        if (cnt[q] > 0) {
            r->npeer++;
            total += cnt[q];
        }
    r->peer = xcalloc((size_t)r->npeer, sizeof(int));
    r->count = xcalloc((size_t)r->npeer, sizeof(long));
    r->off = xcalloc((size_t)r->npeer, sizeof(long));
    r->idx = xcalloc((size_t)total, sizeof(long));
    r->buf = xcalloc((size_t)r->npeer, sizeof(double *));
    int k = 0;
    long off = 0;
    for (int q = 0; q < peers->nranks; q++) {
        if (cnt[q] > 0) {
            r->peer[k] = peers->world[q];
            r->count[k] = cnt[q];
            r->off[k] = off;
            memcpy(r->idx + off, lists[q], sizeof(long) * (size_t)cnt[q]);
            r->buf[k] = xcalloc((size_t)(HDR + cnt[q]), sizeof(double));
            off += cnt[q];
            k++;
        }
        free(lists[q]);
    }
    free(lists);
    free(cnt);
}

static void route_free(Route *r)
{
    for (int k = 0; k < r->npeer; k++)
        free(r->buf[k]);
    free(r->buf);
    free(r->peer);
    free(r->count);
    free(r->off);
    free(r->idx);
}

static int exchange_errors_printed;

static void exchange_error(const char *what, long c, int kind, int src, int dst, double got, double want)
{
    if (exchange_errors_printed++ < 3)
        fprintf(stderr,
                "nm-coupled: verification FAILED: coupling %ld: %s message from world rank %d to world rank %d: "
                "%s %.17g, expected %.17g\n",
                c, KIND[kind], src, dst, what, got, want);
}

/* One coupling exchange on this rank: send field[idx] * scale to every peer of snd, receive
 * into dst[idx] from every peer of rcv; check every message. Returns the errors found. */
static long exchange(Route *snd, Route *rcv, const double *field, double scale, double *dst, int skind, int rkind,
                     long c, int wrank, int corrupt, MPI_Request *req, MPI_Status *sts,
                     long *values)
{
    int n = 0;
    for (int k = 0; k < rcv->npeer; k++)
        MPI_Irecv(rcv->buf[k], (int)(HDR + rcv->count[k]), MPI_DOUBLE, rcv->peer[k], rkind, MPI_COMM_WORLD,
                  &req[n++]);
    for (int k = 0; k < snd->npeer; k++) {
        double *buf = snd->buf[k];
        const long *idx = snd->idx + snd->off[k];
        buf[0] = skind;
        buf[1] = (double)c;
        buf[2] = wrank;
        buf[3] = snd->peer[k];
        buf[4] = (double)snd->count[k];
        for (long m = 0; m < snd->count[k]; m++)
            buf[HDR + m] = field[idx[m]] * scale;
        uint64_t h = msg_hash(buf, snd->count[k]);
        buf[5] = (double)(h >> 32);
        buf[6] = (double)(h & 0xffffffffULL);
        if (corrupt && k == 0) { /* in transit, after the checksum: flip the lowest bit */
            uint64_t b;
            memcpy(&b, &buf[HDR], sizeof b);
            b ^= 1;
            memcpy(&buf[HDR], &b, sizeof b);
        }
        MPI_Isend(buf, (int)(HDR + snd->count[k]), MPI_DOUBLE, snd->peer[k], skind, MPI_COMM_WORLD, &req[n++]);
    }
    MPI_Waitall(n, req, sts);
    long errors = 0;
    for (int k = 0; k < rcv->npeer; k++) {
        const double *buf = rcv->buf[k];
        const long *idx = rcv->idx + rcv->off[k];
        const double want[5] = {rkind, (double)c, rcv->peer[k], wrank, (double)rcv->count[k]};
        static const char *const field_name[5] = {"kind", "coupling", "sender", "receiver", "count"};
        int bad = 0;
        for (int f = 0; f < 5 && !bad; f++)
            if (buf[f] != want[f]) {
                exchange_error(field_name[f], c, rkind, rcv->peer[k], wrank, buf[f], want[f]);
                bad = 1;
            }
        if (!bad) {
            uint64_t h = msg_hash(buf, rcv->count[k]);
            if ((double)(h >> 32) != buf[5] || (double)(h & 0xffffffffULL) != buf[6]) {
                if (exchange_errors_printed++ < 3)
                    fprintf(stderr,
                            "nm-coupled: verification FAILED: coupling %ld: %s message from world rank %d to world "
                            "rank %d: checksum of the %ld values received %016llx != %016llx computed by the sender "
                            "(data changed in the exchange)\n",
                            c, KIND[rkind], rcv->peer[k], wrank, rcv->count[k], (unsigned long long)h,
                            ((unsigned long long)buf[5] << 32) | (unsigned long long)buf[6]);
                bad = 1;
            }
        }
        errors += bad;
        for (long m = 0; m < rcv->count[k]; m++)
            dst[idx[m]] = buf[HDR + m];
        *values += rcv->count[k];
    }
    return errors;
}

/* Serial replay of the whole coupled model on the global grids: the reference. */
static void replay(const Comp *atm, const Comp *ocn, long couplings, Block *ga, Block *go)
{
    Block *g[2] = {ga, go};
    const Comp *c2[2] = {atm, ocn};
    for (int r = 0; r < 2; r++) { /* one block: x periodic onto itself, walls in y, no MPI */
        g[r]->nx = c2[r]->nx;
        g[r]->ny = c2[r]->ny;
        g[r]->ox = g[r]->oy = 0;
        g[r]->me = g[r]->nb[0] = g[r]->nb[1] = 0;
        g[r]->nb[2] = g[r]->nb[3] = -1;
        g[r]->comm = MPI_COMM_SELF;
        block_alloc(g[r], r, c2[r]);
    }
    const double scale = 1.0 / (double)atm->steps;
    double th = 0.0, tc = 0.0;
    for (long c = 1; c <= couplings; c++) {
        for (long j = 0; j < ocn->ny; j++) {
            long sj = inject(j, ocn->ny, atm->ny);
            for (long i = 0; i < ocn->nx; i++)
                go->force[(j + 1) * go->st + i + 1] = ga->flux[(sj + 1) * ga->st + inject(i, ocn->nx, atm->nx) + 1] * scale;
        }
        for (long j = 0; j < atm->ny; j++) {
            long sj = inject(j, atm->ny, ocn->ny);
            for (long i = 0; i < atm->nx; i++)
                ga->force[(j + 1) * ga->st + i + 1] = go->u[(sj + 1) * go->st + inject(i, atm->nx, ocn->nx) + 1];
        }
        memset(ga->flux, 0, sizeof(double) * (size_t)ga->sp);
        for (long s = 0; s < atm->steps; s++)
            step(ga, ATM, &th, &tc);
        for (long s = 0; s < ocn->steps; s++)
            step(go, OCN, &th, &tc);
    }
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: nm-coupled [--role atm|ocn | --atm-ranks K] [--couplings N]\n"
            "                  [--atm-nx N] [--atm-ny N] [--atm-nz N] [--ocn-nx N] [--ocn-ny N] [--ocn-nz N]\n"
            "                  [--atm-steps-per-coupling S] [--ocn-steps-per-coupling S]\n"
            "                  [--no-reference] [-q] [-h]\n"
            "  MPMD: mpirun -np A nm-coupled --role atm : -np O nm-coupled --role ocn\n"
            "  SPMD: mpirun -np N nm-coupled [--atm-ranks K]   (world ranks 0..K-1 atm, the rest ocn; K = N/2)\n");
}

static void ranges(char *out, size_t size, const int *v, int n)
{
    size_t used = 0;
    out[0] = '\0';
    for (int k = 0; k < n && used + 32 < size; k++) {
        int e = k;
        while (e + 1 < n && v[e + 1] == v[e] + 1)
            e++;
        used += (size_t)snprintf(out + used, size - used, k == e ? "%s%d" : "%s%d-%d", k ? "," : "", v[k], v[e]);
        k = e;
    }
}

int main(int argc, char **argv)
{
    int provided, wrank, wsize;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    double t_start = MPI_Wtime();
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);

    /* --- options: parse locally, then merge over all ranks --- */
    long val[NOPT], set[NOPT] = {0};
    memcpy(val, OPTDEF, sizeof val);
    int role = -1, bad = 0;
    char why[512] = "";
    static const struct option longopts[] = {
        {"role", required_argument, 0, 'R'},
        {"couplings", required_argument, 0, 'A' + O_COUPLINGS},
        {"atm-nx", required_argument, 0, 'A' + O_ANX},
        {"atm-ny", required_argument, 0, 'A' + O_ANY},
        {"atm-nz", required_argument, 0, 'A' + O_ANZ},
        {"ocn-nx", required_argument, 0, 'A' + O_ONX},
        {"ocn-ny", required_argument, 0, 'A' + O_ONY},
        {"ocn-nz", required_argument, 0, 'A' + O_ONZ},
        {"atm-steps-per-coupling", required_argument, 0, 'A' + O_ASTEPS},
        {"ocn-steps-per-coupling", required_argument, 0, 'A' + O_OSTEPS},
        {"atm-ranks", required_argument, 0, 'A' + O_ATMRANKS},
        {"no-reference", no_argument, 0, 'A' + O_NOREF},
        {"quiet", no_argument, 0, 'q'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    opterr = 0;
    int opt;
    while (!bad && (opt = getopt_long(argc, argv, ":qh", longopts, NULL)) != -1) {
        if (opt == 'R') {
            if (strcmp(optarg, "atm") == 0)
                role = ATM;
            else if (strcmp(optarg, "ocn") == 0)
                role = OCN;
            else {
                snprintf(why, sizeof why, "bad value for --role: '%s' (atm or ocn)", optarg);
                bad = 1;
            }
        } else if (opt == 'q') {
            val[O_QUIET] = set[O_QUIET] = 1;
        } else if (opt == 'h') {
            val[O_HELP] = set[O_HELP] = 1;
        } else if (opt == 'A' + O_NOREF) {
            val[O_NOREF] = set[O_NOREF] = 1;
        } else if (opt >= 'A' && opt < 'A' + NOPT) {
            int o = opt - 'A';
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*optarg == '\0' || *end != '\0' || v < 1 || v > MAXGRID) {
                snprintf(why, sizeof why, "bad value for %s: '%s' (an integer from 1 to %ld)", OPTNAME[o], optarg,
                         MAXGRID);
                bad = 1;
            } else {
                val[o] = v;
                set[o] = 1;
            }
        } else if (opt == ':') {
            snprintf(why, sizeof why, "option '%s' needs a value", argv[optind - 1]);
            bad = 1;
        } else if (optopt) {
            snprintf(why, sizeof why, "unknown option '-%c'", optopt);
            bad = 1;
        } else {
            snprintf(why, sizeof why, "unknown option '%s'", argv[optind - 1]);
            bad = 1;
        }
    }
    if (!bad && optind < argc) {
        snprintf(why, sizeof why, "unexpected argument '%s'", argv[optind]);
        bad = 1;
    }
    enum { NCFG = 2 * NOPT + 2 };
    long mine[NCFG];
    for (int o = 0; o < NOPT; o++) {
        mine[o] = val[o];
        mine[NOPT + o] = set[o];
    }
    mine[2 * NOPT] = role;
    mine[2 * NOPT + 1] = bad;
    long *cfg = xcalloc((size_t)wsize * NCFG, sizeof(long));
    MPI_Allgather(mine, NCFG, MPI_LONG, cfg, NCFG, MPI_LONG, MPI_COMM_WORLD);
    int first_bad = -1;
    for (int r = wsize - 1; r >= 0; r--)
        if (cfg[r * NCFG + 2 * NOPT + 1])
            first_bad = r;
    if (first_bad >= 0) { /* a rank's own parse error: the lowest such rank says why */
        if (wrank == first_bad) {
            fprintf(stderr, "nm-coupled: %s (world rank %d)\n", why, wrank);
            usage(stderr);
        }
        free(cfg);
        MPI_Finalize();
        return 2;
    }
    /* merge: an option set on some ranks applies to all; different values are an error */
    int nrole = 0;
    for (int o = 0; o < NOPT && !why[0]; o++) {
        int by = -1;
        for (int r = 0; r < wsize; r++) {
            const long *c = cfg + r * NCFG;
            if (!c[NOPT + o])
                continue;
            if (by < 0) {
                by = r;
                val[o] = c[o];
            } else if (c[o] != val[o]) {
                snprintf(why, sizeof why, "%s differs between ranks: %ld on world rank %d, %ld on world rank %d",
                         OPTNAME[o], val[o], by, c[o], r);
            }
        }
    }
    int *roles = xcalloc((size_t)wsize, sizeof(int));
    for (int r = 0; r < wsize; r++) {
        roles[r] = (int)cfg[r * NCFG + 2 * NOPT];
        nrole += roles[r] >= 0;
    }
    free(cfg);
    if (val[O_HELP]) {
        if (wrank == 0)
            usage(stdout);
        free(roles);
        MPI_Finalize();
        return 0;
    }
    const int mpmd = nrole > 0;
    int ncomp[2] = {0, 0};
    if (!why[0] && mpmd && nrole < wsize)
        snprintf(why, sizeof why,
                 "--role is given to %d of %d ranks: give it to every rank (MPMD launch) or to none (SPMD launch)",
                 nrole, wsize);
    else if (!why[0] && mpmd && val[O_ATMRANKS] >= 0)
        snprintf(why, sizeof why, "--atm-ranks is for SPMD launches: with --role every rank names its own role");
    if (!why[0] && !mpmd) {
        long k = val[O_ATMRANKS] >= 0 ? val[O_ATMRANKS] : wsize / 2;
        for (int r = 0; r < wsize; r++)
            roles[r] = r < k ? ATM : OCN;
    }
    if (!why[0]) {
        for (int r = 0; r < wsize; r++)
            ncomp[roles[r]]++;
        for (int c = 0; c < 2 && !why[0]; c++)
            if (ncomp[c] == 0)
                snprintf(why, sizeof why,
                         "no rank has role '%s' (world size %d: %d atm, %d ocn ranks): a coupled run needs at least "
                         "one rank of each role (--atm-ranks K with 1 <= K < world size, or --role atm|ocn on every rank)",
                         ROLE[c], wsize, ncomp[ATM], ncomp[OCN]);
    }
    Comp comp[2];
    memset(comp, 0, sizeof comp);
    if (!why[0]) {
        comp[ATM].nx = val[O_ANX], comp[ATM].ny = val[O_ANY], comp[ATM].nz = val[O_ANZ];
        comp[OCN].nx = val[O_ONX], comp[OCN].ny = val[O_ONY], comp[OCN].nz = val[O_ONZ];
        comp[ATM].steps = val[O_ASTEPS], comp[OCN].steps = val[O_OSTEPS];
        for (int c = 0; c < 2 && !why[0]; c++) {
            Comp *k = &comp[c];
            k->nranks = ncomp[c];
            proc_grid(k);
            if (k->nx * k->ny * k->nz > MAXPOINTS)
                snprintf(why, sizeof why, "%s grid %ldx%ldx%ld too large (at most %ld points)", ROLE[c], k->nx, k->ny,
                         k->nz, MAXPOINTS);
            else if (k->nx < k->px || k->ny < k->py)
                snprintf(why, sizeof why,
                         "%s grid %ldx%ldx%ld is too small for %d ranks (%dx%d blocks): every block needs a point",
                         ROLE[c], k->nx, k->ny, k->nz, k->nranks, k->px, k->py);
        }
    }
    if (why[0]) { /* the same on every rank: world rank 0 says it */
        if (wrank == 0) {
            fprintf(stderr, "nm-coupled: %s\n", why);
            usage(stderr);
        }
        free(roles);
        MPI_Finalize();
        return 2;
    }
    for (int c = 0; c < 2; c++) {
        comp[c].world = xcalloc((size_t)comp[c].nranks, sizeof(int));
        int n = 0;
        for (int r = 0; r < wsize; r++)
            if (roles[r] == c)
                comp[c].world[n++] = r;
    }
    const long couplings = val[O_COUPLINGS];
    const int quiet = (int)val[O_QUIET], noref = (int)val[O_NOREF];
    role = roles[wrank];
    const int other = 1 - role;
    Comp *me = &comp[role];
    int nthreads = nm_compute_threads();
    int node_ranks = nm_compute_node_ranks();

    /* --- components: communicator, block, router --- */
    MPI_Comm ccomm;
    MPI_Comm_split(MPI_COMM_WORLD, role, wrank, &ccomm);
    int crank;
    MPI_Comm_rank(ccomm, &crank);
    Block b;
    memset(&b, 0, sizeof b);
    int bx = crank % me->px, by = crank / me->px;
    b.nx = blk_size(me->nx, me->px, bx);
    b.ny = blk_size(me->ny, me->py, by);
    b.ox = blk_start(me->nx, me->px, bx);
    b.oy = blk_start(me->ny, me->py, by);
    b.me = crank;
    b.nb[0] = (bx + me->px - 1) % me->px + by * me->px; /* west, periodic */
    b.nb[1] = (bx + 1) % me->px + by * me->px;           /* east, periodic */
    b.nb[2] = by > 0 ? crank - me->px : -1;               /* south, or the wall */
    b.nb[3] = by < me->py - 1 ? crank + me->px : -1;      /* north, or the wall */
    b.comm = ccomm;
    block_alloc(&b, role, me);
    Route snd, rcv;
    route_build(&snd, 1, &b, me, &comp[other], crank);
    route_build(&rcv, 0, &b, &comp[other], me, crank);
    /* NM_CORRUPT: the highest world rank of the atmosphere that sends a flux message */
    int cand = role == ATM && snd.npeer > 0 ? wrank : -1, victim = -1;
    MPI_Allreduce(&cand, &victim, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    const int corrupt = nm_compute_corrupt() && wrank == victim;
    MPI_Request *req = xcalloc((size_t)(snd.npeer + rcv.npeer), sizeof(MPI_Request));
    MPI_Status *sts = xcalloc((size_t)(snd.npeer + rcv.npeer), sizeof(MPI_Status));
    const double scale = role == ATM ? 1.0 / (double)me->steps : 1.0;
    const int skind = role == ATM ? KIND_FLUX : KIND_SST, rkind = role == ATM ? KIND_SST : KIND_FLUX;

    /* --- main loop --- */
    MPI_Barrier(MPI_COMM_WORLD);
    double t_loop = MPI_Wtime();
    double init_s = t_loop - t_start, t_comp = 0.0, t_halo = 0.0, t_exch = 0.0;
    long errors = 0, values = 0;
    for (long c = 1; c <= couplings; c++) {
        double t0 = MPI_Wtime();
        errors += exchange(&snd, &rcv, role == ATM ? b.flux : b.u, scale, b.force, skind, rkind, c, wrank,
                           corrupt && c == (couplings > 1 ? 2 : 1), req, sts, &values);
        if (role == ATM)
            memset(b.flux, 0, sizeof(double) * (size_t)b.sp);
        t_exch += MPI_Wtime() - t0;
        for (long s = 0; s < me->steps; s++)
            step(&b, role, &t_halo, &t_comp);
    }
    double main_loop_s = MPI_Wtime() - t_loop;

    /* --- verification: gather the field, compare with the serial replay --- */
    long bn = b.nx * b.ny * b.nz;
    double *pack = xcalloc((size_t)bn, sizeof(double));
    for (long k = 0; k < b.nz; k++)
        for (long j = 0; j < b.ny; j++)
            memcpy(pack + (k * b.ny + j) * b.nx, b.u + k * b.sp + (j + 1) * b.st + 1, sizeof(double) * (size_t)b.nx);
    int *counts = NULL, *displs = NULL;
    double *all = NULL;
    if (crank == 0) {
        counts = xcalloc((size_t)me->nranks, sizeof(int));
        displs = xcalloc((size_t)me->nranks, sizeof(int));
        long off = 0;
        for (int r = 0; r < me->nranks; r++) {
            counts[r] = (int)(blk_size(me->nx, me->px, r % me->px) * blk_size(me->ny, me->py, r / me->px) * me->nz);
            displs[r] = (int)off;
            off += counts[r];
        }
        all = xcalloc((size_t)off, sizeof(double));
    }
    MPI_Gatherv(pack, (int)bn, MPI_DOUBLE, all, counts, displs, MPI_DOUBLE, 0, ccomm);
    double checksum = 0.0, ref_checksum = 0.0, maxdiff = 0.0, ref_status = -1.0;
    long mismatched = 0;
    if (crank == 0) {
        const long npts = me->nx * me->ny * me->nz;
        double *field = xcalloc((size_t)npts, sizeof(double)); /* level, row, column order */
        for (int r = 0; r < me->nranks; r++) {
            int rx = r % me->px, ry = r / me->px;
            long nx = blk_size(me->nx, me->px, rx), ny = blk_size(me->ny, me->py, ry);
            long ox = blk_start(me->nx, me->px, rx), oy = blk_start(me->ny, me->py, ry);
            for (long k = 0; k < me->nz; k++)
                for (long j = 0; j < ny; j++)
                    memcpy(field + (k * me->ny + oy + j) * me->nx + ox, all + displs[r] + (k * ny + j) * nx,
                           sizeof(double) * (size_t)nx);
        }
        for (long p = 0; p < npts; p++)
            checksum += field[p];
        if (!noref) {
            Block g[2];
            memset(g, 0, sizeof g);
            replay(&comp[ATM], &comp[OCN], couplings, &g[ATM], &g[OCN]);
            ref_status = 1.0;
            for (long k = 0; k < me->nz; k++)
                for (long j = 0; j < me->ny; j++)
                    for (long i = 0; i < me->nx; i++) {
                        double want = g[role].u[k * g[role].sp + (j + 1) * g[role].st + i + 1];
                        double got = field[(k * me->ny + j) * me->nx + i];
                        ref_checksum += want;
                        if (memcmp(&want, &got, sizeof want) != 0) {
                            double d = got > want ? got - want : want - got;
                            mismatched++;
                            maxdiff = d > maxdiff || d != d ? d : maxdiff;
                            ref_status = 0.0;
                        }
                    }
            block_free(&g[ATM]);
            block_free(&g[OCN]);
        }
        free(field);
    }
    long tot_errors = 0;
    long local_bad = errors + mismatched;
    MPI_Allreduce(&local_bad, &tot_errors, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);

    /* --- report --- */
    enum { NCOL = 16 };
    double row[NCOL] = {role, crank, (double)b.nx, (double)b.ny, init_s, main_loop_s, t_comp, t_halo, t_exch,
                        (double)rcv.npeer * (double)couplings, (double)values, (double)errors, checksum,
                        ref_checksum, ref_status, (double)mismatched};
    double *rows = wrank == 0 ? xcalloc((size_t)wsize * NCOL, sizeof(double)) : NULL;
    MPI_Gather(row, NCOL, MPI_DOUBLE, rows, NCOL, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    double gmaxdiff = 0.0;
    MPI_Reduce(&maxdiff, &gmaxdiff, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (wrank == 0) {
        char list[2][256];
        for (int c = 0; c < 2; c++)
            ranges(list[c], sizeof list[c], comp[c].world, comp[c].nranks);
        printf("# nm-coupled: coupled-model proxy: atmosphere and ocean components on split MPI_COMM_WORLD "
               "exchanging fluxes\n");
        nm_compute_print_build(wsize, nthreads, node_ranks);
        printf("# world_size=%d atm_ranks=%d ocn_ranks=%d mode=%s\n", wsize, comp[ATM].nranks, comp[OCN].nranks,
               mpmd ? "mpmd" : "spmd");
        long msgs[2] = {0, 0}, vals[2] = {0, 0}, errs = 0; /* received by each component */
        for (int r = 0; r < wsize; r++) {
            const double *w = rows + r * NCOL;
            msgs[(int)w[0]] += (long)w[9];
            vals[(int)w[0]] += (long)w[10];
            errs += (long)w[11];
        }
        for (int c = 0; c < 2; c++)
            printf("# component %s: grid=%ldx%ldx%ld blocks=%dx%d steps_per_coupling=%ld world_ranks=%s\n", ROLE[c],
                   comp[c].nx, comp[c].ny, comp[c].nz, comp[c].px, comp[c].py, comp[c].steps, list[c]);
        printf("# couplings=%ld regrid=nearest-cell routing=MxN messages_per_coupling: flux atm->ocn %ld, sst "
               "ocn->atm %ld\n",
               couplings, msgs[OCN] / couplings, msgs[ATM] / couplings);
        static const char *const col[5] = {"init_s", "main_loop_s", "compute_s", "halo_s", "exchange_s"};
        if (!quiet) {
            printf("# %-9s %4s %6s %6s %11s", "", "role", "rank", "world", "block");
            for (int k = 0; k < 5; k++)
                printf(" %12s", col[k]);
            printf("\n");
            for (int c = 0; c < 2; c++)
                for (int r = 0; r < wsize; r++) {
                    const double *w = rows + r * NCOL;
                    if ((int)w[0] != c)
                        continue;
                    char blk[32];
                    snprintf(blk, sizeof blk, "%.0fx%.0f", w[2], w[3]);
                    printf("  %-9s %4s %6.0f %6d %11s", "rank", ROLE[c], w[1], r, blk);
                    for (int k = 0; k < 5; k++)
                        printf(" %12.6f", w[4 + k]);
                    printf("\n");
                }
        }
        printf("# %-9s %4s %6s", "", "role", "ranks");
        for (int k = 0; k < 5; k++)
            printf(" %12s", col[k]);
        printf("   (the largest value over the component's ranks)\n");
        double ck[2] = {0, 0}, rck[2] = {0, 0}, rst[2] = {-1, -1}, mis[2] = {0, 0};
        for (int c = 0; c < 2; c++) {
            double mx[5] = {0, 0, 0, 0, 0};
            for (int r = 0; r < wsize; r++) {
                const double *w = rows + r * NCOL;
                if ((int)w[0] != c)
                    continue;
                for (int k = 0; k < 5; k++)
                    mx[k] = w[4 + k] > mx[k] ? w[4 + k] : mx[k];
                if (w[1] == 0.0) {
                    ck[c] = w[12];
                    rck[c] = w[13];
                    rst[c] = w[14];
                    mis[c] = w[15];
                }
            }
            printf("  %-9s %4s %6d", "component", ROLE[c], comp[c].nranks);
            for (int k = 0; k < 5; k++)
                printf(" %12.6f", mx[k]);
            printf("\n");
        }
        printf("exchanges %ld\n", couplings);
        printf("messages %ld\n", msgs[ATM] + msgs[OCN]);
        printf("exchanged_values %ld\n", vals[ATM] + vals[OCN]);
        for (int c = 0; c < 2; c++) {
            printf("checksum %s %.16e\n", ROLE[c], ck[c]);
            if (rst[c] >= 0.0)
                printf("reference_checksum %s %.16e\n", ROLE[c], rck[c]);
        }
        if (noref)
            printf("# reference: skipped (--no-reference): only the exchanged messages were checked\n");
        if (tot_errors == 0)
            printf("Verification PASSED: %ld coupling messages (%ld values) arrived exactly as sent; %s\n",
                   msgs[ATM] + msgs[OCN], vals[ATM] + vals[OCN],
                   noref ? "no reference replay" : "atm and ocn fields bitwise equal to the serial replay");
        fflush(stdout);
        if (tot_errors != 0) {
            char what[256] = "";
            size_t used = 0;
            for (int c = 0; c < 2; c++)
                if (rst[c] == 0.0)
                    used += (size_t)snprintf(what + used, sizeof what - used, ", %s field differs from the serial "
                                             "replay at %.0f points", ROLE[c], mis[c]);
            if (what[0])
                snprintf(what + used, sizeof what - used, " (largest difference %.3e)", gmaxdiff);
            fprintf(stderr, "nm-coupled: verification FAILED: %ld bad coupling message(s)%s\n", errs, what);
        }
        free(rows);
    }
    free(pack);
    free(counts);
    free(displs);
    free(all);
    free(req);
    free(sts);
    route_free(&snd);
    route_free(&rcv);
    block_free(&b);
    free(comp[ATM].world);
    free(comp[OCN].world);
    free(roles);
    MPI_Comm_free(&ccomm);
    MPI_Finalize();
    return tot_errors == 0 ? 0 : 1;
}
