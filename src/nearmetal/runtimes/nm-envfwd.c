/* nm-envfwd: copy the launcher's wire-up variables under a prefix, then exec a command.
 *
 *   nm-envfwd --prefix APPTAINERENV_ [--keep=PREFIX]... -- COMMAND [ARGS...]
 *
 * Every variable whose name starts with one of the --keep prefixes is also set as
 * PREFIX+NAME (unless that is set already), so a runtime that starts its container with a
 * clean environment (apptainer --cleanenv) still hands the rank what the MPI launcher set
 * for it (PMI_RANK, OMPI_*, PMIX_*, ...), which differs per rank and is known only here. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv) {
    const char *prefix = NULL;
    const char *keep[64];
    int nkeep = 0, i;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) { i++; break; }
        if (strcmp(argv[i], "--prefix") == 0 && i + 1 < argc) { prefix = argv[++i]; continue; }
        if (strncmp(argv[i], "--keep=", 7) == 0 && nkeep < 64) { keep[nkeep++] = argv[i] + 7; continue; }
        fprintf(stderr, "nm-envfwd: unknown argument '%s'\n", argv[i]);
        return 2;
    }
    if (!prefix || i >= argc) {
        fprintf(stderr, "usage: nm-envfwd --prefix P [--keep=PREFIX]... -- COMMAND [ARGS...]\n");
        return 2;
    }
    /* Collect first: setenv may move environ. */
    size_t n = 0;
    while (environ[n]) n++;
    char **names = calloc(n + 1, sizeof *names);
    size_t m = 0;
    for (size_t e = 0; e < n; e++) {
        const char *eq = strchr(environ[e], '=');
        if (!eq) continue;
        for (int k = 0; k < nkeep; k++) {
            size_t len = strlen(keep[k]);
            if (strncmp(environ[e], keep[k], len) == 0 && (size_t)(eq - environ[e]) >= len) {
                names[m++] = strdup(environ[e]);
                break;
            }
        }
    }
    for (size_t j = 0; j < m; j++) {
        char *eq = strchr(names[j], '=');
        *eq = '\0';
        size_t len = strlen(prefix) + strlen(names[j]) + 1;
        char *name = malloc(len);
        snprintf(name, len, "%s%s", prefix, names[j]);
        if (setenv(name, eq + 1, 0) != 0) { perror("nm-envfwd: setenv"); return 127; }
        free(name);
    }
    execvp(argv[i], argv + i);
    fprintf(stderr, "nm-envfwd: cannot run %s: %s\n", argv[i], strerror(errno));
    return 127;
}
