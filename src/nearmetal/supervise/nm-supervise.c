/* nm-supervise: start a job so that no process of it outlives nearmetal, even when
 * nearmetal is killed with SIGKILL.
 *
 *   nm-supervise [--die-with-parent] [--grace-ms N] [--linger-ms N] [--launcher] [--orphan-ms N]
 *                [--as UID:GID:G1,G2,...] [--mask DIR]... [--show PATH]... [--show-rw PATH]...
 *                [--private-mounts] [--chroot DIR] -- PROGRAM [ARGS...]
 *
 * Two processes, because a process cannot clean up after its own SIGKILL:
 *   front   this process (the PID nearmetal, a shell or a timeout sees). It forwards
 *           SIGINT/SIGTERM/SIGHUP/SIGQUIT to the keeper and exits with the job's status
 *           (killed by the signal it forwarded, when that stopped a running job).
 *           --die-with-parent: it dies with its parent (nearmetal's Python process).
 *   keeper  its child: a child subreaper (PR_SET_CHILD_SUBREAPER), so every process the
 *           job starts stays its descendant, even daemonized ones (podman's conmon) and
 *           orphans of a killed launcher. It gets SIGTERM when the front dies
 *           (PR_SET_PDEATHSIG), which works whatever killed the front. It sits in a
 *           process group of its own: a SIGKILL of the front's group (nearmetal's) does
 *           not take it along, so it is still there to end what the job left.
 *   job     the keeper's child: PROGRAM, in the front's process group (a terminal's ^C
 *           and stdin reach the launcher as they would without nm-supervise).
 *
 * Terminating (a forwarded signal, or the front's death): the signal goes to the
 * launcher, which shuts its ranks down in order; within --grace-ms (default 1000) what
 * is left of the job's tree gets SIGTERM, then SIGKILL. When the launcher exits on its own,
 * descendants still alive after --linger-ms (default 2000) are terminated the same way.
 * The tree is found through /proc (parent links), not by names.
 *
 * --launcher: PROGRAM is an MPI launcher. A program's daemon (setsid, a double fork, a
 * background child) inherits its rank's stdout and stderr, and the launcher waits for
 * their end of file, so it would wait as long as the daemon lives. The run is over when
 * its ranks are: once nothing is left in the launcher's tree but the launcher's own
 * helpers (hydra_pmi_proxy, orted, prted: the only names used, and only to tell these
 * apart from ranks) while processes outside that tree remain below the keeper (orphans
 * re-parented to it, podman's conmon), those get --orphan-ms (default 1000) to end by
 * themselves and are then ended (SIGTERM, SIGKILL after 30% of --grace-ms); the
 * launcher then reads its end of file and exits. Polled: first 100 ms after the start,
 * backing off to every 250 ms (a /proc scan: 0.8-0.9 ms for 91 processes on a loaded 2-core
 * machine).
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
 * Image builds (docs/process-lifetime.md): --private-mounts gives the job a mount
 * namespace of its own (propagation private), so what it mounts (debootstrap's /proc) goes
 * with it; --chroot DIR also mounts /proc and binds /dev at DIR/proc and DIR/dev there, then
 * chroots into DIR: the host never sees a build's mounts, and no killed build leaves one.
 *
 * A job that did not exit 0 may leave its MPI library's shared-memory segments in /dev/shm:
 * those nothing uses any more are removed (nm-supervise-shm.c).
 *
 * Exit status: the job's (a job killed by signal S kills the front with S; a running job
 * stopped by a forwarded signal S, as if killed by S, whatever its launcher exits with). 127 with a
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

#include "nm-supervise-tree.c" /* the process tree, from /proc */
#include "nm-supervise-view.c" /* the job's account and mount view */
#include "nm-supervise-shm.c"  /* what a job that did not end cleanly left in /dev/shm */

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
 * meanwhile is noted in *asked (when not NULL) and ends the wait (0). */
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
        if (sig > 0 && sig != SIGCHLD && asked) {
            *asked = sig; /* the front died or was signalled: end what is left now */
            return 0;
        }
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

/* The ranks are gone and only processes outside the launcher's tree remain: SIGTERM to
 * them, then SIGKILL until none is left (new ones may still be forked). */
static void end_daemons(int job, long grace_ms, int *job_status, int *job_done, int *asked)
{
    daemons_only(job, SIGTERM);
    long deadline = now_ms() + grace_ms * 3 / 10;
    for (int round = 0; round < 200 && !*asked; round++) {
        reap(job, job_status, job_done);
        if (*job_done || daemons_only(job, 0) == 0)
            return;
        if (now_ms() >= deadline)
            daemons_only(job, SIGKILL);
        sigset_t set;
        watched_set(&set);
        struct timespec ts = {0, 20 * 1000000L};
        siginfo_t info;
        int sig = sigtimedwait(&set, &info, &ts);
        if (sig > 0 && sig != SIGCHLD)
            *asked = sig;
    }
}

struct options {
    long grace_ms, linger_ms, orphan_ms;
    int launcher;
    const char *chroot_dir;
    int private_mounts;
};

