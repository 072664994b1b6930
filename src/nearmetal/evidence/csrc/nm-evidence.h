/* nm-evidence: what each rank of any program saw (docs/explain.md, "Evidence").
 * nm-evidence.c: facts at load and at the end, the file written; nm-mpi-owner.c: the one
 * owner of MPI_Init/MPI_Init_thread/MPI_Finalize among nearmetal's preloads (hooks for the
 * tracer); nm-profile.c: the PMPI-style profile's wrappers. */
#ifndef NM_EVIDENCE_H
#define NM_EVIDENCE_H
#define _GNU_SOURCE
#include <time.h>

/* glibc 2.34 gave these new symbol versions: the old ones load in older images too */
#if defined(__x86_64__)
__asm__(".symver dlsym,dlsym@GLIBC_2.2.5");
__asm__(".symver dladdr,dladdr@GLIBC_2.2.5");
#endif

#pragma GCC visibility push(hidden)

enum { NM_EV_P2P, NM_EV_COLL, NM_EV_WAIT, NM_EV_IO, NM_EV_OTHER, NM_EV_NCLASSES };

/* Nesting on this thread: a call made inside a timed MPI call (ROMIO's own collectives, a
 * Fortran binding calling the C one, MPI_Init's internals) is forwarded, not counted again. */
extern __thread int nm_ev_depth __attribute__((tls_model("initial-exec")));
extern int nm_ev_multi; /* MPI_THREAD_MULTIPLE was provided: counters are added atomically */

/* One function's counts (nm-profile.c). Its calls are timed one by one while it has had fewer
 * than NM_EV_EXACT_CALLS or a quarter or more of its timed calls were long; after that, a
 * random 1 in NM_EV_SAMPLE of them on average (ns: in nm_ev_tick's unit): exact_* are the calls
 * timed by the first rule, the others are `sampled` calls of which `timed` were timed, and their
 * time is estimated as sampled_ns * sampled / timed (every call of the sampled kind had the same
 * chance); `long_calls`: timed calls over NM_EV_LONG_TICKS; `sample`: whether its calls are
 * sampled now. */
typedef struct { long long exact, exact_ns, sampled, timed, sampled_ns, long_calls; int sample; } nm_ev_count;

static inline long long nm_ev_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* The profile's clock: TSC ticks where the TSC is invariant and the kernel's own clocksource
 * (about 10 ns a reading in a VM here, against 25 ns for clock_gettime), else CLOCK_MONOTONIC
 * ns; NM_EVIDENCE_CLOCK=monotonic forces the latter. Ticks become ns when the file is written,
 * by the ratio of both clocks since load. */
extern int nm_ev_tsc;
static inline long long nm_ev_tick(void)
{
#if defined(__x86_64__)
    if (__builtin_expect(nm_ev_tsc, 1)) return (long long)__builtin_ia32_rdtsc();
#endif
    return nm_ev_now();
}

void *nm_ev_next(const char *name);                        /* the next definition after this library */
int nm_ev_profile_json(char *out, int room, double ns_per_tick); /* "classes"/"functions" members */
long long nm_ev_profile_ticks(void);                       /* top-level ticks in MPI calls (estimated) */

/* the MPI start and end, for nm-evidence.c */
extern long long nm_ev_init_end_mono, nm_ev_finalize_mono, nm_ev_init_end_real;
extern int nm_ev_mpi_rank, nm_ev_mpi_size, nm_ev_mpi_seen;
void nm_ev_mpi_library(char *path, int room, char *soname, int soroom, unsigned long *inode);
void nm_ev_write(const char *why);
unsigned long nm_ev_inode(const char *path); /* 0: not found */ /* the evidence file, once per process */

#pragma GCC visibility pop
#endif
