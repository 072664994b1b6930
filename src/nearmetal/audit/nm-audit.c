/* nm-audit: a minimal rtld-audit library (man 7 rtld-audit), what `audit = true` puts in the
 * ranks' LD_AUDIT. Like the interception library of seed 002 (Titan's ld-intercept, which
 * slowed ATLAS jobs 3x), it looks at every object the dynamic linker loads and asks to see
 * every symbol binding to and from it: the linker then resolves each binding through the
 * auditor. It also asks to see every call through the PLT (la_pltenter), which sends each such
 * call through ld.so's profiling trampoline: what any auditor that saw bindings cost before
 * glibc 2.35, when the linker stopped doing so for an auditor without la_pltenter (glibc
 * bug 15533). Measured here (glibc 2.36, MPICH 1 KiB latency, 2 ranks): la_symbind alone
 * 0.32-0.40 us as unaudited; with la_pltenter 0.59-0.87 us. It changes nothing: every binding
 * and every call goes where it would have gone.
 *
 * With NM_AUDIT_REPORT set, it writes at exit one line to stderr:
 *   nm-audit: pid=PID objects=N bindings=M
 * (objects: la_objopen calls; bindings: la_symbind64 calls).
 */
#define _GNU_SOURCE
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static unsigned long objects, bindings;

unsigned int la_version(unsigned int version)
{
    /* the highest version both know: an older ld.so (an older image) keeps its own */
    return version < LAV_CURRENT ? version : LAV_CURRENT;
}

unsigned int la_objopen(struct link_map *map, Lmid_t lmid, uintptr_t *cookie)
{
    (void)map, (void)lmid, (void)cookie;
    __atomic_add_fetch(&objects, 1, __ATOMIC_RELAXED);
    return LA_FLG_BINDTO | LA_FLG_BINDFROM;
}

uintptr_t la_symbind64(Elf64_Sym *sym, unsigned int ndx, uintptr_t *refcook, uintptr_t *defcook,
                       unsigned int *flags, const char *symname)
{
    (void)ndx, (void)refcook, (void)defcook, (void)flags, (void)symname;
    __atomic_add_fetch(&bindings, 1, __ATOMIC_RELAXED);
    return sym->st_value;
}

#if defined(__x86_64__)
Elf64_Addr la_x86_64_gnu_pltenter(Elf64_Sym *sym, unsigned int ndx, uintptr_t *refcook, uintptr_t *defcook,
                                  La_x86_64_regs *regs, unsigned int *flags, const char *symname,
                                  long int *framesizep)
{
    (void)ndx, (void)refcook, (void)defcook, (void)regs, (void)flags, (void)symname, (void)framesizep;
    return sym->st_value;
}
#elif defined(__aarch64__)
ElfW(Addr) la_aarch64_gnu_pltenter(ElfW(Sym) *sym, unsigned int ndx, uintptr_t *refcook, uintptr_t *defcook,
                                   La_aarch64_regs *regs, unsigned int *flags, const char *symname,
                                   long int *framesizep)
{
    (void)ndx, (void)refcook, (void)defcook, (void)regs, (void)flags, (void)symname, (void)framesizep;
    return sym->st_value;
}
#endif

__attribute__((destructor)) static void report(void)
{
    if (!getenv("NM_AUDIT_REPORT")) return;
    char line[128];
    int n = snprintf(line, sizeof line, "nm-audit: pid=%ld objects=%lu bindings=%lu\n", (long)syscall(SYS_getpid),
                     objects, bindings);
    if (n > 0 && syscall(SYS_write, 2, line, (size_t)n) < 0) return;
}