static void keeper(char **argv, int front, const sigset_t *job_mask, const struct options *o,
                   const struct account *as, const struct view *view)
{
    long grace_ms = o->grace_ms, linger_ms = o->linger_ms;
    int front_group = getpgrp();
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    setpgid(0, 0); /* out of the front's group: a SIGKILL of that group leaves the keeper to clean up */
    sigset_t set;
    watched_set(&set); /* already blocked by the front */
    int front_gone = getppid() != front; /* it died before PDEATHSIG was armed */
    struct timespec started; /* the clock file times are taken from */
    clock_gettime(CLOCK_REALTIME_COARSE, &started);

    int job = fork();
    if (job < 0) {
        fprintf(stderr, "nm-supervise: cannot fork: %s\n", strerror(errno));
        _exit(127);
    }
    if (job == 0) {
        sigprocmask(SIG_SETMASK, job_mask, NULL); /* the mask nm-supervise was started with */
        prctl(PR_SET_PDEATHSIG, 0);
        setpgid(0, front_group); /* back in the front's group (same session), for ^C and the terminal */
        if (o->private_mounts || o->chroot_dir)
            enter_private_mounts(o->chroot_dir);
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
    long poll_ms = 100, next_look = now_ms() + poll_ms, daemons_since = -1;
    while (!job_done && !asked) {
        siginfo_t info;
        int sig;
        if (o->launcher) {
            long left = next_look - now_ms();
            struct timespec ts = {0, (left > 0 ? left : 0) * 1000000L};
            sig = sigtimedwait(&set, &info, &ts);
        } else {
            sig = sigwaitinfo(&set, &info);
        }
        if (sig == SIGCHLD)
            reap(job, &job_status, &job_done);
        else if (sig > 0)
            asked = sig;
        if (job_done || asked || !o->launcher || now_ms() < next_look)
            continue;
        /* Ranks gone, daemons left: they get --orphan-ms, then are ended. */
        if (daemons_only(job, 0) == 0)
            daemons_since = -1;
        else if (daemons_since < 0)
            daemons_since = now_ms();
        else if (now_ms() - daemons_since >= o->orphan_ms)
            end_daemons(job, grace_ms, &job_status, &job_done, &asked);
        poll_ms = daemons_since >= 0 ? 100 : (poll_ms * 3 / 2 > 250 ? 250 : poll_ms * 3 / 2);
        next_look = now_ms() + poll_ms;
    }
    /* Stopped on request only if the job was still running when the request came (a SIGCHLD
     * pending beside it is reaped first: sigtimedwait hands out the lower signal first). */
    reap(job, &job_status, &job_done);
    int stopped = asked && !job_done;
    if (!asked && !wait_for(job, &job_status, &job_done, linger_ms, 0, &asked) && !asked)
        asked = SIGTERM; /* the launcher is gone but part of its job lingers */
    if (asked)
        terminate_tree(job, asked == SIGINT ? SIGINT : SIGTERM, grace_ms, &job_status, &job_done);
    if (!job_done) { /* cannot happen once the tree is empty; keep the status honest */
        job_status = SIGKILL;
    }
    /* Stopped on request (a forwarded signal, or the front's death): say so as a process
     * killed by that signal does, however the launcher ended (MPICH's hydra exits 0 on
     * SIGTERM, which a batch script would read as success; a launcher slow to stop under
     * load is killed after the grace period, which is still the stop that was asked for). */
    if (stopped)
        job_status = asked; /* a wait status: terminated by signal `asked` */
    if (!WIFEXITED(job_status) || WEXITSTATUS(job_status) != 0)
        remove_leftover_shm(as->set ? as->uid : getuid(), &started);
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
    struct options o = {.grace_ms = 1000, .linger_ms = 2000, .orphan_ms = 1000};
    static struct account as;
    static struct view view;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], "--die-with-parent") == 0)
            die_with_parent = 1;
        else if (strcmp(argv[i], "--grace-ms") == 0 && i + 1 < argc)
            { i++; o.grace_ms = number(argv[i - 1], argv[i]); }
        else if (strcmp(argv[i], "--linger-ms") == 0 && i + 1 < argc)
            { i++; o.linger_ms = number(argv[i - 1], argv[i]); }
        else if (strcmp(argv[i], "--orphan-ms") == 0 && i + 1 < argc)
            { i++; o.orphan_ms = number(argv[i - 1], argv[i]); }
        else if (strcmp(argv[i], "--launcher") == 0)
            o.launcher = 1;
        else if (strcmp(argv[i], "--private-mounts") == 0)
            o.private_mounts = 1;
        else if (strcmp(argv[i], "--chroot") == 0 && i + 1 < argc && argv[i + 1][0] == '/')
            o.chroot_dir = argv[++i];
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
        fprintf(stderr, "usage: nm-supervise [--die-with-parent] [--grace-ms N] [--linger-ms N] [--launcher] "
                        "[--orphan-ms N] [--as UID:GID:GROUPS] [--mask DIR]... [--show PATH]... [--show-rw PATH]... "
                        "[--private-mounts] [--chroot DIR] -- PROGRAM [ARGS...]\n");
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
        keeper(argv + i + 1, front, &original, &o, &as, &view);
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
