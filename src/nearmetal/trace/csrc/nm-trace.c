/* nm-trace core: per-thread buffers, clock, parent stack, flush, recursion guard, fork and
 * exit handling; string ids and handle maps are in nm-intern.c, the MPI start and end (rank
 * discovery) in nm-mpi.c. The layers (layer-*.c) only wrap.
 *
 * Nothing is written until a thread's 1 MiB buffer fills or has waited a second (checked at
 * its next call), at MPI_Finalize, at thread exit, or at process exit (destructor): then whole
 * buffers go to DIR/trace-HOST-PID.nmt with the real write(). While the tracer works on a thread (guard set), intercepted calls on that
 * thread pass straight through, so its own I/O and bookkeeping are never recorded.
 */
#include "nm-trace.h"

#include "nm-tsc.h"
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NM_VERSION 2
#define NM_BUFFER (1 << 20)
#define NM_DATA (NM_BUFFER - 64)
#define NM_MAXDEPTH 32
#define NM_HIGH_FD 900 /* the trace file's descriptor: at or above this where the limit allows */
#define NM_FLUSH_NS 1000000000LL /* a thread's buffer is written at least this often while it calls */
#define NM_CHECK_NS 100000000LL  /* how often (in event time) a thread reads the clock to know */

enum { REC_STRING = 1, REC_EVENT = 2, REC_RANK = 3, REC_HINTS = 4, REC_END = 5, REC_CLOCK = 6 };
enum { CLOCK_NS = 0, CLOCK_TSC = 1 }; /* what event times count: CLOCK_MONOTONIC ns, or TSC ticks */

typedef struct { /* the file header: 128 bytes, then framed records (type, bytes) */
    char magic[8];
    uint32_t version, header_bytes;
    int64_t pid;
    int32_t rank, env_rank;
    int64_t monotonic_ns, realtime_ns;
    char host[64];
    uint32_t layers, clock;
    uint64_t ticks; /* the TSC read with monotonic_ns (CLOCK_TSC) */
} nm_header;

typedef struct { /* REC_EVENT: fixed 80 bytes */
    uint32_t type, bytes;
    uint64_t seq, parent;
    int64_t start_ns, end_ns, offset, size, result;
    uint32_t tid;
    uint16_t func;
    uint8_t layer, flags;
    uint32_t file, var;
} nm_event;
_Static_assert(sizeof(nm_header) == 128 && sizeof(nm_event) == 80, "record sizes are the format");

typedef struct { uint32_t type, bytes, kind, id, layer, length; } nm_string_head; /* + text, padded to 8 */
typedef struct { uint32_t type, bytes, file, length; uint64_t seq; } nm_hints_head; /* + key\0value\0... */
typedef struct { uint32_t type, bytes; int32_t rank, size; } nm_rank_rec;
typedef struct { uint32_t type, bytes; uint64_t events, dropped; } nm_end_rec;
typedef struct { uint32_t type, bytes; uint64_t ticks; int64_t monotonic_ns; } nm_clock_rec;

typedef struct nm_buf {
    struct nm_buf *next;
    volatile int lock, free;
    size_t used;
    uint64_t events; /* event records written into it (its lock held) */
    char pad[64 - sizeof(void *) - 2 * sizeof(int) - sizeof(size_t) - sizeof(uint64_t)];
    char data[NM_DATA];
} nm_buf;

typedef struct {
    int guard, depth, tid;
    uint64_t seq; /* this thread's last sequence number: its slot << 40 | calls begun */
    int active[NM_NLAYERS]; /* calls of each layer in progress: nested ones are the library's own */
    struct { uint64_t seq; int layer; } stack[NM_MAXDEPTH];
    nm_buf *buf;
    int64_t check_at, window_ns; /* the next clock check (stamp units); the last timed write (ns) */
} nm_thread;

/* initial-exec: the library is preloaded at start-up, and its TLS costs no __tls_get_addr */
static __thread nm_thread me __attribute__((tls_model("initial-exec")));

