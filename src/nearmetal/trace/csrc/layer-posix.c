/* nm-trace POSIX layer: open/close, read/write and their positional, vector and 64 forms,
 * lseek, fsync, ftruncate and POSIX aio (OMPIO's fbtl and ROMIO submit through aio).
 *
 * Only file descriptors this layer saw opened are recorded, and only when the open returned
 * a regular file, outside MPI_Init/MPI_Finalize, whose path is not a pseudo file system or an
 * MPI library's shared-memory segment: the MPI library's own files are not the user's I/O.
 * stdio (fopen/fwrite) is not seen: glibc calls its internal, non-interposable entry points.
 */
#include "nm-trace.h"

#include <aio.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define POSIX_FUNCS(X)                                                                              \
    X(open) X(open64) X(openat) X(openat64) X(creat) X(creat64) X(__open_2) X(__open64_2)           \
    X(__openat_2) X(__openat64_2) X(close) X(read) X(write) X(pread) X(pread64) X(pwrite)           \
    X(pwrite64) X(readv) X(writev) X(preadv) X(preadv64) X(pwritev) X(pwritev64) X(lseek)          \
    X(lseek64) X(fsync) X(fdatasync) X(ftruncate) X(ftruncate64) X(aio_read) X(aio_read64)         \
    X(aio_write) X(aio_write64) X(aio_return) X(aio_return64) X(aio_error) X(aio_error64)          \
    X(aio_suspend) X(aio_suspend64)

#define AS_ENUM(name) P_##name,
#define AS_NAME(name) #name,
enum { POSIX_FUNCS(AS_ENUM) P_COUNT };
const char *const nm_names_posix[] = {POSIX_FUNCS(AS_NAME)};
const int nm_count_posix = P_COUNT;

/* fd -> file id of a traced open, 0: not traced. 4 MiB of zero pages, touched only where used. */
#define NM_MAXFD (1 << 20)
static uint32_t fd_file[NM_MAXFD];

static uint32_t traced_fd(int fd)
{
    return (unsigned)fd < NM_MAXFD ? __atomic_load_n(&fd_file[fd], __ATOMIC_RELAXED) : 0;
}

/* Names the MPI libraries (and their transports) give their files in /dev/shm: seen on this
 * machine with Open MPI 4.1.4 (vader_segment.*, open_mpi.*, sem.* incl. OMPIO's
 * sem.OMPIO_<file>), MPICH 4.0.2 (mpich_shar_tmp*) and UCX (ucx_shm_posix_*); the others are
 * those of other versions and transports (PSM2, coll/sm, MPICH's collective shm, PMIx). */
static const char *const mpi_shm_prefixes[] = {
    "vader_segment", "sm_segment", "mpich_shar_tmp", "mpich_s_shar_tmp", "ucx", "shm-col-space",
    "psm2", "psm_shm", "sem.", "open_mpi", "ompi.", "pmix", "cma", "knem", "xpmem", "fi_", NULL};

static int starts(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

/* Directories of the MPI runtime's own: Open MPI 4's session directory (TMPDIR/ompi.HOST.UID:
 * PMIx stores, hwloc topology, OMPIO's shared-file-pointer segments), Open MPI 5's and PMIx's. */
static const char *const mpi_session_dirs[] = {"/ompi.", "/prterun.", "/pmix.", NULL};

static int excluded_path(const char *p)
{
    if (p[0] != '/' || starts(p, "/proc/") || starts(p, "/sys/")) return 1;
    for (int i = 0; mpi_session_dirs[i]; i++)
        if (strstr(p, mpi_session_dirs[i])) return 1;
    if (starts(p, "/dev/shm/")) {
        for (int i = 0; mpi_shm_prefixes[i]; i++)
            if (starts(p + 9, mpi_shm_prefixes[i])) return 1;
        return 0;
    }
    return starts(p, "/dev/");
}

/* After a begun open returned fd: record it and map fd -> file, or drop it (not the user's). */
static int opened(nm_call *c, int fd)
{
    struct stat st;
    char link[64], path[PATH_MAX];
    uint32_t file = 0;
    if (fd >= 0 && fd < NM_MAXFD && syscall(SYS_fstat, fd, &st) == 0 && S_ISREG(st.st_mode)) {
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd); /* canonical, whatever dirfd and cwd were */
        ssize_t n = readlink(link, path, sizeof path - 1);
        if (n > 0) {
            path[n] = '\0';
            if (!excluded_path(path)) file = nm_intern(NM_STR_FILE, path);
        }
    }
    if (!file) {
        nm_drop(c);
        return fd;
    }
    __atomic_store_n(&fd_file[fd], file, __ATOMIC_RELAXED);
    nm_end(c, file, 0, -1, -1, fd, 0);
    return fd;
}

