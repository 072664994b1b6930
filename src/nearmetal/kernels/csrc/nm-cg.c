/* nm-cg: an HPCG-like preconditioned conjugate-gradient solve, MPI + OpenMP.
 *
 * Problem (as HPCG's): the 27-point stencil on a global box of
 * (npx*nx) x (npy*ny) x (npz*nz) points, diagonal 26, every neighbour inside the box -1,
 * stored as an explicit sparse matrix (27 slots per row, ELLPACK-like, so the solve reads
 * the matrix from memory as HPCG does). The process grid npx x npy x npz comes from
 * MPI_Dims_create; every rank owns an nx x ny x nz box with one ghost layer. The right-hand
 * side is b = A * ones (26 minus the number of neighbours), so the exact solution is all
 * ones; the start is x = 0.
 *
 * Solver: PCG with a symmetric Gauss-Seidel preconditioner: one forward and one backward
 * sweep per application, in 8-colour order (points with equal parities of i, j, k do not
 * touch each other in a 27-point stencil, so every colour is swept in parallel by the
 * OpenMP threads and the result does not depend on the thread count). Across ranks the
 * preconditioner is block SGS with zero ghost values (as HPCG's smoother applied to a zero
 * start), so it stays symmetric. Per iteration: one halo exchange of p (6 messages: x, y, z
 * faces, each including the ghosts of the previous dimensions, so edges and corners
 * arrive too), one SpMV, three MPI_Allreduce dot products.
 *
 * Flops (HPCG's counting, nnz = global nonzeros, n = global rows):
 *   setup r0 = b - A x0, |r0|:        2*nnz + 3*n
 *   iteration 1:                      6*nnz + 10*n  (SGS 4*nnz, SpMV 2*nnz, 3 dots, 2 axpys)
 *   every further iteration:          6*nnz + 12*n  (+ p = z + beta*p)
 * GFLOP/s = flops / solve time / 1e9, solve time = the slowest rank's, from the first
 * SpMV to the last iteration (matrix generation and verification are not timed).
 *
 * Verification (after the timed solve): the true residual |b - A x| / |b - A x0| (a fresh
 * halo exchange and SpMV, not the recurrence) must be below 10 * TOL, and the largest
 * |x - 1| below ERRTOL; otherwise every rank exits 1. NM_CORRUPT=1 perturbs one received
 * ghost value on rank 0 in every halo exchange (with one rank, which has no halo, one
 * element of x after the solve), which the verification must catch.
 *
 * usage: nm-cg [-x NX] [-y NY] [-z NZ] [-i MAXITER] [-t TOL] [-e ERRTOL]
 *   -x/-y/-z  local box per rank (default 64 64 64)
 *   -i        iteration limit (default 500); not converging within it fails verification
 *   -t        relative residual to stop at (default 1e-9)
 *   -e        largest allowed |x - 1| (default 1e4 * TOL: the error is about 10x the relative
 *             residual on the default problem) */
#include <mpi.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compute.h"

#define SLOTS 27
#define DIAG 26.0

typedef struct {
    int nx, ny, nz;         /* local interior box */
    long px, py, pz;        /* padded: interior + 2 ghost layers */
    long nrows, npad;       /* interior points, padded points */
    int *nnz;               /* nonzeros per row */
    int *rowp;              /* padded-vector index of every row */
    long cstart[9];         /* rows of colour c are cstart[c] .. cstart[c+1]-1 */
    int *cols;              /* SLOTS per row: indices into a padded vector */
    double *vals;           /* SLOTS per row */
    long nnz_local;
    int rank, nranks, dims[3], coords[3];
    int nb[3][2];           /* neighbour ranks, low and high side per dimension */
    MPI_Comm cart;
    double *sbuf[2], *rbuf[2];
    int corrupt_halo;
} Problem;

static inline long pidx(const Problem *P, long i, long j, long k)
{
    return (k * P->py + j) * P->px + i;
}

static void usage(int rank)
{
    if (rank == 0)
        fprintf(stderr, "usage: nm-cg [-x NX] [-y NY] [-z NZ] [-i MAXITER] [-t TOL] [-e ERRTOL]\n");
}

/* Rows are stored colour by colour (colour = parities of i, j, k), each colour in k, j, i
 * order, so the Gauss-Seidel sweeps stream the matrix. */