int nm_enabled[NM_NLAYERS];
static int tracing, closed, trace_fd = -1;
static char trace_dir[PATH_MAX - 128], host[64], trace_path[PATH_MAX];
static dev_t trace_dev;
static ino_t trace_ino;
static off_t trace_size; /* what it holds: a removed trace file's inode number can come back for a program's file */
__thread int nm_holding __attribute__((tls_model("initial-exec")));
static int32_t env_rank = -1, mpi_rank = -1, mpi_size;
volatile int nm_mpi_phase;
static uint64_t dropped;
static uint32_t thread_slots; /* threads that began a call: each numbers its own calls */
static uint32_t clock_kind;
static int64_t load_monotonic, load_realtime;
static uint64_t load_ticks;
static nm_buf *volatile buffers;
static volatile int file_lock;
static pid_t my_pid;
static pthread_key_t exit_key;
static int (*key_set)(pthread_key_t, const void *);
static ssize_t (*real_write)(int, const void *, size_t);
static int (*real_open)(const char *, int, ...), (*real_close)(int);

#define NM_LAYER(ID, name, on, colour) #name,
static const char *const layer_names[NM_NLAYERS] = {
#include "nm-layers.def"
};
#undef NM_LAYER
#define NM_LAYER(ID, name, on, colour) on,
static const int layer_default[NM_NLAYERS] = { /* traced when NM_TRACE_LAYERS is not set */
#include "nm-layers.def"
};
#undef NM_LAYER
#define NM_LAYER(ID, name, on, colour) " " #name
static const char unknown_layer[] = "NM_TRACE_LAYERS: unknown layer ignored (known:"
#include "nm-layers.def"
    "): ";
#undef NM_LAYER

static int64_t now_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Event times: the TSC where it is invariant and the kernel's own clocksource (then
 * CLOCK_MONOTONIC is a linear function of it), read in a few ns; the reader converts ticks to
 * CLOCK_MONOTONIC ns with the (ticks, ns) pairs written at load and at every flush. Elsewhere
 * clock_gettime (about 20 ns here, twice per call: the largest part of the tracer's cost). */
static inline int64_t stamp(void)
{
#if defined(__x86_64__)
    if (clock_kind == CLOCK_TSC) return (int64_t)__builtin_ia32_rdtsc();
#endif
    return now_ns(CLOCK_MONOTONIC);
}

/* A (ticks, ns) pair, the ticks read on both sides of the clock_gettime and averaged; read
 * again (a few times) when the thread was interrupted in between. Clock 0: ticks are 0. */
static void clock_pair(uint64_t *ticks, int64_t *ns)
{
    uint64_t best = UINT64_MAX;
    for (int k = 0; k < 4 && best > 2000; k++) {
        uint64_t before = (uint64_t)stamp();
        int64_t t = now_ns(CLOCK_MONOTONIC);
        uint64_t span = (uint64_t)stamp() - before;
        if (span < best) {
            best = span;
            *ns = t;
            *ticks = clock_kind == CLOCK_TSC ? before + span / 2 : 0;
        }
    }
}

static int tsc_usable(void)
{
    return nm_tsc_usable("NM_TRACE_CLOCK");
}

static void warn(const char *what, const char *detail)
{
    char line[PATH_MAX + 128];
    int n = snprintf(line, sizeof line, "nm-trace: %s%s\n", what, detail);
    if (n > 0 && syscall(SYS_write, 2, line, (size_t)(n < (int)sizeof line ? n : (int)sizeof line - 1)) < 0) return;
}

void *nm_real(const char *name) { return dlsym(RTLD_NEXT, name); }
int nm_guarded(void) { return me.guard; }
int nm_in_mpi_setup(void) { return nm_mpi_phase == 1 || nm_mpi_phase == 3; }

/* ------------------------------------------------------------------ output */

static void write_all(const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t k = real_write(trace_fd, c, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) { warn("cannot write the trace file: events are lost", ""); closed = 1; return; }
        c += k;
        n -= (size_t)k;
        trace_size += k;
    }
}