#define NEEDS_MODE(flags) (((flags) & O_CREAT) || ((flags) & O_TMPFILE) == O_TMPFILE)

/* An open: not begun inside MPI_Init/MPI_Finalize, else recorded if opened() keeps it. */
#define OPEN_BODY(fn, ptr_type, call)                                                   \
    static __typeof__(ptr_type) real;                                                              \
    NM_REAL(real, #fn, -1);                                                             \
    nm_call c;                                                                          \
    if (nm_in_mpi_setup() || !nm_begin(&c, NM_POSIX, P_##fn)) return real call;       \
    int fd = real call;                                                                 \
    nm_stop(&c);                                                                        \
    return opened(&c, fd);

#define GET_MODE(flags)                             \
    mode_t mode = 0;                                \
    if (NEEDS_MODE(flags)) {                        \
        va_list ap;                                 \
        va_start(ap, flags);                        \
        mode = (mode_t)va_arg(ap, int);             \
        va_end(ap);                                 \
    }

#define WRAP_OPEN(fn)                                                           \
    int fn(const char *path, int flags, ...)                                    \
    {                                                                           \
        GET_MODE(flags)                                                         \
        OPEN_BODY(fn, int (*)(const char *, int, ...), (path, flags, mode))     \
    }
#define WRAP_OPENAT(fn)                                                              \
    int fn(int dirfd, const char *path, int flags, ...)                              \
    {                                                                                \
        GET_MODE(flags)                                                              \
        OPEN_BODY(fn, int (*)(int, const char *, int, ...), (dirfd, path, flags, mode)) \
    }
#define WRAP_CREAT(fn) \
    int fn(const char *path, mode_t mode) { OPEN_BODY(fn, int (*)(const char *, mode_t), (path, mode)) }
/* _FORTIFY_SOURCE's checked opens (no mode: the checker rejects O_CREAT without one) */
#define WRAP_OPEN2(fn) \
    int fn(const char *path, int flags) { OPEN_BODY(fn, int (*)(const char *, int), (path, flags)) }
#define WRAP_OPENAT2(fn) \
    int fn(int dirfd, const char *path, int flags) { OPEN_BODY(fn, int (*)(int, const char *, int), (dirfd, path, flags)) }

WRAP_OPEN(open)
WRAP_OPEN(open64)
WRAP_OPENAT(openat)
WRAP_OPENAT(openat64)
WRAP_CREAT(creat)
WRAP_CREAT(creat64)
WRAP_OPEN2(__open_2)
WRAP_OPEN2(__open64_2)
WRAP_OPENAT2(__openat_2)
WRAP_OPENAT2(__openat64_2)

int close(int fd)
{
    static int (*real)(int);
    NM_REAL(real, "close", -1);
    uint32_t file = traced_fd(fd);
    nm_call c;
    if (!file) return real(fd);
    __atomic_store_n(&fd_file[fd], 0, __ATOMIC_RELAXED); /* before: the number may be reused at once */
    if (!nm_begin(&c, NM_POSIX, P_close)) return real(fd);
    int r = real(fd);
    nm_stop(&c);
    nm_end(&c, file, 0, -1, -1, r, r < 0);
    return r;
}

/* dup2/dup3 onto a traced descriptor close it: forget it (not recorded). Other closes the
 * tracer cannot see (fclose of an fdopen'ed stream, close_range) leave the number mapped
 * until a traced open reuses it. */
int dup2(int oldfd, int newfd)
{
    static int (*real)(int, int);
    NM_REAL(real, "dup2", -1);
    int r = real(oldfd, newfd);
    if (r >= 0 && oldfd != newfd && traced_fd(newfd)) __atomic_store_n(&fd_file[newfd], 0, __ATOMIC_RELAXED);
    return r;
}
int dup3(int oldfd, int newfd, int flags)
{
    static int (*real)(int, int, int);
    NM_REAL(real, "dup3", -1);
    int r = real(oldfd, newfd, flags);
    if (r >= 0 && traced_fd(newfd)) __atomic_store_n(&fd_file[newfd], 0, __ATOMIC_RELAXED);
    return r;
}

/* read/write/readv/writev have no offset argument: ask for the position after the call
 * (right for O_APPEND too) and subtract what was transferred. */
static int64_t implicit_offset(int fd, int64_t done)
{
    static off_t (*real_lseek)(int, off_t, int);
    if (!real_lseek && !(real_lseek = (off_t (*)(int, off_t, int))nm_real("lseek"))) return -1;
    off_t pos = real_lseek(fd, 0, SEEK_CUR);
    return pos < 0 ? -1 : done > 0 ? pos - done : pos;
}

static int64_t iov_bytes(const struct iovec *iov, int n)
{
    int64_t sum = 0;
    for (int i = 0; iov && i < n; i++) sum += (int64_t)iov[i].iov_len;
    return sum;
}

/* A call on a file descriptor: recorded when the descriptor is traced. */
#define FD_BODY(fn, ret, ptr_type, fd, call, offset, size)                 \
    static __typeof__(ptr_type) real;                                                  \
    NM_REAL(real, #fn, -1);                                                 \
    uint32_t file = traced_fd(fd);                                          \
    nm_call c;                                                              \
    if (!file || !nm_begin(&c, NM_POSIX, P_##fn)) return real call;        \
    ret r = real call;                                                      \
    nm_stop(&c);                                                            \
    nm_end(&c, file, 0, offset, size, (int64_t)r, r < 0);                   \
    return r;

#define WRAP_RW(fn, buf_type)                                                                      \
    ssize_t fn(int fd, buf_type buf, size_t n)                                                     \
    {                                                                                              \
        FD_BODY(fn, ssize_t, ssize_t (*)(int, buf_type, size_t), fd, (fd, buf, n),                 \
                implicit_offset(fd, r), (int64_t)n)                                                \
    }
#define WRAP_PRW(fn, buf_type, off_type)                                                           \
    ssize_t fn(int fd, buf_type buf, size_t n, off_type off)                                       \
    {                                                                                              \
        FD_BODY(fn, ssize_t, ssize_t (*)(int, buf_type, size_t, off_type), fd, (fd, buf, n, off), \
                (int64_t)off, (int64_t)n)                                                          \
    }
#define WRAP_RWV(fn)                                                                               \
    ssize_t fn(int fd, const struct iovec *iov, int n)                                             \
    {                                                                                              \
        FD_BODY(fn, ssize_t, ssize_t (*)(int, const struct iovec *, int), fd, (fd, iov, n),        \
                implicit_offset(fd, r), iov_bytes(iov, n))                                         \
    }
#define WRAP_PRWV(fn, off_type)                                                                    \
    ssize_t fn(int fd, const struct iovec *iov, int n, off_type off)                               \
    {                                                                                              \
        FD_BODY(fn, ssize_t, ssize_t (*)(int, const struct iovec *, int, off_type), fd,            \
                (fd, iov, n, off), (int64_t)off, iov_bytes(iov, n))                                \
    }

WRAP_RW(read, void *)
WRAP_RW(write, const void *)
WRAP_PRW(pread, void *, off_t)
WRAP_PRW(pread64, void *, off64_t)
WRAP_PRW(pwrite, const void *, off_t)
WRAP_PRW(pwrite64, const void *, off64_t)
WRAP_RWV(readv)
WRAP_RWV(writev)
WRAP_PRWV(preadv, off_t)
WRAP_PRWV(preadv64, off64_t)
WRAP_PRWV(pwritev, off_t)
WRAP_PRWV(pwritev64, off64_t)

off_t lseek(int fd, off_t off, int whence)
{
    FD_BODY(lseek, off_t, off_t (*)(int, off_t, int), fd, (fd, off, whence), (int64_t)off, -1)
}
off64_t lseek64(int fd, off64_t off, int whence)
{
    FD_BODY(lseek64, off64_t, off64_t (*)(int, off64_t, int), fd, (fd, off, whence), (int64_t)off, -1)
}
int fsync(int fd) { FD_BODY(fsync, int, int (*)(int), fd, (fd), -1, -1) }
int fdatasync(int fd) { FD_BODY(fdatasync, int, int (*)(int), fd, (fd), -1, -1) }
/* the new length is recorded as the size */
int ftruncate(int fd, off_t len) { FD_BODY(ftruncate, int, int (*)(int, off_t), fd, (fd, len), -1, (int64_t)len) }
int ftruncate64(int fd, off64_t len)
{
    FD_BODY(ftruncate64, int, int (*)(int, off64_t), fd, (fd, len), -1, (int64_t)len)
}

/* aio: submission (offset, requested bytes) and completion (aio_return: bytes done); polls
 * that find the request still running (aio_error == EINPROGRESS) are not recorded. The
 * control blocks are not checked for NULL: glibc declares them nonnull (and would crash). */
#define WRAP_AIO_SUBMIT(fn, cb_type)                                                              \
    int fn(cb_type *cb)                                                                           \
    {                                                                                             \
        FD_BODY(fn, int, int (*)(cb_type *), cb->aio_fildes, (cb), (int64_t)cb->aio_offset, \
                (int64_t)cb->aio_nbytes)                                                          \
    }
#define WRAP_AIO_RETURN(fn, cb_type)                                                              \
    ssize_t fn(cb_type *cb)                                                                       \
    {                                                                                             \
        FD_BODY(fn, ssize_t, ssize_t (*)(cb_type *), cb->aio_fildes, (cb),               \
                (int64_t)cb->aio_offset, (int64_t)cb->aio_nbytes)                                 \
    }
#define WRAP_AIO_ERROR(fn, cb_type)                                                               \
    int fn(const cb_type *cb)                                                                     \
    {                                                                                             \
        static int (*real)(const cb_type *);                                                      \
        NM_REAL(real, #fn, -1);                                                                   \
        uint32_t file = traced_fd(cb->aio_fildes);                                       \
        nm_call c;                                                                                \
        if (!file || !nm_begin(&c, NM_POSIX, P_##fn)) return real(cb);                            \
        int r = real(cb);                                                                         \
        nm_stop(&c);                                                                              \
        if (r == EINPROGRESS) nm_drop(&c);                                                        \
        else nm_end(&c, file, 0, (int64_t)cb->aio_offset, (int64_t)cb->aio_nbytes, r, r != 0);    \
        return r;                                                                                 \
    }
#define WRAP_AIO_SUSPEND(fn, cb_type)                                                             \
    int fn(const cb_type *const list[], int n, const struct timespec *timeout)                   \
    {                                                                                             \
        int fd = -1;                                                                              \
        for (int i = 0; i < n && fd < 0; i++)                                             \
            if (list[i] && traced_fd(list[i]->aio_fildes)) fd = list[i]->aio_fildes;              \
        FD_BODY(fn, int, int (*)(const cb_type *const[], int, const struct timespec *), fd,        \
                (list, n, timeout), -1, -1)                                                       \
    }

WRAP_AIO_SUBMIT(aio_read, struct aiocb)
WRAP_AIO_SUBMIT(aio_read64, struct aiocb64)
WRAP_AIO_SUBMIT(aio_write, struct aiocb)
WRAP_AIO_SUBMIT(aio_write64, struct aiocb64)
WRAP_AIO_RETURN(aio_return, struct aiocb)
WRAP_AIO_RETURN(aio_return64, struct aiocb64)
WRAP_AIO_ERROR(aio_error, struct aiocb)
WRAP_AIO_ERROR(aio_error64, struct aiocb64)
WRAP_AIO_SUSPEND(aio_suspend, struct aiocb)
WRAP_AIO_SUSPEND(aio_suspend64, struct aiocb64)
