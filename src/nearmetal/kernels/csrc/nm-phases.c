/* nm-phases: a BT-MZ-like hybrid MPI + OpenMP multi-zone stencil mini-app that separates
 * compute time from MPI communication time, per step and per rank (the profile of Table 6.3
 * of the PRACE container study: CPU vs MPI comm per ranks x threads distribution).
 *
 * Mesh: a periodic global grid GX x GY x NZ cut into ZX x ZY zones whose widths grow
 * geometrically (as BT-MZ's), so the largest zone has RATIO times the points of the
 * smallest. Zones go to ranks largest first, each to the least loaded rank: with few zones
 * per rank the load stays uneven, and the lighter ranks wait in the halo exchange (that
 * wait is communication time, as in BT-MZ's timers).
 *
 * Step (the main loop):
 *   compute   every zone of the rank: u' = u + C * (6-neighbour Laplacian of u), C = 0.1,
 *             OpenMP over the zone's (k, j) planes; z is periodic inside each zone
 *   halo      zone faces (west/east/south/north, periodic) to the neighbouring zones:
 *             MPI_Isend/Irecv between ranks, plain copies between zones of one rank
 *   allreduce MPI_Allreduce of the update norm (printed per step as rms)
 * Timed separately: init (after MPI_Init to the start of the main loop: zones, allocation,
 * initial field and halo), main loop, the three phases of every step, and fini
 * (verification and reports). comm_s = halo_s + allreduce_s.
 *
 * Verification: the field starts as one Fourier mode u = cos(kx*x + ky*y + kz*z + 0.3) with
 * the lowest wave numbers of the grid; the explicit scheme multiplies it by exactly
 * lambda = 1 - C * sum_d (2 - 2 cos k_d) per step, so after S steps every point must equal
 * lambda^S * cos(...). The largest deviation must stay below 1e-9 * lambda^S and the
 * checksum (sum of u^2, summed zone by zone in zone order: identical for any ranks x threads
 * distribution of one binary) within 1e-9 of the exact one; otherwise every rank exits 1.
 * NM_CORRUPT=1 adds 0.5 to one ghost value of the first zone of the last rank that owns a
 * zone after every halo exchange, which the check must catch.
 *
 * usage: nm-phases [-x GX] [-y GY] [-z NZ] [-X ZX] [-Y ZY] [-s STEPS] [-r RATIO] [-q]
 *   defaults: 256 x 256 x 64 points, 4 x 4 zones, 100 steps, ratio 20;
 *   -q prints no per-step lines (the summary only) */
#include <mpi.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compute.h"

#define COEF 0.1
#define PHASE 0.3

typedef struct {
    int id, zi, zj;          /* zone number (zi + zj*ZX) and position in the zone grid */
    int nx, ny, nz;          /* interior points */
    long ox, oy;             /* global offset of the first interior point */
    int owner;
    double *u, *v;           /* (nx+2) x (ny+2) x nz, ghost layer in x and y */
    double *sbuf[4], *rbuf[4];
} Zone;

static int GX = 256, GY = 256, NZ = 64, ZX = 4, ZY = 4;
static Zone *zones;
static int nzones;

static inline long zidx(const Zone *z, long i, long j, long k)
{
    return (k * (z->ny + 2) + j) * (z->nx + 2) + i;
}

/* zone widths: geometric, largest/smallest = sqrt(ratio), summing to total; -1 if too small */
static int widths(int total, int nzone, double ratio, int *w)
{
    double q = nzone > 1 ? pow(sqrt(ratio), 1.0 / (nzone - 1)) : 1.0, sum = 0.0;
    for (int i = 0; i < nzone; i++)
        sum += pow(q, i);
    int used = 0;
    for (int i = 0; i < nzone; i++) {
        w[i] = (int)floor(total * pow(q, i) / sum);
        if (w[i] < 1)
            w[i] = 1;
        used += w[i];
    }
    for (int i = nzone - 1; used < total; i = i == 0 ? nzone - 1 : i - 1) {
        w[i]++;
        used++;
    }
    return used == total ? 0 : -1;
}