/* Staging for the records written when the file is created (file_lock held). */
static char stage[1 << 16];
static size_t staged;
static void stage_flush(void) { write_all(stage, staged); staged = 0; }
static void stage_string(int kind, uint32_t id, int layer, const char *s)
{
    uint32_t len = (uint32_t)strlen(s), bytes = (uint32_t)((sizeof(nm_string_head) + len + 7) & ~7u);
    if (bytes > sizeof stage) return;
    if (staged + bytes > sizeof stage) stage_flush();
    nm_string_head h = {REC_STRING, bytes, (uint32_t)kind, id, (uint32_t)layer, len};
    memset(stage + staged, 0, bytes);
    memcpy(stage + staged, &h, sizeof h);
    memcpy(stage + staged + sizeof h, s, len);
    staged += bytes;
}

static void stage_interned(int kind, uint32_t id, const char *text) { stage_string(kind, id, 0, text); }

/* The trace file's descriptor, moved to a high number (programs dup2 onto low fixed ones),
 * and its identity, to know it again. */
static int keep_fd(int fd)
{
    int high = (int)syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, NM_HIGH_FD);
    if (high >= 0) {
        real_close(fd);
        fd = high;
    }
    struct stat st;
    if (syscall(SYS_fstat, fd, &st) == 0) {
        trace_dev = st.st_dev;
        trace_ino = st.st_ino;
        trace_size = st.st_size;
    }
    return fd;
}

/* exact: holding what was written to it; else at least that (a child after fork does not
 * know what its parent has written since, only that the file grows) */
static int is_trace_file(int fd, int exact)
{
    struct stat st;
    return fd >= 0 && syscall(SYS_fstat, fd, &st) == 0 && st.st_dev == trace_dev && st.st_ino == trace_ino &&
           (exact ? st.st_size == trace_size : st.st_size >= trace_size);
}

/* Close the trace file, never the program's file that took its number. */
static void close_trace_file(int exact)
{
    if (is_trace_file(trace_fd, exact)) real_close(trace_fd);
    trace_fd = -1;
}

/* Is trace_fd still the trace file? A program may close descriptors it did not open (a
 * close loop, close_range) and get the number again for a file of its own: writing there
 * would put trace records into the program's data. Then the trace file is opened again,
 * for appending; where it cannot be, tracing stops and the number is left to the program. */
static int still_ours(void)
{
    if (is_trace_file(trace_fd, 1)) return 1;
    trace_fd = -1; /* the number is the program's now: never written to or closed */
    int fd = real_open(trace_path, O_WRONLY | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) { warn("the trace file was closed by the program and cannot be opened again: ", trace_path); closed = 1; return 0; }
    trace_fd = keep_fd(fd);
    return 1;
}

/* The file, created on the first flush: header, every function name, every string interned
 * so far (a child after fork starts a new file with its parent's ids), the rank if known. */
static int ensure_file(void)
{
    if (closed) return 0;
    if (trace_fd >= 0) return still_ours();
    char *path = trace_path;
    snprintf(path, sizeof trace_path, "%s/trace-%s-%ld.nmt", trace_dir, host, (long)my_pid);
    trace_fd = real_open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (trace_fd < 0) { warn("cannot create ", path); closed = 1; return 0; }
    trace_fd = keep_fd(trace_fd);
    nm_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, "NMTRACE", 8);
    h.version = NM_VERSION;
    h.header_bytes = sizeof h;
    h.pid = my_pid;
    h.rank = mpi_rank;
    h.env_rank = env_rank;
    h.monotonic_ns = load_monotonic;
    h.realtime_ns = load_realtime;
    h.clock = clock_kind;
    h.ticks = load_ticks;
    memcpy(h.host, host, sizeof h.host);
    for (int l = 0; l < NM_NLAYERS; l++) h.layers |= (uint32_t)nm_enabled[l] << l;
    write_all(&h, sizeof h);
#define NM_LAYER(ID, name, on, colour) nm_names_##name,
    const char *const *names[NM_NLAYERS] = {
#include "nm-layers.def"
    };
#undef NM_LAYER
#define NM_LAYER(ID, name, on, colour) nm_count_##name,
    const int counts[NM_NLAYERS] = {
#include "nm-layers.def"
    };
