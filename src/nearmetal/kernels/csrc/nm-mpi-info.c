/* nm-mpi-info: "which MPI am I really running?"
 * Every rank prints one line: rank, size, host, the MPI library version string and
 * the path of the shared object that actually provides PMPI_Comm_rank in this process
 * (taken from the loader via dladdr, i.e. what /proc/self/maps shows; not MPI_Init, which
 * a preloaded tool may define: nearmetal's evidence library does, in every study), with that
 * file's inode: a host file bound into a container keeps its host inode, an image's
 * own copy does not, so the inode tells whose library it really is.
 * With --json each line is a JSON object instead. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void json_escape(const char *in, char *out, size_t cap)
{
    size_t o = 0;
    for (const char *p = in; *p && o + 7 < cap; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"' || c == '\\') { out[o++] = '\\'; out[o++] = (char)c; }
        else if (c == '\n') { out[o++] = '\\'; out[o++] = 'n'; }
        else if (c < 0x20) { o += (size_t)snprintf(out + o, cap - o, "\\u%04x", c); }
        else out[o++] = (char)c;
    }
    out[o] = '\0';
}

/* Library version strings are multi-line (MPICH lists its configure options): keep line one. */
static void first_line(char *s)
{
    char *nl = strchr(s, '\n');
    if (nl) *nl = '\0';
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == ',')) s[--n] = '\0';
}

int main(int argc, char **argv)
{
    int json = argc > 1 && strcmp(argv[1], "--json") == 0;
    int rank, size, len;
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    char host[256];
    Dl_info info;
    const char *library = "unknown";

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_library_version(version, &len);
    first_line(version);
    if (gethostname(host, sizeof host) != 0) strcpy(host, "unknown");
    void *provider = dlsym(RTLD_DEFAULT, "PMPI_Comm_rank");
    if (provider && dladdr(provider, &info) && info.dli_fname) library = info.dli_fname;
    struct stat st;
    unsigned long long inode = 0;
    if (stat(library, &st) == 0) inode = (unsigned long long)st.st_ino;

    /* Print in rank order so the output is stable to read and to parse. */
    for (int r = 0; r < size; r++) {
        if (r == rank) {
            if (json) {
                char v[2 * MPI_MAX_LIBRARY_VERSION_STRING], l[8192], h[600];
                json_escape(version, v, sizeof v);
                json_escape(library, l, sizeof l);
                json_escape(host, h, sizeof h);
                printf("{\"rank\": %d, \"size\": %d, \"host\": \"%s\", \"library\": \"%s\", "
                       "\"inode\": %llu, \"version\": \"%s\"}\n", rank, size, h, l, inode, v);
            } else {
                printf("rank=%d size=%d host=%s library=%s inode=%llu version=%s\n",
                       rank, size, host, library, inode, version);
            }
            fflush(stdout);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Finalize();
    return 0;
}
