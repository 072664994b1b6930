/* nm-supervise's job side: the account it runs as (--as), the mount view it sees (--mask,
 * --show, --show-rw) and the image build's chroot (--private-mounts, --chroot). Included by
 * nm-supervise.c (one translation unit, one binary). */

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

/* --private-mounts: the job gets a mount namespace of its own whose mounts propagate
 * nowhere, so whatever it mounts (debootstrap's /proc and /sys) goes when its last process
 * does, SIGKILL of everything included. --chroot DIR: also /proc and a bind of /dev at
 * DIR/proc and DIR/dev in that namespace, then chroot(DIR): an image build's chroot whose
 * mounts the host never sees, and which no interrupted build can leave behind. */
static void enter_private_mounts(const char *root)
{
    if (unshare(CLONE_NEWNS) != 0)
        job_fail("cannot make a mount namespace for the job", NULL);
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        job_fail("cannot make / a private mount", NULL);
    if (!root)
        return;
    int dir = open(root, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir < 0 || fchdir(dir) != 0)
        job_fail("cannot enter", root);
    /* Relative to the opened root and never through a symbolic link: a link planted at
     * proc or dev in the image cannot send a mount out of it. */
    struct stat st;
    if (fstatat(dir, "proc", &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) ||
        fstatat(dir, "dev", &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        job_fail("the image needs directories proc and dev in", root);
    }
    if (mount("proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
        job_fail("cannot mount /proc in", root);
    if (mount("/dev", "dev", NULL, MS_BIND | MS_REC, NULL) != 0)
        job_fail("cannot bind-mount /dev in", root);
    if (chroot(".") != 0 || chdir("/") != 0)
        job_fail("cannot chroot into", root);
    close(dir);
}
