/* Shared helpers of nearmetal's compute proxies (nm-stream, nm-cg, nm-phases).
 * Every symbol is prefixed nm_compute_: every common/ source is linked into every kernel. */
#ifndef NM_COMPUTE_H
#define NM_COMPUTE_H

/* SIMD level this translation unit was compiled for: "avx512", "avx2", "avx", "sse2" or
 * "scalar" (from __AVX512F__, __AVX2__, __AVX__, __SSE2__). The common/ sources are compiled
 * with the kernel's own flags, so this is the kernel's level. */
const char *nm_compute_simd(void);
/* Build flavour from the Makefile's -DNM_BUILD: "native" or "portable" ("unknown" if unset). */
const char *nm_compute_build(void);
/* OpenMP threads per rank: OMP_NUM_THREADS if set, else 1 (nearmetal sets OMP_NUM_THREADS
 * only for --threads > 1, so --threads 1 must mean one thread, not one per core). */
int nm_compute_threads(void);
/* 1 when NM_CORRUPT=1 is set: the kernel must break its own result so that its
 * verification fails (tests prove detection with it). */
int nm_compute_corrupt(void);
/* Parse a decimal integer option value >= min; returns 0 and sets *out, or -1 (rank 0
 * prints why). */
int nm_compute_parse_long(const char *prog, int rank, int opt, const char *arg, long min, long *out);
/* Parse a floating-point option value > 0. */
int nm_compute_parse_double(const char *prog, int rank, int opt, const char *arg, double *out);
/* Ranks sharing this rank's node (collective over MPI_COMM_WORLD: every rank calls it). */
int nm_compute_node_ranks(void);
/* "# build=B simd=S ranks=R threads=T mpi=VERSION" identification line, and a warning line
 * when node_ranks * threads exceeds the node's online CPUs (rank 0 prints them). */
void nm_compute_print_build(int nranks, int nthreads, int node_ranks);

#endif
