/* What a job that did not end cleanly leaves in /dev/shm. MPI libraries put their
 * shared-memory segments there and unlink them at MPI_Finalize; a rank killed before that
 * (^C, a time-out, MPI_Abort, nm-supervise's own SIGKILL) leaves them, 4 MiB per rank for
 * Open MPI's vader, and /dev/shm is the node's memory until the next reboot (Open MPI issue
 * #7394; Slurm does not clean it either unless told to). Included by nm-supervise.c.
 *
 * Removed after such a job: a regular file of the job's account in /dev/shm whose name
 * starts as one of these libraries' segments does, changed (created) since the job
 * started, and neither open nor mapped by any process on the node (compared by device and
 * inode, not by path), so a segment of another job still running is never touched. Where
 * /proc shows only a PID namespace, nothing is removed. A process whose descriptors /proc does
 * not let this account read (another account's; a non-dumpable one: an agent, init) is taken
 * not to hold one: MPI ranks are readable by their own account. No cost for a job that exits 0. */
#include <sys/fsuid.h>
#include <sys/sysmacros.h>

static const char *const leftover_prefixes[] = {
    "vader_segment.",  /* Open MPI 4's vader BTL: vader_segment.HOST.JOBID.RANK */
    "sm_segment.",     /* Open MPI 5's sm BTL */
    "ucx_shm_posix_",  /* UCX's posix transport (Open MPI's pml ucx) */
    "mpich_shar_tmp",  /* MPICH's shared-memory segments */
    "open_mpi.",       /* Open MPI's shmem posix component */
    /* Not ch-run --join's ch-run_shm-TAG and sem.ch-run_sem-TAG: a joining job's peers unmap
     * them before the last one arrives, so they are unused while that job runs; the
     * Charliecloud runtime removes its own job's (after_job), doctor --clean-shm old ones. */
    NULL,
};

enum { MAX_LEFTOVERS = 4096 };

static struct leftover {
    char name[NAME_MAX + 1];
    dev_t dev;
    ino_t ino;
    off_t size;            /* size and times changed before the removal (a new job truncating */
    struct timespec ctime; /* or writing it): kept; the size as well, where the kernel's times */
    struct timespec mtime; /* are coarser than the two steps */
    char used;
} leftovers[MAX_LEFTOVERS];

static int same_time(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

static int is_leftover_name(const char *name)
{
    for (int i = 0; leftover_prefixes[i]; i++)
        if (strncmp(name, leftover_prefixes[i], strlen(leftover_prefixes[i])) == 0)
            return 1;
    return 0;
}

static void mark_used(dev_t dev, ino_t ino, int n)
{
    for (int i = 0; i < n; i++)
        if (leftovers[i].dev == dev && leftovers[i].ino == ino)
            leftovers[i].used = 1;
}

/* In a child PID namespace /proc lists only part of the node's processes. */
static int pid_namespace_nested(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    char line[256];
    int nested = f == NULL;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "NSpid:", 6) == 0)
            nested = strchr(line + 7, '\t') != NULL; /* "NSpid:\tPID\tPID-IN-CHILD...": more than one */
    if (f)
        fclose(f);
    return nested;
}

/* Mark what process `pid` has open (its descriptors first: a segment is opened, mapped and
 * then closed, so one seen in neither was not in use). */
static void mark_process(int pid, int n)
{
    char path[64], line[512];
    struct stat st;
    snprintf(path, sizeof path, "/proc/%d/fd", pid);
    DIR *fds = opendir(path);
    if (!fds)
        return; /* gone, or not readable by this account */
    struct dirent *f;
    char target[PATH_MAX];
    while ((f = readdir(fds))) {
        /* the link's text first: a stat of every open file would wait on a hung NFS mount */
        ssize_t len = readlinkat(dirfd(fds), f->d_name, target, sizeof target - 1);
        if (len <= 0)
            continue;
        target[len] = '\0';
        const char *base = strrchr(target, '/');
        if (base && is_leftover_name(base + 1) && fstatat(dirfd(fds), f->d_name, &st, 0) == 0)
            mark_used(st.st_dev, st.st_ino, n); /* followed: the open file itself, not its path */
    }
    closedir(fds);
    snprintf(path, sizeof path, "/proc/%d/maps", pid);
    FILE *maps = fopen(path, "re");
    if (!maps)
        return;
    while (fgets(line, sizeof line, maps)) {
        unsigned major, minor;
        unsigned long inode;
        if (sscanf(line, "%*s %*s %*s %x:%x %lu", &major, &minor, &inode) == 3 && inode)
            mark_used(makedev(major, minor), (ino_t)inode, n);
        while (!strchr(line, '\n') && fgets(line, sizeof line, maps)) {} /* the rest of a long line */
    }
    fclose(maps);
}

/* 0, or -1 when /proc cannot show every process of the node */
static int mark_in_use(int n)
{
    if (pid_namespace_nested())
        return -1;
    DIR *proc = opendir("/proc");
    if (!proc)
        return -1;
    struct dirent *e;
    while ((e = readdir(proc))) {
        int pid = atoi(e->d_name);
        if (pid > 0)
            mark_process(pid, n);
    }
    closedir(proc);
    return 0;
}

static void remove_leftover_shm(uid_t owner, const struct timespec *started)
{
    int n = 0;
    DIR *shm = opendir("/dev/shm");
    if (!shm)
        return;
    struct dirent *e;
    struct stat st;
    while (n < MAX_LEFTOVERS && (e = readdir(shm))) {
        if (!is_leftover_name(e->d_name) || fstatat(dirfd(shm), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        if (!S_ISREG(st.st_mode) || st.st_uid != owner || st.st_ctim.tv_sec < started->tv_sec ||
            (st.st_ctim.tv_sec == started->tv_sec && st.st_ctim.tv_nsec < started->tv_nsec))
            continue;
        snprintf(leftovers[n].name, sizeof leftovers[n].name, "%s", e->d_name);
        leftovers[n].dev = st.st_dev;
        leftovers[n].ino = st.st_ino;
        leftovers[n].size = st.st_size;
        leftovers[n].ctime = st.st_ctim;
        leftovers[n].mtime = st.st_mtim;
        leftovers[n++].used = 0;
    }
    if (n && mark_in_use(n) == 0) {
        /* as the owner: the sticky bit then keeps another account's file that took a name meanwhile */
        int as_owner = geteuid() == 0 && owner != 0;
        if (as_owner)
            setfsuid(owner);
        for (int i = 0; i < n; i++)
            if (!leftovers[i].used && fstatat(dirfd(shm), leftovers[i].name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                st.st_dev == leftovers[i].dev && st.st_ino == leftovers[i].ino &&
                st.st_size == leftovers[i].size && same_time(&st.st_ctim, &leftovers[i].ctime) &&
                same_time(&st.st_mtim, &leftovers[i].mtime))
                unlinkat(dirfd(shm), leftovers[i].name, 0);
        if (as_owner)
            setfsuid(0);
    }
    closedir(shm);
}
