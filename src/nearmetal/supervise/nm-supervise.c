/* nm-supervise: start a job so that no process of it outlives nearmetal, even when
 * nearmetal is killed with SIGKILL.
 *
 *   nm-supervise [--die-with-parent] [--grace-ms N] [--linger-ms N]
 *                [--as UID:GID:G1,G2,...] [--mask DIR]... [--show PATH]... [--show-rw PATH]...
 *                -- PROGRAM [ARGS...]
 *
 * Two processes, because a process cannot clean up after its own SIGKILL:
 *   front   this process (the PID nearmetal, a shell or a timeout sees). It forwards
 *           SIGINT/SIGTERM/SIGHUP/SIGQUIT to the keeper and exits with the job's status.
 *           --die-with-parent: it dies with its parent (nearmetal's Python process).
 *   keeper  its child: a child subreaper (PR_SET_CHILD_SUBREAPER), so every process the
 *           job starts stays its descendant, even daemonized ones (podman's conmon) and
 *           orphans of a killed launcher. It gets SIGTERM when the front dies
 *           (PR_SET_PDEATHSIG), which works whatever killed the front.
 *   job     the keeper's child: PROGRAM, in the front's process group (a terminal's ^C
 *           and stdin reach the launcher as they would without nm-supervise).
 *
 * Terminating (a forwarded signal, or the front's death): the signal goes to the
 * launcher, which shuts its ranks down in order; within --grace-ms (default 1000) what
 * is left of the job's tree gets SIGTERM, then SIGKILL. When the launcher exits on its own,
 * descendants still alive after --linger-ms (default 2000) are terminated the same way.
 * The tree is found through /proc (parent links), not by names.
 *
 * Running the job as another account (run --user, docs/privilege.md): --as makes the job
 * (the launcher and everything below it) run with that uid, gid and supplementary groups;
 * front and keeper stay as they were (root), so the keeper can end every process of the
 * job, whichever account runs it. --mask DIR puts an empty tmpfs over DIR in a mount
 * namespace of the job's own, and --show PATH / --show-rw PATH bind PATH there at its own
 * path (read-only / read-write): a directory the account could not reach through DIR (the
 * nearmetal home under a 0700 /root) is reachable at the same path, while the rest of DIR
 * stays out of sight; nothing changes outside the job. The job then starts in the same
 * working directory, reached again through that view as the account.
 *
 * Exit status: the job's (a job killed by signal S kills the front with S). 127 with a
 * one-line message when PROGRAM cannot be started; 125 for bad usage.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const int terminating[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
#define N_TERMINATING (sizeof terminating / sizeof terminating[0])

static void watched_set(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGCHLD);
    for (size_t i = 0; i < N_TERMINATING; i++)
        sigaddset(set, terminating[i]);
}

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* Exit the way `status` says a child ended: same code, or killed by the same signal. */
static void exit_like(int status)
{
    if (WIFEXITED(status))
        _exit(WEXITSTATUS(status));
    int sig = WTERMSIG(status);
    sigset_t all;
    signal(sig, SIG_DFL);
    sigfillset(&all);
    sigprocmask(SIG_UNBLOCK, &all, NULL);
    if (sig == SIGSEGV || sig == SIGABRT || sig == SIGBUS || sig == SIGQUIT)
        prctl(PR_SET_DUMPABLE, 0); /* pass the signal on, not a second core file */
    kill(getpid(), sig);
    _exit(128 + sig);
}

/* ---- the process tree below `root`, from /proc ------------------------------------- */

static int parent_of(int pid, char *state)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *close_paren = strrchr(buf, ')'); /* the command name may contain anything */
    int ppid;
    if (!close_paren || sscanf(close_paren + 1, " %c %d", state, &ppid) != 2)
        return -1;
    return ppid;
}

/* Signal every live descendant of `root`; the number signalled. */
static int signal_tree(int root, int sig)
{
    enum { MAX = 65536 };
    static int pids[MAX], ppids[MAX];
    int n = 0;
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < MAX) {
        char state;
        int pid = atoi(e->d_name);
        if (pid <= 0)
            continue;
        int ppid = parent_of(pid, &state);
        if (ppid < 0 || state == 'Z' || state == 'X')
            continue;
        pids[n] = pid;
        ppids[n++] = ppid;
    }
    closedir(d);
    static char in_tree[MAX];
    memset(in_tree, 0, (size_t)n);
    int found = 0, grew = 1;
    while (grew) { /* transitive closure over parent links */
        grew = 0;
        for (int i = 0; i < n; i++) {
            if (in_tree[i])
                continue;
            int linked = ppids[i] == root;
            for (int j = 0; !linked && j < n; j++)
                linked = in_tree[j] && pids[j] == ppids[i];
            if (linked) {
                in_tree[i] = 1;
                grew = 1;
            }
        }
    }
    for (int i = 0; i < n; i++)
        if (in_tree[i] && kill(pids[i], sig) == 0)
            found++;
    return found;
}

