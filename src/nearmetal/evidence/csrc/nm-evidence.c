/* nm-evidence: the facts of one process of a run, written as one JSON file
 * $NM_EVIDENCE_DIR/ev-HOST-PID.json after MPI_Finalize (nm-mpi-owner.c) or, for a program
 * without MPI (or one that never finalizes), at exit. Read by nearmetal.evidence.collect.
 *
 * At load (the constructor, just before main): the launch-relative time (CLOCK_REALTIME
 * against the launcher's NM_LAUNCH_NS), the CPUs this process may use (sched_getaffinity),
 * the CPU and NUMA node it runs on (getcpu), se.nr_migrations (/proc/self/sched, where the
 * kernel has CONFIG_SCHED_DEBUG) and context switches (/proc/self/status), LD_AUDIT and
 * LD_PRELOAD. At the end (what start-up need not pay for): the CPU, migrations and switches
 * again, its namespaces (/proc/self/ns/NAME), seccomp mode, the cgroup files that limit it
 * (raw: Python reads the limits from them, nearmetal.evidence.cgroup), the MPI library and
 * the profile.
 *
 * Built on the host, run in images nearmetal did not build: only old glibc symbols (dlsym,
 * dladdr pinned; stat by system call), no stack protector or fortified calls, no MPI header.
 */
#include "nm-evidence.h"

#include "../../trace/csrc/nm-tsc.h"
#include <dlfcn.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

__thread int nm_ev_depth __attribute__((tls_model("initial-exec")));
int nm_ev_multi, nm_ev_tsc;
static long long load_tick, load_mono;

static int tsc_usable(void)
{
    return nm_tsc_usable("NM_EVIDENCE_CLOCK");
}

/* ns per nm_ev_tick unit: 1, or the TSC's rate measured against CLOCK_MONOTONIC since load */
static double ns_per_tick(void)
{
    if (!nm_ev_tsc) return 1.0;
    long long ticks = nm_ev_tick() - load_tick, ns = nm_ev_now() - load_mono;
    return ticks > 0 && ns > 0 ? (double)ns / (double)ticks : 0.0;
}

void *nm_ev_next(const char *name) { return dlsym(RTLD_NEXT, name); }

unsigned long nm_ev_inode(const char *path)
{
    struct stat st;
#ifdef SYS_stat
    if (syscall(SYS_stat, path, &st) == 0) return (unsigned long)st.st_ino;
#else
    if (syscall(SYS_newfstatat, AT_FDCWD, path, &st, 0) == 0) return (unsigned long)st.st_ino;
#endif
    return 0;
}

/* ------------------------------------------------------------------ reading /proc */

static int read_text(const char *path, char *buf, int room)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    int n = 0;
    ssize_t k;
    while (n < room - 1 && (k = read(fd, buf + n, room - 1 - n)) > 0) n += (int)k;
    close(fd);
    buf[n] = '\0';
    return n;
}

/* the number after "key" and spaces, tabs or ':' in text; -1: absent */
static long long field(const char *text, const char *key)
{
    const char *p = text;
    size_t len = strlen(key);
    while ((p = strstr(p, key))) {
        if (p == text || p[-1] == '\n') {
            p += len;
            while (*p == ' ' || *p == '\t' || *p == ':') p++;
            return strtoll(p, NULL, 10);
        }
        p += len;
    }
    return -1;
}

typedef struct { long long migrations, voluntary, nonvoluntary; int cpu, node, seccomp; } moment;

static void take(moment *m)
{
    static char buf[8192];
    unsigned cpu = 0, node = 0;
    m->cpu = m->node = -1;
    if (syscall(SYS_getcpu, &cpu, &node, NULL) == 0) m->cpu = (int)cpu, m->node = (int)node;
    m->migrations = read_text("/proc/self/sched", buf, sizeof buf) > 0 ? field(buf, "se.nr_migrations") : -1;
    m->voluntary = m->nonvoluntary = m->seccomp = -1;
    if (read_text("/proc/self/status", buf, sizeof buf) > 0) {
        m->voluntary = field(buf, "voluntary_ctxt_switches");
        m->nonvoluntary = field(buf, "nonvoluntary_ctxt_switches");
        m->seccomp = (int)field(buf, "Seccomp");
    }
}

/* ------------------------------------------------------------------ JSON text */

static char out[1 << 17];
static int used;

static void put(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#include <stdarg.h>
static void put(const char *fmt, ...)
{
    if (used >= (int)sizeof out) return;
    va_list ap;
    va_start(ap, fmt);
    used += vsnprintf(out + used, sizeof out - used, fmt, ap);
    va_end(ap);
}

static void put_str(const char *s)
{
    if (!s) {
        put("null");
        return;
    }
    put("\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') put("\\%c", c);
        else if (c < 0x20) put("\\u%04x", c);
        else put("%c", c);
    }
    put("\"");
}

/* ------------------------------------------------------------------ at load */

static const char *const ns_names[] = {"user", "ipc", "net", "pid", "mnt", "uts", "cgroup"};
#define NNS (int)(sizeof ns_names / sizeof ns_names[0])

static struct {
    pid_t pid;
    long long load_real, launch_ns;
    char host[256], exe[1024], env_rank[32];
    cpu_set_t allowed;
    int allowed_ok;
    moment start;
    char *ld_audit, *ld_preload;
    char proc_cgroup[4096];
    int enabled, written;
    char dir[1024];
} me;

static unsigned long long ns_inode(const char *name)
{
    char path[64], link[128];
    snprintf(path, sizeof path, "/proc/self/ns/%s", name);
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n <= 0) return 0;
    link[n] = '\0';
    char *open_bracket = strchr(link, '[');
    return open_bracket ? strtoull(open_bracket + 1, NULL, 10) : 0;
}

