/* Whether the TSC can time calls (shared by the I/O tracer and nm-evidence.so): an invariant
 * TSC (constant rate, runs in every C-state) that the kernel itself uses as its clocksource,
 * unless the environment variable `clock_env` asks for "monotonic". sysfs is read through raw
 * system calls, so a tracer that wraps open/read does not trace itself. */
#ifndef NM_TSC_H
#define NM_TSC_H

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static inline int nm_tsc_usable(const char *clock_env)
{
#if defined(__x86_64__)
    const char *choice = getenv(clock_env);
    if (choice && strcmp(choice, "monotonic") == 0) return 0;
    unsigned a, b, c, d;
    __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0x80000000u), "c"(0));
    if (a < 0x80000007u) return 0;
    __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0x80000007u), "c"(0));
    if (!(d & (1u << 8))) return 0;
    char source[32] = "";
    int fd = (int)syscall(SYS_openat, AT_FDCWD, "/sys/devices/system/clocksource/clocksource0/current_clocksource",
                          O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    long n = syscall(SYS_read, fd, source, sizeof source - 1);
    syscall(SYS_close, fd);
    return n >= 3 && strncmp(source, "tsc", 3) == 0 && (source[3] == '\n' || source[3] == '\0');
#else
    (void)clock_env;
    return 0;
#endif
}

#endif