static int neighbour(const Zone *z, int face)
{
    int zi = z->zi, zj = z->zj;
    switch (face) {
    case 0: zi = (zi + ZX - 1) % ZX; break;
    case 1: zi = (zi + 1) % ZX; break;
    case 2: zj = (zj + ZY - 1) % ZY; break;
    default: zj = (zj + 1) % ZY; break;
    }
    return zi + zj * ZX;
}

static long face_count(const Zone *z, int face)
{
    return (face < 2 ? (long)z->ny : (long)z->nx) * z->nz;
}

/* Copy a boundary plane (ghost = 0: the interior plane next to face; ghost = 1: the ghost
 * plane of face) to (dir = 1) or from (dir = 0) buf. */
static void face_copy(Zone *z, int face, int ghost, double *buf, int dir)
{
    long n = 0;
    if (face < 2) {
        long i = face == 0 ? (ghost ? 0 : 1) : (ghost ? z->nx + 1 : z->nx);
        for (long k = 0; k < z->nz; k++)
            for (long j = 1; j <= z->ny; j++, n++) {
                if (dir)
                    buf[n] = z->u[zidx(z, i, j, k)];
                else
                    z->u[zidx(z, i, j, k)] = buf[n];
            }
    } else {
        long j = face == 2 ? (ghost ? 0 : 1) : (ghost ? z->ny + 1 : z->ny);
        for (long k = 0; k < z->nz; k++) {
            if (dir)
                memcpy(buf + n, z->u + zidx(z, 1, j, k), sizeof(double) * (size_t)z->nx);
            else
                memcpy(z->u + zidx(z, 1, j, k), buf + n, sizeof(double) * (size_t)z->nx);
            n += z->nx;
        }
    }
}

static void halo(int rank, int corrupt, MPI_Request *req, MPI_Status *st)
{
    int nreq = 0;
    for (int zn = 0; zn < nzones; zn++) {
        Zone *z = &zones[zn];
        if (z->owner != rank)
            continue;
        for (int f = 0; f < 4; f++) {
            const Zone *nb = &zones[neighbour(z, f)];
            if (nb->owner != rank)
                MPI_Irecv(z->rbuf[f], (int)face_count(z, f), MPI_DOUBLE, nb->owner, z->id * 4 + f, MPI_COMM_WORLD,
                          &req[nreq++]);
        }
    }
    for (int zn = 0; zn < nzones; zn++) {
        Zone *z = &zones[zn];
        if (z->owner != rank)
            continue;
        for (int f = 0; f < 4; f++) {
            Zone *nb = &zones[neighbour(z, f)];
            face_copy(z, f, 0, z->sbuf[f], 1);
            if (nb->owner != rank)
                MPI_Isend(z->sbuf[f], (int)face_count(z, f), MPI_DOUBLE, nb->owner, nb->id * 4 + (f ^ 1),
                          MPI_COMM_WORLD, &req[nreq++]);
        }
    }
    /* zones of this rank: their neighbours' packed planes land in the ghosts directly */
    for (int zn = 0; zn < nzones; zn++) {
        Zone *z = &zones[zn];
        if (z->owner != rank)
            continue;
        for (int f = 0; f < 4; f++) {
            Zone *nb = &zones[neighbour(z, f)];
            if (nb->owner == rank)
                face_copy(z, f, 1, nb->sbuf[f ^ 1], 0);
        }
    }
    MPI_Waitall(nreq, req, st);
    int first = 1;
    for (int zn = 0; zn < nzones; zn++) {
        Zone *z = &zones[zn];
        if (z->owner != rank)
            continue;
        for (int f = 0; f < 4; f++)
            if (zones[neighbour(z, f)].owner != rank)
                face_copy(z, f, 1, z->rbuf[f], 0);
        if (corrupt && first)
            z->u[zidx(z, 0, 1, 0)] += 0.5;
        first = 0;
    }
}