static void colour_extent(const Problem *P, int c, long *ni, long *nj, long *nk)
{
    *ni = (P->nx - (c & 1) + 1) / 2;
    *nj = (P->ny - ((c >> 1) & 1) + 1) / 2;
    *nk = (P->nz - ((c >> 2) & 1) + 1) / 2;
}

static void generate(Problem *P, double *b)
{
    long gnx = (long)P->dims[0] * P->nx, gny = (long)P->dims[1] * P->ny, gnz = (long)P->dims[2] * P->nz;
    long ox = (long)P->coords[0] * P->nx, oy = (long)P->coords[1] * P->ny, oz = (long)P->coords[2] * P->nz;
    long total = 0;
    P->cstart[0] = 0;
    for (int c = 0; c < 8; c++) {
        long ni, nj, nk;
        colour_extent(P, c, &ni, &nj, &nk);
        P->cstart[c + 1] = P->cstart[c] + ni * nj * nk;
    }
    for (int c = 0; c < 8; c++) {
        long ni, nj, nk;
        colour_extent(P, c, &ni, &nj, &nk);
        long ci = c & 1, cj = (c >> 1) & 1, ck = (c >> 2) & 1;
#pragma omp parallel for collapse(2) schedule(static) reduction(+ : total)
        for (long kk = 0; kk < nk; kk++)
            for (long jj = 0; jj < nj; jj++)
                for (long ii = 0; ii < ni; ii++) {
                    long i = 1 + ci + 2 * ii, j = 1 + cj + 2 * jj, k = 1 + ck + 2 * kk;
                    long row = P->cstart[c] + (kk * nj + jj) * ni + ii;
                    int cnt = 0;
                    for (int dk = -1; dk <= 1; dk++)
                        for (int dj = -1; dj <= 1; dj++)
                            for (int di = -1; di <= 1; di++) {
                                long gx = ox + i - 1 + di, gy = oy + j - 1 + dj, gz = oz + k - 1 + dk;
                                if (gx < 0 || gx >= gnx || gy < 0 || gy >= gny || gz < 0 || gz >= gnz)
                                    continue;
                                P->cols[row * SLOTS + cnt] = (int)pidx(P, i + di, j + dj, k + dk);
                                P->vals[row * SLOTS + cnt] = (di == 0 && dj == 0 && dk == 0) ? DIAG : -1.0;
                                cnt++;
                            }
                    P->nnz[row] = cnt;
                    P->rowp[row] = (int)pidx(P, i, j, k);
                    b[pidx(P, i, j, k)] = DIAG - (double)(cnt - 1);
                    total += cnt;
                }
    }
    P->nnz_local = total;
}

/* Copy the box [i0,i1]x[j0,j1]x[k0,k1] of v to or from buf. */
static long box_copy(const Problem *P, double *v, double *buf, const long lo[3], const long hi[3], int to_buf)
{
    long n = 0;
    for (long k = lo[2]; k <= hi[2]; k++)
        for (long j = lo[1]; j <= hi[1]; j++)
            for (long i = lo[0]; i <= hi[0]; i++, n++) {
                long p = pidx(P, i, j, k);
                if (to_buf)
                    buf[n] = v[p];
                else
                    v[p] = buf[n];
            }
    return n;
}

/* Fill v's ghost layer from the neighbours: x faces, then y faces including the x ghosts,
 * then z faces including the x and y ghosts (edges and corners travel in two or three hops). */
static void exchange(Problem *P, double *v)
{
    const long n[3] = {P->nx, P->ny, P->nz};
    for (int d = 0; d < 3; d++) {
        long lo[3], hi[3];
        for (int e = 0; e < 3; e++) {
            /* dimensions already exchanged include their ghosts */
            lo[e] = e < d ? 0 : 1;
            hi[e] = e < d ? n[e] + 1 : n[e];
        }
        MPI_Request req[4];
        int nreq = 0;
        long count = 1;
        for (int e = 0; e < 3; e++)
            if (e != d)
                count *= hi[e] - lo[e] + 1;
        for (int side = 0; side < 2; side++) {
            int peer = P->nb[d][side];
            if (peer == MPI_PROC_NULL)
                continue;
            MPI_Irecv(P->rbuf[side], (int)count, MPI_DOUBLE, peer, 1 - side, P->cart, &req[nreq++]);
        }
        for (int side = 0; side < 2; side++) {
            int peer = P->nb[d][side];
            if (peer == MPI_PROC_NULL)
                continue;
            long slo[3] = {lo[0], lo[1], lo[2]}, shi[3] = {hi[0], hi[1], hi[2]};
            slo[d] = shi[d] = side == 0 ? 1 : n[d];
            box_copy(P, v, P->sbuf[side], slo, shi, 1);
            /* tag = the side of the receiver the data lands on */
            MPI_Isend(P->sbuf[side], (int)count, MPI_DOUBLE, peer, side, P->cart, &req[nreq++]);
        }
        MPI_Status st[4];
        MPI_Waitall(nreq, req, st);
        for (int side = 0; side < 2; side++) {
            if (P->nb[d][side] == MPI_PROC_NULL)
                continue;
            if (P->corrupt_halo)
                P->rbuf[side][count / 2] += 0.5;
            long glo[3] = {lo[0], lo[1], lo[2]}, ghi[3] = {hi[0], hi[1], hi[2]};
            glo[d] = ghi[d] = side == 0 ? 0 : n[d] + 1;
            box_copy(P, v, P->rbuf[side], glo, ghi, 0);
        }
    }
}

