/* nm-startup: how long it took to get from "launch" to main(), and how much of that was
 * CPU work of this process, per rank; then how long MPI_Init took.
 *
 * Seed 001 (section 9): overhead = wallclock - CPU; the container instantiation overhead is
 * (wall - CPU)container - (wall - CPU)native. Here, at the first statement of main():
 *   wall_to_main_s  time from the launch timestamp to main(). Source, in this order:
 *                   launch_env: NM_LAUNCH_NS (if not empty), CLOCK_REALTIME nanoseconds taken
 *                               just before launching (nearmetal stamps it when it starts
 *                               the launcher; --env NM_LAUNCH_NS=... overrides); covers the
 *                               MPI launcher, the container runtime and its helper
 *                               processes, the loader;
 *                   proc_stat:  /proc/self/stat field 22 (starttime: clock ticks since boot,
 *                               when this process was forked) vs CLOCK_BOOTTIME (covers what
 *                               ran in this process before main: a runtime that execs the
 *                               program in place, like ch-run, and the dynamic loader; not
 *                               what other processes did before the fork). Resolution
 *                               1/CLK_TCK (10 ms), rounded so that the wall is never short.
 *   cpu_to_main_s   user + system CPU time of this process at main() (getrusage RUSAGE_SELF;
 *                   CPU time survives execve, so work done in place by ch-run or bwrap's
 *                   exec'ed child before it ran this program counts; work in other processes
 *                   (podman, conmon, squashfuse, the launcher) does not).
 *   idle_s          wall - cpu: waiting, other processes' work, I/O.
 *   mpi_init_s      MPI_Init, timed with CLOCK_MONOTONIC around the call.
 *   to_after_init_s wall_to_main_s + mpi_init_s: launch to the end of MPI_Init.
 *   proc_wall_s     the proc_stat wall, always printed (equal to wall_to_main_s when no
 *                   NM_LAUNCH_NS is set), so both sources can be compared.
 * Output (rank 0): '#' header lines, one row per rank, then "max" and "mean" rows (each
 * column's own max/mean over ranks):
 *   rank source wall_to_main_s cpu_to_main_s idle_s mpi_init_s to_after_init_s proc_wall_s
 * Exit: 0 ok; 1 a value is negative or not finite (idle may be short of zero by one clock
 * resolution); 2 usage error or malformed NM_LAUNCH_NS.
 * usage: nm-startup (no arguments) */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

enum { WALL, CPU, IDLE, INIT, AFTER, PROC, SOURCE, NVALS };
static const char *const names[] = {"wall_to_main_s", "cpu_to_main_s", "idle_s", "mpi_init_s",
                                    "to_after_init_s", "proc_wall_s"};
static const char *const sources[] = {"proc_stat", "launch_env"};

static long long ts_ns(const struct timespec *t) { return (long long)t->tv_sec * 1000000000LL + t->tv_nsec; }