/* one explicit step on a zone; returns the sum of squared updates */
static double compute_zone(Zone *z)
{
    const long sx = 1, sy = z->nx + 2, sz = (long)(z->nx + 2) * (z->ny + 2);
    const double *restrict u = z->u;
    double *restrict v = z->v;
    double sq = 0.0;
#pragma omp parallel for collapse(2) schedule(static) reduction(+ : sq)
    for (long k = 0; k < z->nz; k++)
        for (long j = 1; j <= z->ny; j++) {
            long kdn = (k == 0 ? z->nz - 1 - k : -1) * sz, kup = (k == z->nz - 1 ? -k : 1) * sz;
            long p = zidx(z, 1, j, k);
            for (long i = 0; i < z->nx; i++, p++) {
                double lap = u[p - sx] + u[p + sx] + u[p - sy] + u[p + sy] + u[p + kdn] + u[p + kup] - 6.0 * u[p];
                double d = COEF * lap;
                v[p] = u[p] + d;
                sq += d * d;
            }
        }
    double *t = z->u;
    z->u = z->v;
    z->v = t;
    return sq;
}

static void usage(int rank)
{
    if (rank == 0)
        fprintf(stderr, "usage: nm-phases [-x GX] [-y GY] [-z NZ] [-X ZX] [-Y ZY] [-s STEPS] [-r RATIO] [-q]\n");
}

