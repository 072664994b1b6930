/* The one tiny shared library of the nm-metadata tree. It is compiled once and copied
 * (copies, not links: distinct inodes) to lib/dNN/libnmmd_IIII.so; nm-metadata dlopens
 * each copy and calls nm_md_lib_index(), which returns the index in the file name of the
 * object the dynamic loader says its own code was mapped from. A loader that handed back
 * another copy (the same inode under two names, a stale handle) yields a wrong index. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

static int nm_md_anchor(void) { return 0; } /* static: its address is always in this object */

int nm_md_lib_index(void)
{
    Dl_info info;
    if (!dladdr((void *)&nm_md_anchor, &info) || !info.dli_fname) return -1;
    const char *base = strrchr(info.dli_fname, '/');
    base = base ? base + 1 : info.dli_fname;
    if (strncmp(base, "libnmmd_", 8) != 0) return -2;
    char *end;
    long v = strtol(base + 8, &end, 10);
    if (end == base + 8 || strcmp(end, ".so") != 0 || v < 0) return -3;
    return (int)v + nm_md_anchor();
}