static char *copy_env(const char *name)
{
    const char *v = getenv(name);
    return v ? strdup(v) : NULL;
}

__attribute__((constructor)) static void nm_evidence_load(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    me.load_real = (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
    nm_ev_tsc = tsc_usable();
    load_mono = nm_ev_now();
    load_tick = nm_ev_tick();
    const char *dir = getenv("NM_EVIDENCE_DIR");
    if (!dir || !*dir || strlen(dir) >= sizeof me.dir) return; /* loaded for its MPI hooks only */
    strcpy(me.dir, dir);
    me.enabled = 1;
    me.pid = getpid();
    const char *launch = getenv("NM_LAUNCH_NS");
    char *end = NULL;
    me.launch_ns = launch && *launch ? strtoll(launch, &end, 10) : -1;
    if (end && *end) me.launch_ns = -1;
    if (gethostname(me.host, sizeof me.host - 1) != 0) strcpy(me.host, "unknown");
    ssize_t n = readlink("/proc/self/exe", me.exe, sizeof me.exe - 1);
    me.exe[n > 0 ? n : 0] = '\0';
    const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID", NULL};
    for (int i = 0; vars[i] && !me.env_rank[0]; i++)
        if (getenv(vars[i]) && *getenv(vars[i])) snprintf(me.env_rank, sizeof me.env_rank, "%s", getenv(vars[i]));
    me.allowed_ok = sched_getaffinity(0, sizeof me.allowed, &me.allowed) == 0;
    take(&me.start);
    me.ld_audit = copy_env("LD_AUDIT");
    me.ld_preload = copy_env("LD_PRELOAD");
    /* namespaces, seccomp and cgroup are read at the end: nothing at start-up that can wait */
}

/* ------------------------------------------------------------------ cgroup files, raw */

static int has_token(const char *list, size_t len, const char *word)
{
    size_t w = strlen(word);
    const char *p = list, *end = list + len;
    while (p < end) {
        const char *comma = memchr(p, ',', end - p);
        size_t n = comma ? (size_t)(comma - p) : (size_t)(end - p);
        if (n == w && !memcmp(p, word, w)) return 1;
        p += n + 1;
    }
    return 0;
}

/* The first line of each limit file from the process's cgroup up to the hierarchy's root:
 * "path": "value" members. v2 ("0::PATH"): cpu.max, memory.max under /sys/fs/cgroup and
 * /sys/fs/cgroup/unified; v1: cpu.cfs_quota_us + cpu.cfs_period_us, memory.limit_in_bytes
 * under /sys/fs/cgroup/CONTROLLERS. Must match nearmetal/evidence/cgroup.py's read_tree. */
static void walk(const char *base, const char *rel, const char *const *files, int *first)
{
    char dir[2048], path[2300], value[128];
    if (snprintf(dir, sizeof dir, "%s%s", base, strcmp(rel, "/") ? rel : "") >= (int)sizeof dir) return;
    size_t base_len = strlen(base);
    for (;;) {
        for (int i = 0; files[i]; i++) {
            snprintf(path, sizeof path, "%s/%s", dir, files[i]);
            if (read_text(path, value, sizeof value) <= 0) continue;
            value[strcspn(value, "\n")] = '\0';
            put("%s", *first ? "" : ",");
            put_str(path);
            put(":");
            put_str(value);
            *first = 0;
        }
        if (strlen(dir) <= base_len) break;
        char *slash = strrchr(dir, '/');
        if (!slash || (size_t)(slash - dir) < base_len) break;
        *slash = '\0';
    }
}

static void cgroup_files(void)
{
    static const char *const v2[] = {"cpu.max", "memory.max", NULL};
    static const char *const cpu[] = {"cpu.cfs_quota_us", "cpu.cfs_period_us", NULL};
    static const char *const mem[] = {"memory.limit_in_bytes", NULL};
    int first = 1;
    put("{");
    for (const char *line = me.proc_cgroup; *line;) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        const char *c1 = memchr(line, ':', len);
        const char *c2 = c1 ? memchr(c1 + 1, ':', len - (c1 + 1 - line)) : NULL;
        if (c2) {
            char rel[1024], ctrls[256], base[400];
            size_t rl = len - (c2 + 1 - line), cl = (size_t)(c2 - c1 - 1);
            if (rl < sizeof rel && cl < sizeof ctrls) {
                memcpy(rel, c2 + 1, rl);
                rel[rl] = '\0';
                memcpy(ctrls, c1 + 1, cl);
                ctrls[cl] = '\0';
                if (!cl) {
                    walk("/sys/fs/cgroup", rel, v2, &first);
                    walk("/sys/fs/cgroup/unified", rel, v2, &first);
                } else {
                    snprintf(base, sizeof base, "/sys/fs/cgroup/%s", ctrls);
                    if (has_token(ctrls, cl, "cpu")) walk(base, rel, cpu, &first);
                    if (has_token(ctrls, cl, "memory")) walk(base, rel, mem, &first);
                }
            }
        }
        line += len + (eol != NULL);
    }
    put("}");
}