#undef NM_LAYER
    for (int l = 0; l < NM_NLAYERS; l++)
        for (int k = 0; k < counts[l]; k++) stage_string(NM_STR_FUNCTION, NM_FUNC(l, k), l, names[l][k]);
    nm_intern_each(stage_interned);
    stage_flush();
    if (nm_mpi_phase >= 2) {
        nm_rank_rec r = {REC_RANK, sizeof r, mpi_rank, mpi_size};
        write_all(&r, sizeof r);
    }
    return !closed;
}

/* A (ticks, ns) pair into the file (file_lock held): the reader's tick conversion. */
static void write_clock(void)
{
    if (clock_kind != CLOCK_TSC) return;
    nm_clock_rec r = {REC_CLOCK, sizeof r, 0, 0};
    clock_pair(&r.ticks, &r.monotonic_ns);
    write_all(&r, sizeof r);
}

static void flush_locked(nm_buf *b)
{
    if (!b->used) return;
    nm_lock(&file_lock);
    if (ensure_file()) {
        write_clock();
        write_all(b->data, b->used);
    }
    nm_unlock(&file_lock);
    b->used = 0;
}

/* This thread's buffer: a free one left by an exited thread, else a new mapping. */
static nm_buf *thread_buffer(void)
{
    nm_buf *b;
    for (b = buffers; b; b = b->next)
        if (b->free && __atomic_exchange_n(&b->free, 0, __ATOMIC_ACQUIRE)) break;
    if (!b) {
        void *p = mmap(NULL, sizeof(nm_buf), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return NULL;
        b = p;
        b->next = buffers;
        while (!__atomic_compare_exchange_n(&buffers, &b->next, b, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {}
    }
    me.buf = b;
    if (key_set) key_set(exit_key, b);
    return b;
}

/* Room for an n-byte record in this thread's buffer, its lock held (release_room() gives it
 * back); NULL if the record cannot be kept (counted as dropped). */
static char *room(size_t n, nm_buf **held)
{
    nm_buf *b = me.buf ? me.buf : thread_buffer();
    if (!b || closed || n > NM_DATA) { __atomic_add_fetch(&dropped, 1, __ATOMIC_RELAXED); return NULL; }
    nm_lock(&b->lock);
    if (b->used + n > NM_DATA) flush_locked(b);
    *held = b;
    return b->data + b->used;
}

static void release_room(nm_buf *b, size_t n)
{
    b->used += n;
    nm_unlock(&b->lock);
}

static void emit(const void *rec, size_t n)
{
    nm_buf *b;
    char *p = room(n, &b);
    if (!p) return;
    memcpy(p, rec, n);
    release_room(b, n);
}

/* Stamps in `span_ns` at the current rate; 0 (check at the next call) until the rate is known. */
static int64_t stamps_in(int64_t span_ns, int64_t now_stamp, int64_t ns)
{
    if (clock_kind != CLOCK_TSC) return span_ns;
    int64_t since_load = ns - load_monotonic;
    if (since_load < 1000000) return 0;
    return (int64_t)((double)(now_stamp - (int64_t)load_ticks) / (double)since_load * (double)span_ns);
}

/* Not only a full buffer goes to the file: one that has waited NM_FLUSH_NS does too, at the
 * thread's next call. A rank killed in the middle (mpirun's SIGKILL after ^C, a job's time
 * limit) then keeps all but its last second, not nothing. No timer or signal handler: the
 * check runs in the thread's own calls, where the tracer already takes the buffer's lock. */
static void flush_if_due(nm_buf *b, int64_t now_stamp)
{
    int64_t ns = now_ns(CLOCK_MONOTONIC);
    if (!me.window_ns) me.window_ns = ns;
    else if (ns - me.window_ns >= NM_FLUSH_NS) {
        nm_lock(&b->lock);
        flush_locked(b);
        nm_unlock(&b->lock);
        me.window_ns = ns;
    }
    me.check_at = now_stamp + stamps_in(NM_CHECK_NS, now_stamp, ns);
}

static void thread_exit(void *p)
{
    nm_buf *b = p;
    me.guard++;
    nm_lock(&b->lock);
    flush_locked(b);
    nm_unlock(&b->lock);
    me.buf = NULL;
    __atomic_store_n(&b->free, 1, __ATOMIC_RELEASE);
    me.guard--;
}

/* All threads' buffers to the file; final: also the end record, and no more events. */
static void flush_all(int final)
{
    if (nm_holding) return; /* exit() from a signal handler that interrupted the tracer: it would wait forever */
    int saved = errno;
    me.guard++;
    for (nm_buf *b = buffers; b; b = b->next) {
        nm_lock(&b->lock);
        flush_locked(b);
        nm_unlock(&b->lock);
    }
    if (final) {
        nm_lock(&file_lock);
        if (trace_fd >= 0 || nm_mpi_phase >= 2) {
            nm_end_rec e = {REC_END, sizeof e, 0, dropped};
            for (nm_buf *b = buffers; b; b = b->next) e.events += b->events;
            if (ensure_file()) {
                write_clock();
                write_all(&e, sizeof e);
            }
        }
        close_trace_file(1);
        closed = 1;
        nm_unlock(&file_lock);
    }
    me.guard--;
    errno = saved;
}

void nm_emit_string(int kind, uint32_t id, const char *text)
{
    char rec[sizeof(nm_string_head) + PATH_MAX + 8];
    size_t len = strlen(text);
    uint32_t n = len > PATH_MAX ? PATH_MAX : (uint32_t)len, bytes = (uint32_t)((sizeof(nm_string_head) + n + 7) & ~7u);
    nm_string_head head = {REC_STRING, bytes, (uint32_t)kind, id, 0, n};
    memset(rec, 0, bytes);
    memcpy(rec, &head, sizeof head);
    memcpy(rec + sizeof head, text, n);
    emit(rec, bytes);
}

void nm_emit_hints(uint32_t file, uint64_t seq, const char *pairs, uint32_t len)
{
    char rec[sizeof(nm_hints_head) + 8192 + 8];
    if (len > 8192) len = 8192;
    uint32_t bytes = (uint32_t)((sizeof(nm_hints_head) + len + 7) & ~7u);
    nm_hints_head h = {REC_HINTS, bytes, file, len, seq};
    memset(rec, 0, bytes);
    memcpy(rec, &h, sizeof h);
    memcpy(rec + sizeof h, pairs, len);
    emit(rec, bytes);
}

/* ------------------------------------------------------------------ calls */

int nm_begin(nm_call *c, int layer, int index)
{
    nm_thread *t = &me;
    if (!nm_enabled[layer] || t->guard || t->active[layer] || t->depth == NM_MAXDEPTH) return 0;
    c->layer = layer;
    c->func = NM_FUNC(layer, index);
    if (!t->seq) t->seq = (uint64_t)__atomic_add_fetch(&thread_slots, 1, __ATOMIC_RELAXED) << 40;
    c->seq = ++t->seq;
    c->parent = 0;
    for (int i = t->depth - 1; i >= 0; i--)
        if (t->stack[i].layer < layer) { c->parent = t->stack[i].seq; break; }
    t->stack[t->depth].seq = c->seq;
    t->stack[t->depth].layer = layer;
    t->depth++;
    t->active[layer]++;
    c->start = stamp();
    return 1;
}

void nm_stop(nm_call *c)
{
    c->end = stamp();
    c->saved_errno = errno;
    me.depth--;
    me.active[c->layer]--;
    me.guard++;
}

void nm_end(nm_call *c, uint32_t file, uint32_t var, int64_t offset, int64_t size, int64_t result, int failed)
{
    if (!me.tid) me.tid = (int)syscall(SYS_gettid);
    nm_buf *b;
    nm_event *e = (nm_event *)room(sizeof *e, &b); /* written in place: no copy on the hot path */
    if (e) {
        *e = (nm_event){REC_EVENT, sizeof *e, c->seq, c->parent, c->start, c->end, offset, size, result,
                        (uint32_t)me.tid, c->func, (uint8_t)c->layer, (uint8_t)(failed != 0), file, var};
        b->events++;
        release_room(b, sizeof *e);
        if (c->end >= me.check_at) flush_if_due(b, c->end);
    }
    me.guard--;
    errno = c->saved_errno;
}

void nm_drop(nm_call *c)
{
    me.guard--;
    errno = c->saved_errno;
}

/* ------------------------------------------------------------------ for nm-mpi.c */

int nm_tracing(void) { return tracing; }
void nm_guard(int delta) { me.guard += delta; }
void nm_flush(int final) { flush_all(final); }

void nm_record_rank(int rank, int size)
{
    mpi_rank = rank;
    mpi_size = size;
    nm_rank_rec r = {REC_RANK, sizeof r, rank, size};
    emit(&r, sizeof r);
}

/* ------------------------------------------------------------------ load, fork, exit */

static void after_fork_child(void)
{
    my_pid = (pid_t)syscall(SYS_getpid);
    file_lock = 0;
    nm_intern_after_fork();
    for (nm_buf *b = buffers; b; b = b->next) { /* the parent writes what was buffered */
        b->lock = 0;
        b->used = 0;
        b->events = 0;
        dropped = 0;
        if (b != me.buf) b->free = 1;
    }
    close_trace_file(0);
}

static void enable_layers(const char *list)
{
    char word[32];
    while (*list) {
        size_t n = strcspn(list, ",");
        int l = NM_NLAYERS;
        if (n < sizeof word) {
            memcpy(word, list, n);
            word[n] = '\0';
            for (l = 0; l < NM_NLAYERS && strcmp(word, layer_names[l]); l++) {}
        }
        if (l < NM_NLAYERS) nm_enabled[l] = 1;
        else if (n) warn(unknown_layer, list);
        list += n + (list[n] == ',');
    }
}

__attribute__((constructor)) static void nm_load(void)
{
    const char *dir = getenv("NM_TRACE_DIR");
    struct stat st;
    if (!dir || !*dir) return;
    if (strlen(dir) >= sizeof trace_dir || syscall(SYS_stat, dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        warn("NM_TRACE_DIR is not a directory, not tracing: ", dir);
        return;
    }
    real_write = (ssize_t (*)(int, const void *, size_t))nm_real("write");
    real_open = (int (*)(const char *, int, ...))nm_real("open");
    real_close = (int (*)(int))nm_real("close");
    if (!real_write || !real_open || !real_close) return;
    strcpy(trace_dir, dir);
    if (gethostname(host, sizeof host - 1) != 0) strcpy(host, "unknown");
    for (char *c = host; *c; c++) if (*c == '/') *c = '_';
    my_pid = getpid();
    clock_kind = tsc_usable() ? CLOCK_TSC : CLOCK_NS;
    load_realtime = now_ns(CLOCK_REALTIME);
    clock_pair(&load_ticks, &load_monotonic);
    const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID", NULL};
    for (int i = 0; vars[i] && env_rank < 0; i++)
        if (getenv(vars[i]) && *getenv(vars[i])) env_rank = atoi(getenv(vars[i]));
    /* resolved at run time: pthread_key_create moved from libpthread to libc in glibc 2.34 */
    int (*key_create)(pthread_key_t *, void (*)(void *)) =
        (int (*)(pthread_key_t *, void (*)(void *)))dlsym(RTLD_DEFAULT, "pthread_key_create");
    if (key_create && key_create(&exit_key, thread_exit) == 0)
        key_set = (int (*)(pthread_key_t, const void *))dlsym(RTLD_DEFAULT, "pthread_setspecific");
    pthread_atfork(NULL, NULL, after_fork_child);
    const char *layers = getenv("NM_TRACE_LAYERS");
    if (layers) enable_layers(layers);
    else for (int l = 0; l < NM_NLAYERS; l++) nm_enabled[l] = layer_default[l];
    tracing = 1;
}

__attribute__((destructor)) static void nm_unload(void)
{
    if (!tracing) return;
    flush_all(1);
    for (int l = 0; l < NM_NLAYERS; l++) nm_enabled[l] = 0;
}
