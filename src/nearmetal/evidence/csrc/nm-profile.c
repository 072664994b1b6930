/* nm-evidence's MPI profile: one generic wrapper per MPI function (nm-evidence-fns.def), for
 * the C name and for gfortran's Fortran name (mpi_send_): two clock readings (nm_ev_tick: the
 * TSC, or CLOCK_MONOTONIC) and a few adds into a per-process array, no lock. The readings cost
 * about 12 ns, 2-4% of a 1 KiB shared-memory allreduce: a function's calls are all timed while
 * they are few (the first NM_EV_EXACT_CALLS: MPI_Init, MPI-IO opens) or often long (a quarter
 * of them over NM_EV_LONG_TICKS: timing costs under 1% of those; a count, not a mean, so one
 * call stretched by a preemption does not turn sampling off); otherwise a random 1 in
 * NM_EV_SAMPLE is timed and the rest estimated from them (nm_ev_count), so a short call costs
 * its count, a countdown and a jump (NM_WRAP: 2.2 ns a call here, as much as a wrapper that
 * only forwards). MPI handles are ints (MPICH) or pointers (Open MPI) and no wrapped function
 * takes a floating-point argument, so integer-class arguments passed through unchanged serve
 * both ABIs with one library: the wrappers jump with the caller's registers and stack as they
 * were; the slow path passes 16 on (x86-64 and aarch64 calling conventions: surplus arguments
 * are ignored by the callee). The real function is the next
 * definition of the same name (dlsym RTLD_NEXT, resolved at first use): another tool preloaded
 * after this one (the I/O tracer, a user's PMPI profiler) still sees the call.
 * Under MPI_THREAD_MULTIPLE the adds are atomic (relaxed); otherwise plain. */
#include "nm-evidence.h"

#include <stdio.h>
#include <string.h>

#ifndef __OPTIMIZE__
#error "nm-profile.c must be built optimised: its wrappers rely on sibling calls (build.py's FLAGS)"
#endif

/* 16: the most any wrapped function takes is 13 (gfortran's mpi_sendrecv_: 12 and ierror) */
#define NM_ARGS long a1, long a2, long a3, long a4, long a5, long a6, long a7, long a8, long a9, long a10, \
                long a11, long a12, long a13, long a14, long a15, long a16
#define NM_PASS a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16
typedef long (*nm_fn)(NM_ARGS);
/* The arguments passed in registers (6 on x86-64, 8 on aarch64): a wrapper declared with these
 * alone touches no stack argument, and its jumps (sibling calls, which -O2 and the build's
 * -foptimize-sibling-calls make of a `return f(same registers)`) leave the caller's stack
 * arguments where the function jumped to reads them. */
#if defined(__aarch64__)
#define NM_REG_ARGS long a1, long a2, long a3, long a4, long a5, long a6, long a7, long a8
#define NM_REG_PASS a1, a2, a3, a4, a5, a6, a7, a8
#else
#define NM_REG_ARGS long a1, long a2, long a3, long a4, long a5, long a6
#define NM_REG_PASS a1, a2, a3, a4, a5, a6
#endif
typedef long (*nm_reg_fn)(NM_REG_ARGS);

enum {
#define NM_FN(c, f, cls) NM_IDX_##c,
#include "nm-evidence-fns.def"
#undef NM_FN
    NM_NFNS
};
static const char *const fn_names[] = {
#define NM_FN(c, f, cls) "MPI_" #c,
#include "nm-evidence-fns.def"
#undef NM_FN
};
static const int fn_class[] = {
#define NM_FN(c, f, cls) NM_EV_##cls,
#include "nm-evidence-fns.def"
#undef NM_FN
};
static const char *const class_names[] = {"p2p", "collective", "wait", "io", "other"};

static nm_ev_count counts[NM_NFNS];

#define NM_EV_EXACT_CALLS 64
#define NM_EV_LONG_TICKS 4000 /* 1.1-2 us of a 2-3.5 GHz TSC; 4 us of CLOCK_MONOTONIC */
/* 1 in 16 timed cost Open MPI's 1 KiB allreduce 1.2-1.9% (a timed call goes the slow path and
 * reads the TSC twice, ~10 ns a reading here, on both ranks' common critical path); never timed,
 * it cost what a bare forwarder does (0.4-1.0%): 1 in 256 keeps the estimate (400,000 calls:
 * ~1,560 timed) at a sixteenth of that cost. */
#define NM_EV_SAMPLE 256