/* ---- the job's account and mount view (--as, --mask, --show) ---------------------- */

#define MAX_VIEW 64
#define MAX_GROUPS 256

struct view {
    int n_masks, n_shows;
    const char *masks[MAX_VIEW];
    const char *shows[MAX_VIEW];
    int show_rw[MAX_VIEW];
};

struct account {
    int set;
    uid_t uid;
    gid_t gid;
    int n_groups;
    gid_t groups[MAX_GROUPS];
};

static void job_fail(const char *what, const char *path)
{
    fprintf(stderr, "nm-supervise: %s%s%s: %s\n", what, path ? " " : "", path ? path : "", strerror(errno));
    _exit(127);
}

/* mkdir -p the parents of `path` (0755; in the mask's tmpfs), then the leaf itself as a
 * directory or an empty file: the mount point of a --show. */
static void mount_point(const char *path, int is_dir)
{
    char buf[PATH_MAX];
    if (strlen(path) >= sizeof buf) {
        errno = ENAMETOOLONG;
        job_fail("cannot show", path);
    }
    strcpy(buf, path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            job_fail("cannot create the mount point", buf);
        *p = '/';
    }
    if (is_dir) {
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            job_fail("cannot create the mount point", buf);
    } else {
        int fd = open(buf, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST && errno != EROFS)
            job_fail("cannot create the mount point", buf);
        if (fd >= 0)
            close(fd);
    }
}

/* The mount flags a read-only remount of a bind must keep (those of the mount it came from). */
static unsigned long kept_flags(int fd)
{
    struct statvfs sv;
    unsigned long flags = 0;
    if (fstatvfs(fd, &sv) != 0)
        return 0;
    if (sv.f_flag & ST_NOSUID)
        flags |= MS_NOSUID;
    if (sv.f_flag & ST_NODEV)
        flags |= MS_NODEV;
    if (sv.f_flag & ST_NOEXEC)
        flags |= MS_NOEXEC;
    if (sv.f_flag & ST_NOATIME)
        flags |= MS_NOATIME;
    if (sv.f_flag & ST_NODIRATIME)
        flags |= MS_NODIRATIME;
    if (sv.f_flag & ST_RELATIME)
        flags |= MS_RELATIME;
    return flags;
}

static void enter_view(const struct view *v)
{
    if (v->n_masks == 0 && v->n_shows == 0)
        return;
    if (unshare(CLONE_NEWNS) != 0)
        job_fail("cannot make a mount namespace for the job", NULL);
    /* Mounts made from here on stay in the job's namespace: nothing changes outside it. */
    if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) != 0)
        job_fail("cannot make / a slave mount", NULL);
    /* Opened in the job's namespace (a bind's source must be one of its mounts), before
     * the masks hide them. */
    int fds[MAX_VIEW];
    for (int i = 0; i < v->n_shows; i++)
        if ((fds[i] = open(v->shows[i], O_PATH | O_CLOEXEC)) < 0)
            job_fail("cannot open", v->shows[i]);
    for (int i = 0; i < v->n_masks; i++)
        if (mount("tmpfs", v->masks[i], "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") != 0)
            job_fail("cannot mask", v->masks[i]);
    for (int i = 0; i < v->n_shows; i++) {
        struct stat st;
        if (fstat(fds[i], &st) != 0)
            job_fail("cannot stat", v->shows[i]);
        mount_point(v->shows[i], S_ISDIR(st.st_mode));
        char src[64];
        snprintf(src, sizeof src, "/proc/self/fd/%d", fds[i]);
        if (mount(src, v->shows[i], NULL, MS_BIND | MS_REC, NULL) != 0)
            job_fail("cannot show", v->shows[i]);
        if (!v->show_rw[i] &&
            mount(NULL, v->shows[i], NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | kept_flags(fds[i]), NULL) != 0)
            job_fail("cannot make read-only", v->shows[i]);
        close(fds[i]);
    }
    /* Shared within the job's namespace (rootless podman asks for it), still a slave of the host's. */
    if (mount(NULL, "/", NULL, MS_REC | MS_SHARED, NULL) != 0)
        job_fail("cannot make / a shared mount", NULL);
}

