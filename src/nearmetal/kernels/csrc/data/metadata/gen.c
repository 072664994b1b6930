/* Generates the nm-metadata tree (at build time, on the host and inside every image):
 *   gen DIR FILES LIBS LIBRARY.so
 * DIR/py/pAA/sB/mod_IIIIII.py   FILES small Python-like text files (AA = i/100, B = i/10 % 10),
 *                               each "# nm-metadata file I bytes N fnv1a64 H\n" + N bytes of
 *                               body whose 64-bit FNV-1a hash is H
 * DIR/lib/dAA/libnmmd_IIII.so   LIBS copies of LIBRARY.so (AA = i/10)
 * DIR/MANIFEST                  "nm-metadata-tree 1 files FILES libraries LIBS", written last
 * The header format and hash are also in nm-metadata.c, which verifies them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void die(const char *what, const char *path)
{
    fprintf(stderr, "nm-metadata gen: %s %s: %s\n", what, path, strerror(errno));
    exit(1);
}

static void mkdirs(const char *path)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) die("cannot create", buf);
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) die("cannot create", buf);
}

static unsigned long long fnv1a64(const char *s, size_t n)
{
    unsigned long long h = 1469598103934665603ULL;
    for (size_t k = 0; k < n; k++) { h ^= (unsigned char)s[k]; h *= 1099511628211ULL; }
    return h;
}

int main(int argc, char **argv)
{
    if (argc != 5) { fprintf(stderr, "usage: gen DIR FILES LIBS LIBRARY.so\n"); return 2; }
    const char *dir = argv[1];
    long nfiles = atol(argv[2]), nlibs = atol(argv[3]);
    if (nfiles < 0 || nlibs < 0 || nfiles > 999999 || nlibs > 9999) { fprintf(stderr, "gen: bad counts\n"); return 2; }
    char path[4096], sub[4096];
    static char body[8192];
    for (long i = 0; i < nfiles; i++) {
        /* 200..3999 bytes of Python-looking text, different for every file */
        size_t want = 200 + (size_t)((i * 7919) % 3800), n = 0;
        n += (size_t)snprintf(body + n, sizeof body - n, "\"\"\"nm-metadata module %ld: start-up metadata storm.\"\"\"\n", i);
        for (int line = 0; n < want; line++)
            n += (size_t)snprintf(body + n, sizeof body - n, "VALUE_%ld_%d = %ld  # %08lx\n", i, line,
                                  (i * 31 + line) * 2654435761L % 1000003L, (unsigned long)(i * 131 + line));
        n = want; /* cut at exactly `want` bytes */
        snprintf(sub, sizeof sub, "%s/py/p%02ld/s%ld", dir, i / 100, (i / 10) % 10);
        mkdirs(sub);
        snprintf(path, sizeof path, "%s/mod_%06ld.py", sub, i);
        FILE *f = fopen(path, "w");
        if (!f) die("cannot write", path);
        fprintf(f, "# nm-metadata file %06ld bytes %06zu fnv1a64 %016llx\n", i, n, fnv1a64(body, n));
        if (fwrite(body, 1, n, f) != n || fclose(f) != 0) die("cannot write", path);
    }
    /* the library, read once, written under every name */
    FILE *lf = fopen(argv[4], "rb");
    if (!lf) die("cannot read", argv[4]);
    static char lib[1 << 20];
    size_t libn = fread(lib, 1, sizeof lib, lf);
    if (ferror(lf) || !feof(lf) || libn == 0) die("cannot read (or too big)", argv[4]);
    fclose(lf);
    for (long j = 0; j < nlibs; j++) {
        snprintf(sub, sizeof sub, "%s/lib/d%02ld", dir, j / 10);
        mkdirs(sub);
        snprintf(path, sizeof path, "%s/libnmmd_%04ld.so", sub, j);
        FILE *f = fopen(path, "wb");
        if (!f) die("cannot write", path);
        if (fwrite(lib, 1, libn, f) != libn || fclose(f) != 0) die("cannot write", path);
        chmod(path, 0755);
    }
    snprintf(path, sizeof path, "%s/MANIFEST", dir);
    FILE *m = fopen(path, "w");
    if (!m) die("cannot write", path);
    fprintf(m, "nm-metadata-tree 1 files %ld libraries %ld\n", nfiles, nlibs);
    if (fclose(m) != 0) die("cannot write", path);
    return 0;
}