static __thread unsigned long long gap_state __attribute__((tls_model("initial-exec")));
static __thread int gap __attribute__((tls_model("initial-exec")));

/* Calls until this thread times a sampled call again: uniform in 1..2*NM_EV_SAMPLE-1 (mean
 * NM_EV_SAMPLE), from a xorshift generator seeded per thread, so that no period of the
 * program's calls lines up with the sampling. */
static int next_gap(void)
{
    if (!gap_state) gap_state = (((unsigned long long)nm_ev_now() << 1) ^ (unsigned long long)(long)&gap) | 1;
    gap_state ^= gap_state << 13;
    gap_state ^= gap_state >> 7;
    gap_state ^= gap_state << 17;
    return 1 + (int)(gap_state % (2 * NM_EV_SAMPLE - 1));
}

static inline void bump(long long *counter, long long by)
{
    if (__builtin_expect(nm_ev_multi, 0))
        __atomic_add_fetch(counter, by, __ATOMIC_RELAXED);
    else
        *counter += by;
}

/* A timed call's ticks; then whether the function's next calls are sampled: once it has had
 * NM_EV_EXACT_CALLS exact ones and fewer than a quarter of its timed calls were long. */
static void add_timed(nm_ev_count *c, int is_exact, long long ns)
{
    if (is_exact) {
        bump(&c->exact, 1);
        bump(&c->exact_ns, ns);
    } else {
        bump(&c->sampled, 1);
        bump(&c->timed, 1);
        bump(&c->sampled_ns, ns);
    }
    if (ns > NM_EV_LONG_TICKS) bump(&c->long_calls, 1);
    int sample = c->exact >= NM_EV_EXACT_CALLS && 4 * c->long_calls < c->exact + c->timed;
    __atomic_store_n(&c->sample, sample, __ATOMIC_RELAXED);
}

static long long calls_of(const nm_ev_count *c)
{
    return c->exact + c->sampled;
}

/* Ticks in this function's calls: the exact ones, plus the sampled ones scaled up to all calls
 * of their kind (by the exact calls' mean when none of them was timed yet). */
static double ticks_of(const nm_ev_count *c)
{
    double ticks = (double)c->exact_ns;
    if (c->timed)
        ticks += (double)c->sampled_ns * (double)c->sampled / (double)c->timed;
    else if (c->sampled && c->exact)
        ticks += (double)c->exact_ns / (double)c->exact * (double)c->sampled;
    return ticks;
}

/* The next definition of each wrapped name, resolved at its first call: [2i] MPI_X's, [2i+1]
 * gfortran's mpi_x_. */
static nm_fn reals[2 * NM_NFNS];
static const char *const fortran_names[] = {
#define NM_FN(c, f, cls) "mpi_" #f "_",
#include "nm-evidence-fns.def"
#undef NM_FN
};
/* Which wrapper jumped to slow_call: set right before the jump, on this thread. */
static __thread int slow_index __attribute__((tls_model("initial-exec")));
/* Set at the first MPI-IO call: from then on a wait or test may run ROMIO's generalized
 * requests, whose poll functions call MPI_Isend, MPI_Testall and the like, so the C wrappers
 * keep the nesting guard on every call (slow_call). */
static int nesting_seen;

/* Every call a wrapper does not forward itself: resolves the next definition at the first call,
 * forwards nested calls, and forwards the others with this thread's nesting guard on, timed
 * unless sampled and not its turn. */
static __attribute__((noinline, used)) long slow_call(NM_ARGS)
{
    int k = slow_index;
    nm_fn real = __atomic_load_n(&reals[k], __ATOMIC_RELAXED);
    if (__builtin_expect(!real, 0)) {
        if (!(real = (nm_fn)nm_ev_next(k & 1 ? fortran_names[k / 2] : fn_names[k / 2])))
            return 1; /* MPI_ERR_BUFFER/.. : never reached from a program without it */
        __atomic_store_n(&reals[k], real, __ATOMIC_RELAXED); /* every thread finds the same */
    }
    if (fn_class[k / 2] == NM_EV_IO && !__atomic_load_n(&nesting_seen, __ATOMIC_RELAXED))
        __atomic_store_n(&nesting_seen, 1, __ATOMIC_RELAXED);
    if (nm_ev_depth) return real(NM_PASS);
    nm_ev_count *c = &counts[k / 2];
    long r;
    nm_ev_depth = 1;
    int sample = __atomic_load_n(&c->sample, __ATOMIC_RELAXED);
    if (sample && --gap > 0) {
        r = real(NM_PASS); /* a sampled call this thread leaves untimed */
        nm_ev_depth = 0;
        bump(&c->sampled, 1);
        return r;
    }
    if (sample) gap = next_gap();
    long long t0 = nm_ev_tick();
    r = real(NM_PASS);
    long long ns = nm_ev_tick() - t0;
    nm_ev_depth = 0;
    add_timed(c, !sample, ns);
    return r;
}