/* y = A x over the interior (x's ghosts must be current). */
static void spmv(const Problem *P, const double *restrict x, double *restrict y)
{
#pragma omp parallel for schedule(static)
    for (long row = 0; row < P->nrows; row++) {
        const int *c = P->cols + row * SLOTS;
        const double *a = P->vals + row * SLOTS;
        int cnt = P->nnz[row];
        double s = 0.0;
        for (int e = 0; e < cnt; e++)
            s += a[e] * x[c[e]];
        y[P->rowp[row]] = s;
    }
}

/* z = M^-1 r: symmetric Gauss-Seidel from z = 0, forward colours 0..7 then backward 7..0.
 * Rows of one colour do not couple, so each colour is one parallel loop. */
static void symgs(const Problem *P, const double *restrict r, double *restrict z)
{
#pragma omp parallel for collapse(2) schedule(static)
    for (long k = 1; k <= P->nz; k++)
        for (long j = 1; j <= P->ny; j++)
            memset(z + pidx(P, 1, j, k), 0, sizeof(double) * (size_t)P->nx);
    for (int sweep = 0; sweep < 2; sweep++)
        for (int step = 0; step < 8; step++) {
            int c = sweep == 0 ? step : 7 - step;
#pragma omp parallel for schedule(static)
            for (long row = P->cstart[c]; row < P->cstart[c + 1]; row++) {
                const int *cc = P->cols + row * SLOTS;
                const double *a = P->vals + row * SLOTS;
                int cnt = P->nnz[row];
                long p = P->rowp[row];
                double s = r[p];
                for (int e = 0; e < cnt; e++)
                    s -= a[e] * z[cc[e]];
                s += DIAG * z[p]; /* the diagonal term was subtracted with the others */
                z[p] = s / DIAG;
            }
        }
}

static double dot(const Problem *P, const double *restrict x, const double *restrict y)
{
    double local = 0.0, global = 0.0;
#pragma omp parallel for collapse(2) schedule(static) reduction(+ : local)
    for (long k = 1; k <= P->nz; k++)
        for (long j = 1; j <= P->ny; j++) {
            long p = pidx(P, 1, j, k);
            for (long i = 0; i < P->nx; i++)
                local += x[p + i] * y[p + i];
        }
    MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_SUM, P->cart);
    return global;
}

/* w = alpha x + beta y over the interior */
static void waxpby(const Problem *P, double alpha, const double *x, double beta, const double *y, double *w)
{
#pragma omp parallel for collapse(2) schedule(static)
    for (long k = 1; k <= P->nz; k++)
        for (long j = 1; j <= P->ny; j++) {
            long p = pidx(P, 1, j, k);
            for (long i = 0; i < P->nx; i++)
                w[p + i] = alpha * x[p + i] + beta * y[p + i];
        }
}

