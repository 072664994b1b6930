/* file_write_bw: the file-system write limit nm-iobench is compared with. P processes
 * (fork) each pwrite their 1/P share of BYTES into ONE file (or, with -f, a file each) in
 * DIR from a buffer already in memory, in CHUNK-sized calls, starting together (a barrier in
 * shared memory after every process has touched its buffer and opened its file); the time
 * runs from the common start to the last process's close, like nm-iobench's
 * write phase; no fsync, because nm-iobench does not sync either (both measure what the
 * file system takes into its cache). Then the same bytes are read back (-r) likewise.
 * Rate = BYTES / time, 1 MB = 1e6 bytes. The file is removed at the end.
 * Built and run by bench/io_bandwidth.py with plain `gcc -O2`.
 * usage: file_write_bw -d DIR [-s BYTES] [-p PROCS] [-c CHUNK] [-f] */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static long arg(const char *s, long min)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < min) {
        fprintf(stderr, "file_write_bw: bad value '%s'\n", s);
        exit(2);
    }
    return v;
}

/* One process's share: returns its end time (after close), or -1 on error; *start gets the
 * time it left the barrier. */
static double one(const char *path, int reading, long off, long len, long chunk, char *buf,
                  volatile long *arrived, long procs, double *start)
{
    int fd = open(path, reading ? O_RDONLY : O_WRONLY | O_CREAT, 0644);
    if (fd < 0) {
        perror(path);
        return -1;
    }
    __atomic_add_fetch(arrived, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(arrived, __ATOMIC_SEQ_CST) < procs) /* spin: the common start */
        ;
    *start = now();
    for (long done = 0; done < len;) {
        long n = len - done < chunk ? len - done : chunk;
        ssize_t k = reading ? pread(fd, buf + done, (size_t)n, off + done)
                            : pwrite(fd, buf + done, (size_t)n, off + done);
        if (k <= 0) {
            perror(reading ? "pread" : "pwrite");
            return -1;
        }
        done += k;
    }
    if (close(fd) != 0) {
        perror("close");
        return -1;
    }
    return now();
}

static double phase(const char *dir, int reading, long bytes, long procs, long chunk, int per_proc, double *ends)
{
    /* shared: [0] the barrier counter, then procs start times */
    long *arrived = (long *)(ends + procs);
    double *starts = ends + procs + 1;
    *arrived = 0;
    for (long p = 0; p < procs; p++) {
        if (fork() == 0) {
            char path[4096];
            long share = bytes / procs, off = p * share;
            long len = p == procs - 1 ? bytes - off : share;
            if (per_proc)
                snprintf(path, sizeof path, "%s/file_write_bw-%d.%ld", dir, (int)getppid(), p);
            else
                snprintf(path, sizeof path, "%s/file_write_bw-%d", dir, (int)getppid());
            char *buf = malloc((size_t)len);
            if (!buf)
                _exit(1);
            memset(buf, (int)(p + 1), (size_t)len); /* touch every page before the clock starts */
            double end = one(path, reading, per_proc ? 0 : off, len, chunk, buf, arrived, procs, &starts[p]);
            ends[p] = end;
            _exit(end < 0);
        }
    }
    int failed = 0;
    for (long p = 0; p < procs; p++) {
        int status;
        wait(&status);
        failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    }
    if (failed)
        return -1;
    double first = starts[0], last = ends[0];
    for (long p = 1; p < procs; p++) {
        if (starts[p] < first) first = starts[p];
        if (ends[p] > last) last = ends[p];
    }
    return last - first;
}

int main(int argc, char **argv)
{
    long bytes = 268435456L, procs = 1, chunk = 4L << 20;
    int per_proc = 0, opt;
    const char *dir = NULL;
    while ((opt = getopt(argc, argv, "d:s:p:c:f")) != -1) {
        if (opt == 'd') dir = optarg;
        else if (opt == 's') bytes = arg(optarg, 1);
        else if (opt == 'p') procs = arg(optarg, 1);
        else if (opt == 'c') chunk = arg(optarg, 1);
        else if (opt == 'f') per_proc = 1;
        else return 2;
    }
    if (!dir) {
        fprintf(stderr, "file_write_bw: -d DIR is required\n");
        return 2;
    }
    double *ends = mmap(NULL, sizeof(double) * (size_t)(2 * procs + 1), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    double tw = phase(dir, 0, bytes, procs, chunk, per_proc, ends);
    double tr = tw < 0 ? -1 : phase(dir, 1, bytes, procs, chunk, per_proc, ends);
    char path[4096];
    for (long p = 0; p < procs; p++) {
        if (per_proc)
            snprintf(path, sizeof path, "%s/file_write_bw-%d.%ld", dir, (int)getpid(), p);
        else
            snprintf(path, sizeof path, "%s/file_write_bw-%d", dir, (int)getpid());
        unlink(path);
    }
    if (tw < 0 || tr < 0)
        return 1;
    printf("bytes %ld procs %ld write_s %.6f write_MBps %.1f read_s %.6f read_MBps %.1f\n",
           bytes, procs, tw, bytes / tw / 1e6, tr, bytes / tr / 1e6);
    return 0;
}