int main(int argc, char **argv)
{
    int provided, rank, nranks;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    double t_start = MPI_Wtime();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    long gx = GX, gy = GY, nz = NZ, zx = ZX, zy = ZY, steps = 100;
    double ratio = 20.0;
    int opt, bad = 0, quiet = 0;
    while ((opt = getopt(argc, argv, "x:y:z:X:Y:s:r:q")) != -1) {
        switch (opt) {
        case 'x': bad |= nm_compute_parse_long("nm-phases", rank, opt, optarg, 1, &gx); break;
        case 'y': bad |= nm_compute_parse_long("nm-phases", rank, opt, optarg, 1, &gy); break;
        case 'z': bad |= nm_compute_parse_long("nm-phases", rank, opt, optarg, 1, &nz); break;
        case 'X': bad |= nm_compute_parse_long("nm-phases", rank, opt, optarg, 1, &zx); break;
        case 'Y': bad |= nm_compute_parse_long("nm-phases", rank, opt, optarg, 1, &zy); break;
        case 's': bad |= nm_compute_parse_long("nm-phases", rank, opt, optarg, 1, &steps); break;
        case 'r': bad |= nm_compute_parse_double("nm-phases", rank, opt, optarg, &ratio); break;
        case 'q': quiet = 1; break;
        default: usage(rank); bad = 1;
        }
    }
    if (!bad) {
        const char *why = NULL;
        if (optind < argc)
            why = "unexpected argument";
        else if (ratio < 1.0)
            why = "-r RATIO must be >= 1";
        else if (gx < zx || gy < zy)
            why = "every zone needs at least one point in x and y (GX >= ZX, GY >= ZY)";
        else if (zx * zy > 8000)
            why = "at most 8000 zones";
        else if (gx * gy * nz > 1L << 31)
            why = "grid too large";
        if (why) {
            if (rank == 0)
                fprintf(stderr, "nm-phases: %s\n", why);
            bad = 1;
        }
    }
    if (bad) {
        MPI_Finalize();
        return 2;
    }
    GX = (int)gx; GY = (int)gy; NZ = (int)nz; ZX = (int)zx; ZY = (int)zy;
    int nthreads = nm_compute_threads();
    int node_ranks = nm_compute_node_ranks();

    /* --- init: zones, assignment, field --- */
    int *wx = malloc(sizeof(int) * (size_t)ZX), *wy = malloc(sizeof(int) * (size_t)ZY);
    if (!wx || !wy || widths(GX, ZX, ratio, wx) || widths(GY, ZY, ratio, wy)) {
        if (rank == 0)
            fprintf(stderr, "nm-phases: cannot cut %dx%d points into %dx%d zones\n", GX, GY, ZX, ZY);
        MPI_Finalize();
        return 2;
    }
    nzones = ZX * ZY;
    zones = calloc((size_t)nzones, sizeof(Zone));
    int *order = malloc(sizeof(int) * (size_t)nzones);
    double *load = calloc((size_t)nranks, sizeof(double));
    int *nzown = calloc((size_t)nranks, sizeof(int));
    if (!zones || !order || !load || !nzown)
        MPI_Abort(MPI_COMM_WORLD, 3);
    long oy = 0;
    for (int zj = 0; zj < ZY; zj++) {
        long ox = 0;
        for (int zi = 0; zi < ZX; zi++) {
            Zone *z = &zones[zi + zj * ZX];
            z->id = zi + zj * ZX;
            z->zi = zi;
            z->zj = zj;
            z->nx = wx[zi];
            z->ny = wy[zj];
            z->nz = NZ;
            z->ox = ox;
            z->oy = oy;
            ox += wx[zi];
        }
        oy += wy[zj];
    }
    /* largest zone first (ties: lower id), each to the least loaded rank (ties: lower rank) */
    for (int i = 0; i < nzones; i++)
        order[i] = i;
    for (int i = 1; i < nzones; i++)
        for (int j = i; j > 0; j--) {
            long a = (long)zones[order[j]].nx * zones[order[j]].ny, b = (long)zones[order[j - 1]].nx * zones[order[j - 1]].ny;
            if (a > b) {
                int t = order[j];
                order[j] = order[j - 1];
                order[j - 1] = t;
            } else
                break;
        }
    for (int i = 0; i < nzones; i++) {
        int best = 0;
        for (int r = 1; r < nranks; r++)
            if (load[r] < load[best])
                best = r;
        Zone *z = &zones[order[i]];
        z->owner = best;
        load[best] += (double)z->nx * z->ny * z->nz;
        nzown[best]++;
    }
    int last_owner = 0; /* NM_CORRUPT hits the last rank that owns a zone */
    for (int zn = 0; zn < nzones; zn++)
        last_owner = zones[zn].owner > last_owner ? zones[zn].owner : last_owner;
    int corrupt = nm_compute_corrupt() && rank == last_owner;
    const double kx = 2.0 * M_PI / GX, ky = 2.0 * M_PI / GY, kz = 2.0 * M_PI / NZ;
    const double lambda = 1.0 - COEF * ((2.0 - 2.0 * cos(kx)) + (2.0 - 2.0 * cos(ky)) + (2.0 - 2.0 * cos(kz)));
    long maxface = 0;
    for (int zn = 0; zn < nzones; zn++) {
        Zone *z = &zones[zn];
        if (z->owner != rank)
            continue;
        size_t n = (size_t)(z->nx + 2) * (size_t)(z->ny + 2) * (size_t)z->nz;
        z->u = calloc(n, sizeof(double));
        z->v = calloc(n, sizeof(double));
        if (!z->u || !z->v)
            MPI_Abort(MPI_COMM_WORLD, 3);
        for (int f = 0; f < 4; f++) {
            z->sbuf[f] = malloc(sizeof(double) * (size_t)face_count(z, f));
            z->rbuf[f] = malloc(sizeof(double) * (size_t)face_count(z, f));
            if (!z->sbuf[f] || !z->rbuf[f])
                MPI_Abort(MPI_COMM_WORLD, 3);
            if (face_count(z, f) > maxface)
                maxface = face_count(z, f);
        }
#pragma omp parallel for collapse(2) schedule(static)
        for (long k = 0; k < z->nz; k++)
            for (long j = 1; j <= z->ny; j++)
                for (long i = 1; i <= z->nx; i++)
                    z->u[zidx(z, i, j, k)] = cos(kx * (z->ox + i - 1) + ky * (z->oy + j - 1) + kz * k + PHASE);
    }
    MPI_Request *req = malloc(sizeof(MPI_Request) * (size_t)(8 * nzones + 1));
    MPI_Status *st = malloc(sizeof(MPI_Status) * (size_t)(8 * nzones + 1));
    double *tc = calloc((size_t)steps, sizeof(double)), *th = calloc((size_t)steps, sizeof(double)),
           *ta = calloc((size_t)steps, sizeof(double)), *rms = calloc((size_t)steps, sizeof(double));
    if (!req || !st || !tc || !th || !ta || !rms)
        MPI_Abort(MPI_COMM_WORLD, 3);
    halo(rank, 0, req, st);
    const double npoints = (double)GX * GY * NZ;

    /* --- main loop --- */
    MPI_Barrier(MPI_COMM_WORLD);
    double t_loop = MPI_Wtime();
    double init_s = t_loop - t_start;
    for (long s = 0; s < steps; s++) {
        double t0 = MPI_Wtime();
        double sq = 0.0;
        for (int zn = 0; zn < nzones; zn++)
            if (zones[zn].owner == rank)
                sq += compute_zone(&zones[zn]);
        double t1 = MPI_Wtime();
        halo(rank, corrupt, req, st);
        double t2 = MPI_Wtime();
        double gsq = 0.0;
        MPI_Allreduce(&sq, &gsq, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        double t3 = MPI_Wtime();
        tc[s] = t1 - t0;
        th[s] = t2 - t1;
        ta[s] = t3 - t2;
        rms[s] = sqrt(gsq / npoints);
    }
    double t_end = MPI_Wtime();
    double main_loop_s = t_end - t_loop;

    /* --- fini: verification, reports --- */
    double amp = pow(lambda, (double)steps);
    double *zsum = calloc((size_t)nzones, sizeof(double)), *zexact = calloc((size_t)nzones, sizeof(double));
    double *gsum = calloc((size_t)nzones, sizeof(double)), *gexact = calloc((size_t)nzones, sizeof(double));
    if (!zsum || !zexact || !gsum || !gexact)
        MPI_Abort(MPI_COMM_WORLD, 3);
    double maxerr = 0.0, gmaxerr = 0.0;
    for (int zn = 0; zn < nzones; zn++) {
        Zone *z = &zones[zn];
        if (z->owner != rank)
            continue;
        double s = 0.0, e2 = 0.0; /* serial and in a fixed order: the checksum is reproducible */
        for (long k = 0; k < z->nz; k++)
            for (long j = 1; j <= z->ny; j++)
                for (long i = 1; i <= z->nx; i++) {
                    double val = z->u[zidx(z, i, j, k)];
                    double ex = amp * cos(kx * (z->ox + i - 1) + ky * (z->oy + j - 1) + kz * k + PHASE);
                    double d = fabs(val - ex);
                    maxerr = d > maxerr || d != d ? d : maxerr;
                    s += val * val;
                    e2 += ex * ex;
                }
        zsum[zn] = s;
        zexact[zn] = e2;
    }
    MPI_Reduce(zsum, gsum, nzones, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(zexact, gexact, nzones, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Allreduce(&maxerr, &gmaxerr, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double checksum = 0.0, exact = 0.0;
    for (int zn = 0; zn < nzones; zn++) {
        checksum += gsum[zn];
        exact += gexact[zn];
    }
    int ok = gmaxerr <= 1e-9 * amp && fabs(checksum - exact) <= 1e-9 * exact;
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);

    double *mc = NULL, *mh = NULL, *ma = NULL;
    if (rank == 0) {
        mc = malloc(sizeof(double) * (size_t)steps);
        mh = malloc(sizeof(double) * (size_t)steps);
        ma = malloc(sizeof(double) * (size_t)steps);
        if (!mc || !mh || !ma)
            MPI_Abort(MPI_COMM_WORLD, 3);
    }
    /* per step: the largest time over ranks of each phase */
    MPI_Reduce(tc, mc, (int)steps, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(th, mh, (int)steps, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(ta, ma, (int)steps, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    double comp_s = 0.0, halo_s = 0.0, ared_s = 0.0;
    for (long s = 0; s < steps; s++) {
        comp_s += tc[s];
        halo_s += th[s];
        ared_s += ta[s];
    }
    double fini_s = MPI_Wtime() - t_end;
    enum { NCOL = 9 };
    double mine[NCOL] = {(double)nzown[rank], load[rank], init_s, main_loop_s, comp_s, halo_s + ared_s,
                         halo_s, ared_s, fini_s};
    double *all = rank == 0 ? malloc(sizeof(double) * NCOL * (size_t)nranks) : NULL;
    if (rank == 0 && !all)
        MPI_Abort(MPI_COMM_WORLD, 3);
    MPI_Gather(mine, NCOL, MPI_DOUBLE, all, NCOL, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        double maxload = 0.0;
        for (int r = 0; r < nranks; r++)
            maxload = load[r] > maxload ? load[r] : maxload;
        printf("# nm-phases: BT-MZ-like multi-zone 3-D stencil, hybrid MPI+OpenMP: compute vs MPI time\n");
        nm_compute_print_build(nranks, nthreads, node_ranks);
        printf("# global=%dx%dx%d zones=%dx%d steps=%ld ratio=%g points=%.0f imbalance=%.3f (largest rank load / mean)\n",
               GX, GY, NZ, ZX, ZY, steps, ratio, npoints, maxload / (npoints / nranks));
        printf("# zone widths x:");
        for (int i = 0; i < ZX; i++)
            printf(" %d", wx[i]);
        printf("  y:");
        for (int j = 0; j < ZY; j++)
            printf(" %d", wy[j]);
        printf("\n");
        if (!quiet) {
            printf("# %-6s %6s %12s %12s %12s %12s %14s\n", "", "step", "compute_s", "halo_s", "allreduce_s", "comm_s",
                   "update_rms");
            printf("# (per step: the largest time over ranks of each phase)\n");
            for (long s = 0; s < steps; s++)
                printf("  %-6s %6ld %12.6f %12.6f %12.6f %12.6f %14.6e\n", "step", s + 1, mc[s], mh[s], ma[s],
                       mh[s] + ma[s], rms[s]);
        }
        static const char *const col[NCOL] = {"zones", "points", "init_s", "main_loop_s", "compute_s", "comm_s",
                                              "halo_s", "allreduce_s", "fini_s"};
        printf("# %-6s %6s", "", "rank");
        for (int c = 0; c < NCOL; c++)
            printf(" %12s", col[c]);
        printf("\n");
        double mx[NCOL] = {0};
        for (int r = 0; r < nranks; r++) {
            printf("  %-6s %6d %12.0f %12.0f", "rank", r, all[r * NCOL], all[r * NCOL + 1]);
            for (int c = 2; c < NCOL; c++)
                printf(" %12.6f", all[r * NCOL + c]);
            printf("\n");
            for (int c = 0; c < NCOL; c++)
                mx[c] = all[r * NCOL + c] > mx[c] ? all[r * NCOL + c] : mx[c];
        }
        printf("  %-6s %6s %12.0f %12.0f", "rank", "max", mx[0], mx[1]);
        for (int c = 2; c < NCOL; c++)
            printf(" %12.6f", mx[c]);
        printf("\n");
        printf("checksum %.15e\n", checksum);
        printf("exact_checksum %.15e\n", exact);
        printf("max_error %.6e\n", gmaxerr);
        if (ok)
            printf("Verification PASSED: max |u - exact| %.3e <= %.3e, checksum within 1e-9 of exact\n", gmaxerr,
                   1e-9 * amp);
        fflush(stdout);
        if (!ok)
            fprintf(stderr,
                    "nm-phases: verification FAILED: max |u - exact| = %.3e (limit %.3e), checksum %.15e vs exact "
                    "%.15e\n",
                    gmaxerr, 1e-9 * amp, checksum, exact);
        free(all);
        free(mc);
        free(mh);
        free(ma);
    }
    for (int zn = 0; zn < nzones; zn++) {
        Zone *z = &zones[zn];
        free(z->u);
        free(z->v);
        for (int f = 0; f < 4; f++) {
            free(z->sbuf[f]);
            free(z->rbuf[f]);
        }
    }
    free(zones); free(order); free(load); free(nzown); free(wx); free(wy); free(req); free(st);
    free(tc); free(th); free(ta); free(rms); free(zsum); free(zexact); free(gsum); free(gexact);
    MPI_Finalize();
    return ok ? 0 : 1;
}