/* ------------------------------------------------------------------ the file */

static void put_moment(const char *key, const moment *m)
{
    put(",\"%s\":{\"cpu\":%d,\"node\":%d,\"nr_migrations\":%lld,\"voluntary\":%lld,\"nonvoluntary\":%lld}", key, m->cpu,
        m->node, m->migrations, m->voluntary, m->nonvoluntary);
}

void nm_ev_write(const char *why)
{
    if (!me.enabled || me.written || getpid() != me.pid) return; /* a forked child: its parent writes */
    me.written = 1;
    moment end;
    take(&end);
    if (read_text("/proc/self/cgroup", me.proc_cgroup, sizeof me.proc_cgroup) < 0) me.proc_cgroup[0] = '\0';
    used = 0;
    put("{\"format\":1,\"why\":\"%s\",\"pid\":%ld,\"host\":", why, (long)me.pid);
    put_str(me.host);
    put(",\"exe\":");
    put_str(me.exe);
    put(",\"mpi_rank\":%d,\"mpi_size\":%d,\"env_rank\":", nm_ev_mpi_seen ? nm_ev_mpi_rank : -1,
        nm_ev_mpi_seen ? nm_ev_mpi_size : -1);
    put_str(me.env_rank[0] ? me.env_rank : NULL);
    put(",\"launch_ns\":%lld,\"load_real_ns\":%lld,\"init_end_real_ns\":%lld", me.launch_ns, me.load_real,
        nm_ev_mpi_seen ? nm_ev_init_end_real : -1);
    put(",\"cpus_allowed\":[");
    for (int c = 0, first = 1; me.allowed_ok && c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &me.allowed)) put("%s%d", first ? "" : ",", c), first = 0;
    put("]");
    put_moment("start", &me.start);
    put_moment("end", &end);
    put(",\"ns\":{");
    for (int i = 0; i < NNS; i++) put("%s\"%s\":%llu", i ? "," : "", ns_names[i], ns_inode(ns_names[i]));
    put("},\"seccomp\":%d,\"ld_audit\":", end.seccomp);
    put_str(me.ld_audit);
    put(",\"ld_preload\":");
    put_str(me.ld_preload);
    put(",\"proc_cgroup\":");
    put_str(me.proc_cgroup);
    put(",\"cgroup_files\":");
    cgroup_files();
    if (nm_ev_mpi_seen) {
        char path[1024], soname[256];
        unsigned long inode;
        nm_ev_mpi_library(path, sizeof path, soname, sizeof soname, &inode);
        put(",\"mpi_library\":{\"path\":");
        put_str(path[0] ? path : NULL);
        put(",\"soname\":");
        put_str(soname[0] ? soname : NULL);
        put(",\"inode\":%lu}", inode);
        long long end_mono = nm_ev_finalize_mono ? nm_ev_finalize_mono : nm_ev_now();
        double scale = ns_per_tick();
        double wall = (double)(end_mono - nm_ev_init_end_mono), in_mpi = nm_ev_profile_ticks() * scale;
        if (in_mpi > wall) in_mpi = wall; /* sampled calls' time is an estimate */
        put(",\"mpi_profile\":{\"finalized\":%s,\"thread_multiple\":%s,\"clock\":\"%s\",\"wall_s\":%.9f,"
            "\"in_mpi_s\":%.9f,\"outside_mpi_s\":%.9f,",
            nm_ev_finalize_mono ? "true" : "false", nm_ev_multi ? "true" : "false", nm_ev_tsc ? "tsc" : "monotonic",
            wall / 1e9, in_mpi / 1e9, (wall - in_mpi) / 1e9);
        used += nm_ev_profile_json(out + used, (int)sizeof out - used, scale);
        put("}");
    } else {
        put(",\"mpi_library\":null,\"mpi_profile\":null");
    }
    put("}\n");
    if (used >= (int)sizeof out) return; /* cannot happen with these sizes; never a torn file */
    char tmp[1400], final[1300];
    snprintf(final, sizeof final, "%s/ev-%s-%ld.json", me.dir, me.host, (long)me.pid);
    snprintf(tmp, sizeof tmp, "%s.tmp", final);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return;
    int ok = 1;
    for (int k = 0; k < used && ok;) {
        ssize_t w = write(fd, out + k, used - k);
        if (w <= 0) ok = 0;
        else k += (int)w;
    }
    close(fd);
    if (ok) rename(tmp, final);
    else unlink(tmp);
}

__attribute__((destructor)) static void nm_evidence_unload(void) { nm_ev_write("exit"); }
