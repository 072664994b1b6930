/* nm-supervise's view of the job's process tree, from /proc: parent links (and, for the
 * launcher's helpers only, command names). Included by nm-supervise.c (one translation
 * unit, one binary). */

enum { MAX_PROCS = 65536 };
/* Zombies stay in the table for their parent links, never counted or signalled: a
 * multi-threaded launcher (Open MPI's mpirun) killed shows its leader as a zombie while
 * its other threads still exit, and its ranks still name it as their parent until the
 * last thread is gone; skipped, the chain from a rank up to the keeper would break there
 * and the keeper would see an empty tree and leave the ranks behind. */
struct proc {
    int pid, ppid;
    char zombie;
    char comm[16];
};
/* Sorted by pid (the order /proc lists them in; sorted again if not), found by binary
 * search: the table's pages are touched in order. A hash table spread over 512 KiB cost
 * ~140 page faults, 0.15-0.4 ms, on every run. */
static struct proc procs[MAX_PROCS];
static int n_procs;

static int by_pid(const void *a, const void *b)
{
    return ((const struct proc *)a)->pid - ((const struct proc *)b)->pid;
}

static int index_of(int pid)
{
    int lo = 0, hi = n_procs - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (procs[mid].pid == pid)
            return mid;
        if (procs[mid].pid < pid)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* Every process: pid, parent, command name, whether it is a zombie. */
static void scan(void)
{
    n_procs = 0;
    int sorted = 1;
    DIR *d = opendir("/proc");
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) && n_procs < MAX_PROCS) {
        int pid = atoi(e->d_name);
        if (pid <= 0)
            continue;
        char path[64], buf[512], state;
        snprintf(path, sizeof path, "/proc/%d/stat", pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n <= 0)
            continue;
        buf[n] = 0;
        char *open_paren = strchr(buf, '('), *close_paren = strrchr(buf, ')'); /* a name may hold anything */
        int ppid;
        if (!open_paren || !close_paren || close_paren < open_paren ||
            sscanf(close_paren + 1, " %c %d", &state, &ppid) != 2)
            continue;
        struct proc *p = &procs[n_procs];
        p->pid = pid;
        p->ppid = ppid;
        p->zombie = state == 'Z' || state == 'X';
        size_t len = (size_t)(close_paren - open_paren - 1);
        if (len > 15)
            len = 15;
        memcpy(p->comm, open_paren + 1, len);
        p->comm[len] = 0;
        if (n_procs > 0 && procs[n_procs - 1].pid > pid)
            sorted = 0;
        n_procs++;
    }
    closedir(d);
    if (!sorted)
        qsort(procs, (size_t)n_procs, sizeof procs[0], by_pid);
}

/* below[i] = 1 for each scanned process that descends from `root` (root itself excluded):
 * each process's parent chain is followed up once, the answer kept for all of it. */
static void mark_below(int root, char *below)
{
    static signed char known[MAX_PROCS]; /* -1 unknown, 0/1 answered */
    static int chain[MAX_PROCS];
    memset(known, -1, (size_t)n_procs);
    for (int i = 0; i < n_procs; i++) {
        int n = 0, j = i, answer = 0;
        while (j >= 0 && known[j] < 0 && n < n_procs) {
            chain[n++] = j;
            if (procs[j].ppid == root) {
                answer = 1;
                j = -1;
                break;
            }
            j = index_of(procs[j].ppid);
        }
        if (j >= 0 && n < n_procs && known[j] >= 0)
            answer = known[j];
        for (int k = 0; k < n; k++)
            known[chain[k]] = (signed char)answer;
    }
    for (int i = 0; i < n_procs; i++)
        below[i] = known[i] == 1;
}

static char below_keeper[MAX_PROCS], below_job[MAX_PROCS];

/* Signal every live descendant of `root`; the number signalled. */
static int signal_tree(int root, int sig)
{
    scan();
    mark_below(root, below_keeper);
    int found = 0;
    for (int i = 0; i < n_procs; i++)
        if (below_keeper[i] && !procs[i].zombie && kill(procs[i].pid, sig) == 0)
            found++;
    return found;
}

/* The launchers' own per-node processes: they wait for their ranks' output like the launcher. */
static int is_helper(const char *comm)
{
    return strcmp(comm, "hydra_pmi_proxy") == 0 || strcmp(comm, "orted") == 0 || strcmp(comm, "prted") == 0;
}

/* With sig 0: the number of processes below the keeper but outside the job's tree
 * (orphans, daemons) when nothing of the job's tree is left but the launcher's helpers,
 * else 0. With a signal: sends it to those processes, the number signalled. */
static int daemons_only(int job, int sig)
{
    scan();
    mark_below(getpid(), below_keeper);
    mark_below(job, below_job);
    for (int i = 0; i < n_procs; i++)
        if (below_keeper[i] && below_job[i] && !procs[i].zombie && !is_helper(procs[i].comm))
            return 0; /* a rank (or what runs it) is still there */
    int found = 0;
    for (int i = 0; i < n_procs; i++)
        if (below_keeper[i] && !below_job[i] && !procs[i].zombie && procs[i].pid != job &&
            (sig == 0 || kill(procs[i].pid, sig) == 0))
            found++;
    return found;
}

