/* nm-evidence's MPI profile: one generic wrapper per MPI function (nm-evidence-fns.def), for
 * the C name and for gfortran's Fortran name (mpi_send_): two clock readings (nm_ev_tick: the
 * TSC, or CLOCK_MONOTONIC) and two adds into a per-process array, no lock. MPI handles are ints (MPICH) or pointers (Open
 * MPI) and no wrapped function takes a floating-point argument, so passing 12 integer-class
 * arguments through unchanged serves both ABIs with one library (x86-64 and aarch64 calling
 * conventions: surplus arguments are ignored by the callee). The real function is the next
 * definition of the same name (dlsym RTLD_NEXT, resolved at first use): another tool preloaded
 * after this one (the I/O tracer, a user's PMPI profiler) still sees the call.
 * Under MPI_THREAD_MULTIPLE the adds are atomic (relaxed); otherwise plain. */
#include "nm-evidence.h"

#include <stdio.h>
#include <string.h>

#define NM_ARGS long a1, long a2, long a3, long a4, long a5, long a6, long a7, long a8, long a9, long a10, \
                long a11, long a12
#define NM_PASS a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12
typedef long (*nm_fn)(NM_ARGS);

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

static inline void add(int i, long long ns)
{
    if (__builtin_expect(nm_ev_multi, 0)) {
        __atomic_add_fetch(&counts[i].calls, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&counts[i].ns, ns, __ATOMIC_RELAXED);
    } else {
        counts[i].calls++;
        counts[i].ns += ns;
    }
}

#define NM_WRAP(sym, next_name, i)                                          \
    __attribute__((visibility("default"))) long sym(NM_ARGS)               \
    {                                                                       \
        static nm_fn real;                                                  \
        if (__builtin_expect(!real, 0) && !(real = (nm_fn)nm_ev_next(next_name))) \
            return 1; /* MPI_ERR_BUFFER/.. : never reached from a program without it */ \
        if (nm_ev_depth) return real(NM_PASS);                              \
        nm_ev_depth = 1;                                                    \
        long long t0 = nm_ev_tick();                                        \
        long r = real(NM_PASS);                                             \
        long long t1 = nm_ev_tick();                                        \
        nm_ev_depth = 0;                                                    \
        add(i, t1 - t0);                                                    \
        return r;                                                           \
    }

#define NM_FN(c, f, cls) NM_WRAP(MPI_##c, "MPI_" #c, NM_IDX_##c) NM_WRAP(mpi_##f##_, "mpi_" #f "_", NM_IDX_##c)
#include "nm-evidence-fns.def"
#undef NM_FN

long long nm_ev_profile_ticks(void)
{
    long long ticks = 0;
    for (int i = 0; i < NM_NFNS; i++) ticks += counts[i].ns;
    return ticks;
}

/* "classes":{...},"functions":{...} (functions called at least once) */
int nm_ev_profile_json(char *out, int room, double ns_per_tick)
{
    long long calls[NM_EV_NCLASSES] = {0}, ns[NM_EV_NCLASSES] = {0};
    for (int i = 0; i < NM_NFNS; i++) {
        calls[fn_class[i]] += counts[i].calls;
        ns[fn_class[i]] += counts[i].ns;
    }
    int k = snprintf(out, room, "\"classes\":{");
    for (int c = 0; c < NM_EV_NCLASSES && k < room; c++)
        k += snprintf(out + k, room - k, "%s\"%s\":{\"calls\":%lld,\"time_s\":%.9f}", c ? "," : "", class_names[c],
                      calls[c], ns[c] * ns_per_tick / 1e9);
    if (k < room) k += snprintf(out + k, room - k, "},\"functions\":{");
    int first = 1;
    for (int i = 0; i < NM_NFNS && k < room; i++) {
        if (!counts[i].calls) continue;
        k += snprintf(out + k, room - k, "%s\"%s\":{\"calls\":%lld,\"time_s\":%.9f,\"class\":\"%s\"}", first ? "" : ",",
                      fn_names[i], counts[i].calls, counts[i].ns * ns_per_tick / 1e9, class_names[fn_class[i]]);
        first = 0;
    }
    if (k < room) k += snprintf(out + k, room - k, "}");
    return k;
}