/* One wrapper, declared with the register arguments only (NM_REG_ARGS): it jumps either to the
 * real function or to slow_call, and both read the remaining arguments from the caller's stack.
 * `leaf`: the C name of a function outside MPI-IO. Open MPI's and MPICH's point-to-point,
 * collective and wait code calls their internals, not MPI_ symbols, so until a program's first
 * MPI-IO call (nesting_seen) no wrapped function is reached from inside one: its sampled calls
 * left untimed are counted and jumped to, with no frame and no nesting guard, the cheapest a
 * counted call can be. (A user's callback that calls MPI, such as an error handler, is counted
 * as a call of its own.) The Fortran names (which may call the C ones) and MPI-IO (ROMIO calls
 * MPI_ functions) take slow_call always. */
#define NM_WRAP(sym, k, leaf)                                                         \
    __attribute__((visibility("default"))) long sym(NM_REG_ARGS)                     \
    {                                                                                 \
        nm_fn real = __atomic_load_n(&reals[k], __ATOMIC_RELAXED);                    \
        nm_ev_count *c = &counts[(k) / 2];                                            \
        if ((leaf) && __builtin_expect(real && !nm_ev_depth, 1) &&                    \
            !__atomic_load_n(&nesting_seen, __ATOMIC_RELAXED) &&                      \
            __atomic_load_n(&c->sample, __ATOMIC_RELAXED) && gap > 1) {               \
            gap--;                                                                    \
            bump(&c->sampled, 1);                                                     \
            return ((nm_reg_fn)real)(NM_REG_PASS);                                    \
        }                                                                             \
        slow_index = k;                                                               \
        nm_reg_fn slow = (nm_reg_fn)slow_call;                                        \
        __asm__("" : "+r"(slow)); /* an address, not a call of a known other type */  \
        return slow(NM_REG_PASS);                                                     \
    }

#define NM_FN(c, f, cls)                                      \
    NM_WRAP(MPI_##c, 2 * NM_IDX_##c, NM_EV_##cls != NM_EV_IO) \
    NM_WRAP(mpi_##f##_, 2 * NM_IDX_##c + 1, 0)
#include "nm-evidence-fns.def"
#undef NM_FN

long long nm_ev_profile_ticks(void)
{
    double ticks = 0;
    for (int i = 0; i < NM_NFNS; i++) ticks += ticks_of(&counts[i]);
    return (long long)ticks;
}

/* "classes":{...},"functions":{...} (functions called at least once) */
int nm_ev_profile_json(char *out, int room, double ns_per_tick)
{
    long long calls[NM_EV_NCLASSES] = {0};
    double ns[NM_EV_NCLASSES] = {0};
    for (int i = 0; i < NM_NFNS; i++) {
        calls[fn_class[i]] += calls_of(&counts[i]);
        ns[fn_class[i]] += ticks_of(&counts[i]);
    }
    int k = snprintf(out, room, "\"classes\":{");
    for (int c = 0; c < NM_EV_NCLASSES && k < room; c++)
        k += snprintf(out + k, room - k, "%s\"%s\":{\"calls\":%lld,\"time_s\":%.9f}", c ? "," : "", class_names[c],
                      calls[c], ns[c] * ns_per_tick / 1e9);
    if (k < room) k += snprintf(out + k, room - k, "},\"functions\":{");
    int first = 1;
    for (int i = 0; i < NM_NFNS && k < room; i++) {
        if (!calls_of(&counts[i])) continue;
        k += snprintf(out + k, room - k, "%s\"%s\":{\"calls\":%lld,\"timed_calls\":%lld,\"time_s\":%.9f,\"class\":\"%s\"}",
                      first ? "" : ",", fn_names[i], calls_of(&counts[i]), counts[i].exact + counts[i].timed,
                      ticks_of(&counts[i]) * ns_per_tick / 1e9, class_names[fn_class[i]]);
        first = 0;
    }
    if (k < room) k += snprintf(out + k, room - k, "}");
    return k;
}
