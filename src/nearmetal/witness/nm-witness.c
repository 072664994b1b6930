/* nm-witness: which MPI library did this rank of the user's program really run?
 *
 * Preloaded into each rank (LD_PRELOAD, or with ld.so --preload in bind mode), it does
 * nothing until the program exits; then, if the program has MPI (PMPI_Comm_rank), it writes one line to
 * stderr:
 *   nm-witness: rank=R pid=P program=EXE library=PATH inode=N version=FIRST LINE
 * where library is the file that provides PMPI_Comm_rank (dladdr), as the rank sees it (not
 * MPI_Init: nearmetal's evidence library, preloaded first, defines that one), and version
 * the first line of MPI_Get_library_version. It links nothing of MPI and resolves symbols
 * only at exit, so it cannot change which library the program loads.
 *
 * Built on the host but run in images nearmetal did not build (older glibc): it uses only
 * symbols glibc has had since 2.2.5 (dlsym/dladdr pinned to their old versions, no stack
 * protector, no fortified calls).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
__asm__(".symver dlsym,dlsym@GLIBC_2.2.5");
__asm__(".symver dladdr,dladdr@GLIBC_2.2.5");
#endif

typedef int (*version_fn)(char *, int *);

static const char *rank_of(void)
{
    const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID", NULL};
    for (int i = 0; vars[i]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            return v;
    }
    return "?";
}

__attribute__((destructor)) static void nm_witness(void)
{
    void *init = dlsym(RTLD_DEFAULT, "PMPI_Comm_rank");
    if (!init)
        return; /* not an MPI program (a shell, the runtime's helpers): nothing to witness */
    Dl_info info;
    const char *lib = "?";
    if (dladdr(init, &info) && info.dli_fname && *info.dli_fname)
        lib = info.dli_fname;
    struct stat st;
    /* the stat system call itself: glibc's stat() symbol is new in 2.33 */
    unsigned long inode = syscall(SYS_stat, lib, &st) == 0 ? (unsigned long)st.st_ino : 0;
    static char version[8192];
    int len = 0;
    version[0] = '\0';
    version_fn get_version = (version_fn)dlsym(RTLD_DEFAULT, "MPI_Get_library_version");
    if (get_version)
        get_version(version, &len);
    version[sizeof version - 1] = '\0';
    char *nl = strchr(version, '\n');
    if (nl)
        *nl = '\0';
    char exe[1024];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    static char line[10240];
    int k = snprintf(line, sizeof line, "nm-witness: rank=%s pid=%ld program=%s library=%s inode=%lu version=%s\n",
                     rank_of(), (long)getpid(), exe, lib, inode, version);
    if (k > (int)sizeof line - 1)
        k = (int)sizeof line - 1;
    if (k > 0 && write(2, line, (size_t)k) < 0)
        return;
}