/* Become the account for good: groups, gid, uid (real, effective and saved); all
 * capabilities go with uid 0. */
static void become(const struct account *a)
{
    if (!a->set)
        return;
    if (setgroups((size_t)a->n_groups, a->groups) != 0)
        job_fail("cannot set the account's groups", NULL);
    if (setresgid(a->gid, a->gid, a->gid) != 0)
        job_fail("cannot set the account's gid", NULL);
    if (setresuid(a->uid, a->uid, a->uid) != 0)
        job_fail("cannot set the account's uid", NULL);
    if (a->uid != 0 && (setuid(0) == 0 || geteuid() == 0)) {
        errno = EPERM;
        job_fail("still privileged after the switch: refusing to start the job", NULL);
    }
}

/* ---- keeper ------------------------------------------------------------------------ */

static void reap(int job, int *job_status, int *job_done)
{
    int st, pid;
    while ((pid = waitpid(-1, &st, WNOHANG)) > 0)
        if (pid == job) {
            *job_status = st;
            *job_done = 1;
        }
}

/* Wait up to `ms` for the tree to empty (or, with until_job, for the job itself to end),
 * reaping; 1 when that happened, 0 on time-out. A terminating signal that arrives
 * meanwhile is noted in *asked (when not NULL). */
static int wait_for(int job, int *job_status, int *job_done, long ms, int until_job, int *asked)
{
    sigset_t set;
    watched_set(&set);
    long deadline = now_ms() + ms;
    for (;;) {
        reap(job, job_status, job_done);
        if ((until_job && *job_done) || signal_tree(getpid(), 0) == 0)
            return 1;
        long left = deadline - now_ms();
        if (left <= 0)
            return 0;
        struct timespec ts = {0, (left < 50 ? left : 50) * 1000000L};
        siginfo_t info;
        int sig = sigtimedwait(&set, &info, &ts);
        if (sig > 0 && sig != SIGCHLD && asked)
            *asked = sig;
    }
}

/* The launcher gets `first` and most of the grace period to stop its ranks in order;
 * then SIGTERM to whatever is left of the tree, then SIGKILL until nothing is. */
static void terminate_tree(int job, int first, long grace_ms, int *job_status, int *job_done)
{
    if (!*job_done) {
        kill(job, first);
        wait_for(job, job_status, job_done, grace_ms * 7 / 10, 1, NULL);
    }
    signal_tree(getpid(), SIGTERM);
    if (wait_for(job, job_status, job_done, grace_ms * 3 / 10, 0, NULL))
        return;
    for (int round = 0; round < 100; round++) { /* new children may still be forked */
        signal_tree(getpid(), SIGKILL);
        if (wait_for(job, job_status, job_done, 50, 0, NULL))
            return;
    }
}