/* Field 22 of /proc/self/stat: start time in clock ticks since boot; -1 on error. */
static long long proc_starttime(void)
{
    char buf[4096];
    FILE *f = fopen("/proc/self/stat", "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the command name (field 2) may hold spaces and ')' */
    if (!p) return -1;
    p++;
    for (int field = 3; field < 22; field++) { /* skip fields 3..21 */
        while (*p == ' ') p++;
        while (*p && *p != ' ') p++;
    }
    char *end;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    return (end == p || errno) ? -1 : v;
}

int main(int argc, char **argv)
{
    /* First: the clocks and the CPU used so far, before anything else runs. */
    struct timespec real_main, boot_main, mono0, mono1;
    struct rusage ru;
    clock_gettime(CLOCK_REALTIME, &real_main);
    clock_gettime(CLOCK_BOOTTIME, &boot_main);
    getrusage(RUSAGE_SELF, &ru);
    clock_gettime(CLOCK_MONOTONIC, &mono0);
    MPI_Init(&argc, &argv);
    clock_gettime(CLOCK_MONOTONIC, &mono1);

    int rank, nranks, status = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc > 1) {
        if (rank == 0) fprintf(stderr, "usage: nm-startup (no arguments; set NM_LAUNCH_NS to time from launch)\n");
        status = 2;
    }

    long clk_tck = sysconf(_SC_CLK_TCK);
    double v[NVALS];
    double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6
               + (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
    long long start_ticks = proc_starttime();
    if (start_ticks < 0 || clk_tck <= 0) {
        fprintf(stderr, "nm-startup: rank %d: cannot read the start time from /proc/self/stat\n", rank);
        status = status ? status : 1;
        start_ticks = 0;
        clk_tck = 100;
    }
    /* starttime is truncated to a tick: subtracting the truncated value can only lengthen
     * the wall, never shorten it below the CPU time. */
    long long start_ns = start_ticks * (1000000000LL / clk_tck);
    double proc_wall = (double)(ts_ns(&boot_main) - start_ns) * 1e-9;
    double resolution = 1.0 / (double)clk_tck; /* tolerance for idle >= 0 */
    const char *launch = getenv("NM_LAUNCH_NS");
    int from_env = 0;
    double wall = proc_wall;
    if (launch && *launch) {
        char *end;
        errno = 0;
        long long launch_ns = strtoll(launch, &end, 10);
        if (end == launch || *end || errno || launch_ns <= 0) {
            if (rank == 0)
                fprintf(stderr, "nm-startup: NM_LAUNCH_NS must be CLOCK_REALTIME nanoseconds (an integer), "
                        "got '%s'\n", launch);
            status = 2;
        } else {
            from_env = 1;
            wall = (double)(ts_ns(&real_main) - launch_ns) * 1e-9;
            resolution = 1e-3;
        }
    }
    v[WALL] = wall;
    v[CPU] = cpu;
    v[IDLE] = wall - cpu;
    v[INIT] = (double)(ts_ns(&mono1) - ts_ns(&mono0)) * 1e-9;
    v[AFTER] = wall + v[INIT];
    v[PROC] = proc_wall;
    v[SOURCE] = from_env;

    /* Validation, on every rank for its own values. */
    if (status == 0) {
        for (int k = 0; k < SOURCE; k++) {
            double lo = k == IDLE ? -resolution : 0.0;
            if (!isfinite(v[k]) || v[k] < lo) {
                fprintf(stderr, "nm-startup: rank %d: %s = %g is %s (source %s%s)\n", rank, names[k], v[k],
                        isfinite(v[k]) ? "negative" : "not finite", sources[from_env],
                        from_env && k != CPU && k != INIT ? ": is NM_LAUNCH_NS a CLOCK_REALTIME time "
                        "taken before the launch, on this clock?" : "");
                status = 1;
            }
        }
    }

    double *all = rank == 0 ? malloc(sizeof v * (size_t)nranks) : NULL;
    int worst = 0;
    MPI_Gather(v, NVALS, MPI_DOUBLE, all, NVALS, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Allreduce(&status, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && worst != 2) {
        double mx[NVALS], sum[NVALS];
        int nenv = 0;
        for (int k = 0; k < NVALS; k++) { mx[k] = -INFINITY; sum[k] = 0.0; }
        printf("# nm-startup: launch to main() (wall) vs CPU time of the process at main(), and MPI_Init\n");
        printf("# sources: launch_env = NM_LAUNCH_NS (CLOCK_REALTIME ns) -> main; "
               "proc_stat = /proc/self/stat starttime (1/%ld s ticks) -> main\n", clk_tck);
        printf("# ranks=%d\n", nranks);
        printf("# %-5s %-10s", "rank", "source");
        for (int k = 0; k < SOURCE; k++) printf(" %15s", names[k]);
        printf("\n");
        for (int r = 0; r < nranks; r++) {
            double *row = all + NVALS * r;
            nenv += row[SOURCE] != 0.0;
            printf("  %-5d %-10s", r, sources[row[SOURCE] != 0.0]);
            for (int k = 0; k < SOURCE; k++) {
                printf(" %15.6f", row[k]);
                if (row[k] > mx[k]) mx[k] = row[k];
                sum[k] += row[k];
            }
            printf("\n");
        }
        const char *src = nenv == nranks ? "launch_env" : nenv == 0 ? "proc_stat" : "mixed";
        printf("  %-5s %-10s", "max", src);
        for (int k = 0; k < SOURCE; k++) printf(" %15.6f", mx[k]);
        printf("\n  %-5s %-10s", "mean", src);
        for (int k = 0; k < SOURCE; k++) printf(" %15.6f", sum[k] / nranks);
        printf("\n");
        fflush(stdout);
    }
    free(all);
    MPI_Finalize();
    return worst;
}
