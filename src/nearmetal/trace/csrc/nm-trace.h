/* nm-trace: the core's interface to the layer files (layer-*.c), like Darshan's runtime:
 * one file per I/O layer, one shared object (nm-trace.so) preloaded into each MPI rank.
 *
 * A layer wrapper resolves the real function lazily (nm_real: dlsym RTLD_NEXT), asks
 * nm_begin whether to record the call, calls the real function, stops the clock at once
 * (nm_stop), works out file, variable, offset and size under the tracer's guard, and hands
 * the event to nm_end, which restores errno. docs/trace-format.md describes the output.
 *
 * No MPI, netCDF or HDF5 header is included: every prototype is our own, with MPI handles
 * as pointer-sized integers (x86-64 SysV passes int and pointer handles in the same 64-bit
 * registers), so one host-built library serves Open MPI and MPICH, natively and in images.
 */
#ifndef NM_TRACE_H
#define NM_TRACE_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__x86_64__)
/* Older glibc symbol versions, so the library loads in images older than the host. */
__asm__(".symver dlsym,dlsym@GLIBC_2.2.5");
__asm__(".symver memcpy,memcpy@GLIBC_2.2.5");
#endif

/* Layers, highest first (nm-layers.def): a call's parent is the innermost active call of a
 * lower number. NM_NETCDF, NM_PNETCDF, ... */
#define NM_LAYER(ID, name, on, colour) NM_##ID,
enum nm_layer {
#include "nm-layers.def"
    NM_NLAYERS
};
#undef NM_LAYER

/* A function id is layer << 12 | index in that layer's name table. */
#define NM_FUNC(layer, index) ((uint16_t)((layer) << 12 | (index)))

enum nm_string_kind { NM_STR_FUNCTION = 1, NM_STR_FILE = 2, NM_STR_VAR = 3 };

typedef intptr_t nm_handle; /* MPI_Comm, MPI_Info, MPI_Datatype, MPI_File, MPI_Request: opaque */

/* One call in progress on this thread (on the wrapper's stack). */
typedef struct {
    uint64_t seq, parent;
    int64_t start, end;
    int layer, saved_errno;
    uint16_t func;
} nm_call;

/* The core's interface is internal to nm-trace.so: direct calls, no PLT, and a program's own
 * symbols of these names cannot interpose on them. (The wrappers keep default visibility.) */
#pragma GCC visibility push(hidden)

/* Set once at load time from NM_TRACE_DIR / NM_TRACE_LAYERS; all zero: forward only. */
extern int nm_enabled[NM_NLAYERS];

/* Each layer's function names, indexed like its wrappers (written as string records):
 * layer-NAME.c defines nm_names_NAME[] and nm_count_NAME. */
#define NM_LAYER(ID, name, on, colour) extern const char *const nm_names_##name[]; extern const int nm_count_##name;
#include "nm-layers.def"
#undef NM_LAYER

void *nm_real(const char *name);                  /* the next definition (RTLD_NEXT), or NULL */
int nm_begin(nm_call *c, int layer, int index);   /* 1: record it (nm_stop, nm_end follow) */
void nm_stop(nm_call *c);                         /* right after the real call: clock, pop, guard on */
void nm_end(nm_call *c, uint32_t file, uint32_t var, int64_t offset, int64_t size, int64_t result,
            int failed);                          /* emit the event; guard off, errno restored */
void nm_drop(nm_call *c);                         /* a begun call that is not recorded after all */
uint32_t nm_intern(int kind, const char *s);      /* string id for a file or variable; 0: none */
uint32_t nm_intern_path(const char *path);        /* canonical absolute path of a file, interned */
void nm_emit_hints(uint32_t file, uint64_t seq, const char *pairs, uint32_t len);
int nm_guarded(void);                             /* inside the tracer's own work on this thread */

void nm_emit_string(int kind, uint32_t id, const char *text); /* a string record, this thread */
void nm_intern_each(void (*fn)(int kind, uint32_t id, const char *text));
void nm_intern_after_fork(void);

/* Spin locks: held for a few instructions, or for one buffer write at a flush. nm_holding
 * counts the ones this thread holds: a signal handler that calls exit() while it holds one
 * reaches the exit flush, which must not wait for a lock its own thread will never release. */
extern __thread int nm_holding __attribute__((tls_model("initial-exec")));
static inline void nm_lock(volatile int *l)
{
    nm_holding++;
    while (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE))
        while (*l) sched_yield(); /* a flush may hold it for a whole buffer write */
}
static inline void nm_unlock(volatile int *l)
{
    __atomic_store_n(l, 0, __ATOMIC_RELEASE);
    nm_holding--;
}

/* 0 before MPI_Init, 1 inside it, 2 running, 3 in MPI_Finalize, 4 after (set by nm-mpi.c) */
extern volatile int nm_mpi_phase;
/* Is the MPI library inside MPI_Init / MPI_Finalize? (its own files are not the user's) */
int nm_in_mpi_setup(void);
int nm_tracing(void);                   /* NM_TRACE_DIR was usable */
void nm_guard(int delta);               /* +1: the tracer's own work starts on this thread, -1: ends */
void nm_flush(int final);               /* all buffers to the file; final: end record, close */
void nm_record_rank(int rank, int size);

/* Small handle -> file id maps (MPI_File, ncid, hid_t); a lock each, opens are rare. */
typedef struct {
    volatile int lock;
    int n;
    volatile uint32_t generation; /* bumped by every put and del: readers' cached lookups expire */
    volatile uint32_t cache_slot; /* this map's entry in each thread's lookup cache, 1-based; 0: not yet */
    struct { int64_t key; uint32_t value; } slot[1024];
} nm_map;
void nm_map_put(nm_map *m, int64_t key, uint32_t value);
uint32_t nm_map_get(nm_map *m, int64_t key);
void nm_map_del(nm_map *m, int64_t key);

/* A netCDF or PnetCDF call on an open file id alone (close, enddef, sync, ...): recorded on the
 * id's file (file_of), the id forgotten from `files` when `forget` and the call succeeded. */
int nm_id_call(int (*real)(int), int layer, int index, int id, nm_map *files, uint32_t (*file_of)(int), int forget);

/* The real function, resolved once; `fail` is returned when the program does not have it
 * (a wrapper is then never reached from the program itself, but stay safe). */
#define NM_REAL(ptr, name, fail)                                        \
    do {                                                                \
        if (!(ptr) && !((ptr) = (__typeof__(ptr))nm_real(name))) {     \
            errno = ENOSYS;                                             \
            return fail;                                                \
        }                                                               \
    } while (0)

#pragma GCC visibility pop

#endif
