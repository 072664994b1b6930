/* memcpy_bw: the memory bandwidth a plain memcpy loop gets, as a reference for STREAM.
 * P processes (fork) each copy their own BYTES-sized buffer REPS times, starting together;
 * each keeps its best time; rate = 2 * BYTES (read + write, counted as STREAM counts copy)
 * / best time, 1 GB = 1e9 bytes. Prints each process's rate and the sum.
 * Built and run by bench/compute_native.py with plain `gcc -O2`.
 * usage: memcpy_bw [-s BYTES] [-n REPS] [-p PROCS] */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static long arg(const char *s, long min)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < min) {
        fprintf(stderr, "memcpy_bw: bad value '%s'\n", s);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    long bytes = 268435456L, reps = 10, procs = 1;
    int opt;
    while ((opt = getopt(argc, argv, "s:n:p:")) != -1) {
        if (opt == 's')
            bytes = arg(optarg, 1);
        else if (opt == 'n')
            reps = arg(optarg, 1);
        else if (opt == 'p')
            procs = arg(optarg, 1);
        else {
            fprintf(stderr, "usage: memcpy_bw [-s BYTES] [-n REPS] [-p PROCS]\n");
            return 2;
        }
    }
    int ready[2], go[2], result[2];
    if (pipe(ready) || pipe(go) || pipe(result)) {
        perror("memcpy_bw: pipe");
        return 1;
    }
    fflush(stdout);
    for (long p = 0; p < procs; p++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("memcpy_bw: fork");
            return 1;
        }
        if (pid > 0)
            continue;
        close(go[1]);
        char *src = malloc((size_t)bytes), *dst = malloc((size_t)bytes);
        if (!src || !dst)
            _exit(3);
        memset(src, 1, (size_t)bytes); /* touch every page before timing */
        memset(dst, 0, (size_t)bytes);
        char c = 'r', dummy;
        if (write(ready[1], &c, 1) != 1 || read(go[0], &dummy, 1) != 0) /* EOF: everyone is ready */
            _exit(4);
        double best = 1e30;
        for (long r = 0; r < reps; r++) {
            src[(r * 4096) % bytes] = (char)r; /* a different source each time */
            double t = now();
            memcpy(dst, src, (size_t)bytes);
            t = now() - t;
            best = t < best ? t : best;
        }
        if (dst[(size_t)(((reps - 1) * 4096) % bytes)] != (char)(reps - 1))
            _exit(5); /* the copy did not happen */
        double rate = 2.0 * (double)bytes / best * 1e-9;
        if (write(result[1], &rate, sizeof rate) != (ssize_t)sizeof rate)
            _exit(4);
        _exit(0);
    }
    close(go[0]);
    close(ready[1]);
    close(result[1]);
    for (long p = 0; p < procs; p++) {
        char c;
        if (read(ready[0], &c, 1) != 1) {
            fprintf(stderr, "memcpy_bw: a process failed before the copy\n");
            return 1;
        }
    }
    close(go[1]); /* start */
    double total = 0.0, rate;
    long got = 0;
    while (read(result[0], &rate, sizeof rate) == (ssize_t)sizeof rate) {
        printf("proc_GBps %.3f\n", rate);
        total += rate;
        got++;
    }
    int status, failed = 0;
    while (wait(&status) > 0)
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            failed = 1;
    if (failed || got != procs) {
        fprintf(stderr, "memcpy_bw: %ld of %ld processes reported\n", got, procs);
        return 1;
    }
    printf("procs %ld bytes %ld reps %ld\n", procs, bytes, reps);
    printf("total_GBps %.3f\n", total);
    return 0;
}