static void keeper(char **argv, int front, const sigset_t *job_mask, long grace_ms, long linger_ms,
                   const struct account *as, const struct view *view)
{
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    sigset_t set;
    watched_set(&set); /* already blocked by the front */
    int front_gone = getppid() != front; /* it died before PDEATHSIG was armed */

    int job = fork();
    if (job < 0) {
        fprintf(stderr, "nm-supervise: cannot fork: %s\n", strerror(errno));
        _exit(127);
    }
    if (job == 0) {
        sigprocmask(SIG_SETMASK, job_mask, NULL); /* the mask nm-supervise was started with */
        prctl(PR_SET_PDEATHSIG, 0);
        if (as->set || view->n_masks || view->n_shows) {
            char cwd[PATH_MAX];
            if (!getcwd(cwd, sizeof cwd))
                job_fail("cannot read the working directory", NULL);
            enter_view(view);
            become(as);
            if (chdir(cwd) != 0) /* reached again through the view, as the account */
                job_fail("the job's account cannot enter the working directory", cwd);
        }
        execvp(argv[0], argv);
        fprintf(stderr, "nm-supervise: cannot start %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int job_status = 0, job_done = 0, asked = front_gone ? SIGTERM : 0;
    while (!job_done && !asked) {
        siginfo_t info;
        int sig = sigwaitinfo(&set, &info);
        if (sig == SIGCHLD)
            reap(job, &job_status, &job_done);
        else if (sig > 0)
            asked = sig;
    }
    if (!asked && !wait_for(job, &job_status, &job_done, linger_ms, 0, &asked) && !asked)
        asked = SIGTERM; /* the launcher is gone but part of its job lingers */
    if (asked)
        terminate_tree(job, asked == SIGINT ? SIGINT : SIGTERM, grace_ms, &job_status, &job_done);
    if (!job_done) { /* cannot happen once the tree is empty; keep the status honest */
        job_status = SIGKILL;
    }
    exit_like(job_status);
}

/* ---- front ------------------------------------------------------------------------- */

/* --as UID:GID:G1,G2,... (the groups may be empty: "UID:GID:") */
static void parse_account(const char *text, struct account *a)
{
    char *end;
    unsigned long uid = strtoul(text, &end, 10), gid;
    if (end == text || *end != ':')
        goto bad;
    const char *p = end + 1;
    gid = strtoul(p, &end, 10);
    if (end == p || *end != ':' || uid > 0xfffffffeUL || gid > 0xfffffffeUL)
        goto bad;
    a->uid = (uid_t)uid;
    a->gid = (gid_t)gid;
    a->n_groups = 0;
    p = end + 1;
    while (*p) {
        unsigned long g = strtoul(p, &end, 10);
        if (end == p || (*end != ',' && *end != 0) || g > 0xfffffffeUL || a->n_groups >= MAX_GROUPS)
            goto bad;
        a->groups[a->n_groups++] = (gid_t)g;
        p = *end ? end + 1 : end;
    }
    a->set = 1;
    return;
bad:
    fprintf(stderr, "nm-supervise: --as needs UID:GID:G1,G2,... (numbers), got '%s'\n", text);
    _exit(125);
}

static void add_view(const char *opt, const char *path, const char **list, int *n)
{
    if (path[0] != '/' || *n >= MAX_VIEW) {
        fprintf(stderr, "nm-supervise: %s needs an absolute path (at most %d of them), got '%s'\n", opt, MAX_VIEW, path);
        _exit(125);
    }
    list[(*n)++] = path;
}

static long number(const char *opt, const char *text)
{
    char *end;
    long v = strtol(text, &end, 10);
    if (*text == 0 || *end != 0 || v < 0 || v > 3600000) {
        fprintf(stderr, "nm-supervise: %s needs milliseconds (0..3600000), got '%s'\n", opt, text);
        _exit(125);
    }
    return v;
}

int main(int argc, char **argv)
{
    int die_with_parent = 0, i = 1;
    long grace_ms = 1000, linger_ms = 2000;
    static struct account as;
    static struct view view;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], "--die-with-parent") == 0)
            die_with_parent = 1;
        else if (strcmp(argv[i], "--grace-ms") == 0 && i + 1 < argc)
            { i++; grace_ms = number(argv[i - 1], argv[i]); }
        else if (strcmp(argv[i], "--linger-ms") == 0 && i + 1 < argc)
            { i++; linger_ms = number(argv[i - 1], argv[i]); }
        else if (strcmp(argv[i], "--as") == 0 && i + 1 < argc)
            parse_account(argv[++i], &as);
        else if (strcmp(argv[i], "--mask") == 0 && i + 1 < argc)
            { i++; add_view(argv[i - 1], argv[i], view.masks, &view.n_masks); }
        else if ((strcmp(argv[i], "--show") == 0 || strcmp(argv[i], "--show-rw") == 0) && i + 1 < argc) {
            i++;
            add_view(argv[i - 1], argv[i], view.shows, &view.n_shows);
            view.show_rw[view.n_shows - 1] = strcmp(argv[i - 1], "--show-rw") == 0;
        } else {
            fprintf(stderr, "nm-supervise: unknown option '%s'\n", argv[i]);
            return 125;
        }
    }
    if (i + 1 >= argc) {
        fprintf(stderr, "usage: nm-supervise [--die-with-parent] [--grace-ms N] [--linger-ms N] [--as UID:GID:GROUPS] "
                        "[--mask DIR]... [--show PATH]... [--show-rw PATH]... -- PROGRAM [ARGS...]\n");
        return 125;
    }
    if (die_with_parent) {
        int parent = getppid();
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            return 128 + SIGKILL; /* the parent is already gone: start nothing */
    }
    sigset_t set, original;
    watched_set(&set);
    sigprocmask(SIG_BLOCK, &set, &original);
    int front = getpid();
    int pid = fork();
    if (pid < 0) {
        fprintf(stderr, "nm-supervise: cannot fork: %s\n", strerror(errno));
        return 127;
    }
    if (pid == 0)
        keeper(argv + i + 1, front, &original, grace_ms, linger_ms, &as, &view);
    for (;;) {
        siginfo_t info;
        int sig = sigwaitinfo(&set, &info);
        if (sig == SIGCHLD) {
            int st;
            if (waitpid(pid, &st, WNOHANG) == pid)
                exit_like(st);
        } else if (sig > 0) {
            kill(pid, sig);
        }
    }
}