static double *vec(const Problem *P)
{
    double *v = calloc((size_t)P->npad, sizeof(double));
    if (!v) {
        fprintf(stderr, "nm-cg: rank %d: out of memory\n", P->rank);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    return v;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    Problem P;
    memset(&P, 0, sizeof P);
    MPI_Comm_rank(MPI_COMM_WORLD, &P.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &P.nranks);
    long nx = 64, ny = 64, nz = 64, maxiter = 500;
    double tol = 1e-9, errtol = -1.0;
    int opt, bad_args = 0;
    while ((opt = getopt(argc, argv, "x:y:z:i:t:e:")) != -1) {
        switch (opt) {
        case 'x': bad_args |= nm_compute_parse_long("nm-cg", P.rank, opt, optarg, 2, &nx); break;
        case 'y': bad_args |= nm_compute_parse_long("nm-cg", P.rank, opt, optarg, 2, &ny); break;
        case 'z': bad_args |= nm_compute_parse_long("nm-cg", P.rank, opt, optarg, 2, &nz); break;
        case 'i': bad_args |= nm_compute_parse_long("nm-cg", P.rank, opt, optarg, 1, &maxiter); break;
        case 't': bad_args |= nm_compute_parse_double("nm-cg", P.rank, opt, optarg, &tol); break;
        case 'e': bad_args |= nm_compute_parse_double("nm-cg", P.rank, opt, optarg, &errtol); break;
        default: usage(P.rank); bad_args = 1;
        }
    }
    if (!bad_args && (optind < argc || nx * ny * nz > 1L << 30)) {
        if (P.rank == 0)
            fprintf(stderr, "nm-cg: %s\n", optind < argc ? "unexpected argument" : "local box too large (> 2^30 points)");
        bad_args = 1;
    }
    if (bad_args) {
        MPI_Finalize();
        return 2;
    }
    if (errtol < 0.0)
        errtol = 1e4 * tol;
    int nthreads = nm_compute_threads();
    int node_ranks = nm_compute_node_ranks();
    P.nx = (int)nx;
    P.ny = (int)ny;
    P.nz = (int)nz;
    P.px = nx + 2;
    P.py = ny + 2;
    P.pz = nz + 2;
    P.nrows = nx * ny * nz;
    P.npad = P.px * P.py * P.pz;

    /* 3-D process grid; dims[0] varies fastest in the global numbering (x). */
    int periods[3] = {0, 0, 0};
    MPI_Dims_create(P.nranks, 3, P.dims);
    MPI_Cart_create(MPI_COMM_WORLD, 3, P.dims, periods, 0, &P.cart);
    MPI_Cart_coords(P.cart, P.rank, 3, P.coords);
    for (int d = 0; d < 3; d++)
        MPI_Cart_shift(P.cart, d, 1, &P.nb[d][0], &P.nb[d][1]);
    long maxface = P.px * P.py;
    if (P.px * P.pz > maxface)
        maxface = P.px * P.pz;
    if (P.py * P.pz > maxface)
        maxface = P.py * P.pz;
    for (int s = 0; s < 2; s++) {
        P.sbuf[s] = malloc(sizeof(double) * (size_t)maxface);
        P.rbuf[s] = malloc(sizeof(double) * (size_t)maxface);
    }
    P.nnz = malloc(sizeof(int) * (size_t)P.nrows);
    P.rowp = malloc(sizeof(int) * (size_t)P.nrows);
    P.cols = malloc(sizeof(int) * (size_t)P.nrows * SLOTS);
    P.vals = malloc(sizeof(double) * (size_t)P.nrows * SLOTS);
    if (!P.nnz || !P.rowp || !P.cols || !P.vals || !P.sbuf[0] || !P.sbuf[1] || !P.rbuf[0] || !P.rbuf[1]) {
        fprintf(stderr, "nm-cg: rank %d: cannot allocate the matrix (%ld rows)\n", P.rank, P.nrows);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    double *b = vec(&P), *x = vec(&P), *r = vec(&P), *z = vec(&P), *p = vec(&P), *Ap = vec(&P);
    generate(&P, b);
    int corrupt = nm_compute_corrupt();
    P.corrupt_halo = corrupt && P.rank == 0 && P.nranks > 1;

    double nnz_global = 0.0, n_global = 0.0, nnz_local = (double)P.nnz_local, n_local = (double)P.nrows;
    MPI_Allreduce(&nnz_local, &nnz_global, 1, MPI_DOUBLE, MPI_SUM, P.cart);
    MPI_Allreduce(&n_local, &n_global, 1, MPI_DOUBLE, MPI_SUM, P.cart);

    /* --- timed solve --- */
    MPI_Barrier(P.cart);
    double t0 = MPI_Wtime();
    exchange(&P, x);
    spmv(&P, x, Ap);
    waxpby(&P, 1.0, b, -1.0, Ap, r);
    double normr0 = sqrt(dot(&P, r, r)), normr = normr0;
    double flops = 2.0 * nnz_global + 3.0 * n_global;
    double rtz = 0.0, rtz_old;
    long iters = 0;
    while (iters < maxiter && normr / normr0 > tol) {
        iters++;
        symgs(&P, r, z);
        rtz_old = rtz;
        rtz = dot(&P, r, z);
        if (iters == 1) {
            waxpby(&P, 1.0, z, 0.0, z, p);
            flops += 6.0 * nnz_global + 10.0 * n_global;
        } else {
            waxpby(&P, 1.0, z, rtz / rtz_old, p, p);
            flops += 6.0 * nnz_global + 12.0 * n_global;
        }
        exchange(&P, p);
        spmv(&P, p, Ap);
        double alpha = rtz / dot(&P, p, Ap);
        waxpby(&P, 1.0, x, alpha, p, x);
        waxpby(&P, 1.0, r, -alpha, Ap, r);
        normr = sqrt(dot(&P, r, r));
    }
    double mytime = MPI_Wtime() - t0, time_s = 0.0;
    MPI_Allreduce(&mytime, &time_s, 1, MPI_DOUBLE, MPI_MAX, P.cart);

    /* --- verification: true residual and solution error --- */
    if (corrupt && P.nranks == 1)
        x[pidx(&P, (P.nx + 1) / 2, (P.ny + 1) / 2, (P.nz + 1) / 2)] += 1.0;
    exchange(&P, x);
    spmv(&P, x, Ap);
    waxpby(&P, 1.0, b, -1.0, Ap, r);
    double true_rel = sqrt(dot(&P, r, r)) / normr0;
    double err = 0.0, maxerr = 0.0;
#pragma omp parallel for collapse(2) schedule(static) reduction(max : err)
    for (long k = 1; k <= P.nz; k++)
        for (long j = 1; j <= P.ny; j++)
            for (long i = 1; i <= P.nx; i++) {
                double e = fabs(x[pidx(&P, i, j, k)] - 1.0);
                err = e > err ? e : err;
            }
    MPI_Allreduce(&err, &maxerr, 1, MPI_DOUBLE, MPI_MAX, P.cart);
    int converged = normr / normr0 <= tol;
    int ok = converged && true_rel <= 10.0 * tol && maxerr <= errtol && isfinite(true_rel);

    if (P.rank == 0) {
        printf("# nm-cg: HPCG-like PCG, 27-point stencil, symmetric Gauss-Seidel preconditioner (8-colour, block per rank)\n");
        nm_compute_print_build(P.nranks, nthreads, node_ranks);
        printf("# grid=%dx%dx%d local=%ldx%ldx%ld global=%ldx%ldx%ld tol=%g errtol=%g maxiter=%ld\n", P.dims[0],
               P.dims[1], P.dims[2], nx, ny, nz, nx * P.dims[0], ny * P.dims[1], nz * P.dims[2], tol, errtol,
               maxiter);
        printf("rows            %.0f\n", n_global);
        printf("nonzeros        %.0f\n", nnz_global);
        printf("iterations      %ld\n", iters);
        printf("residual        %.6e\n", normr / normr0);
        printf("true_residual   %.6e\n", true_rel);
        printf("solution_error  %.6e\n", maxerr);
        printf("flops           %.6e\n", flops);
        printf("time_s          %.6f\n", time_s);
        printf("gflops          %.4f\n", time_s > 0.0 ? flops / time_s * 1e-9 : 0.0);
        if (ok)
            printf("Verification PASSED: relative residual %.3e <= %g, true %.3e <= %g, max |x-1| %.3e <= %g\n",
                   normr / normr0, tol, true_rel, 10.0 * tol, maxerr, errtol);
        fflush(stdout);
        if (!ok) {
            if (!converged)
                fprintf(stderr, "nm-cg: not converged: relative residual %.3e > %g after %ld iterations\n",
                        normr / normr0, tol, iters);
            if (!(true_rel <= 10.0 * tol))
                fprintf(stderr, "nm-cg: true relative residual |b - Ax|/|b| = %.3e > %g\n", true_rel, 10.0 * tol);
            if (!(maxerr <= errtol))
                fprintf(stderr, "nm-cg: solution error max |x - 1| = %.3e > %g\n", maxerr, errtol);
            fprintf(stderr, "nm-cg: verification FAILED\n");
        }
    }
    free(b); free(x); free(r); free(z); free(p); free(Ap);
    free(P.nnz); free(P.rowp); free(P.cols); free(P.vals);
    for (int s = 0; s < 2; s++) {
        free(P.sbuf[s]);
        free(P.rbuf[s]);
    }
    MPI_Comm_free(&P.cart);
    MPI_Finalize();
    return ok ? 0 : 1;
}
