/* nm-netns-agent: the "remote shell" of an isolated-network job (networks/isolated.py).
 *
 * MPI launchers start their daemons on other nodes through an ssh-like agent: Open MPI's
 * plm_rsh_agent runs `AGENT HOST WORD...`, hydra's -launcher-exec `AGENT -x HOST "COMMAND"`.
 * Here a "node" is a set of namespaces (network, IPC, UTS, mount) held by a process of the
 * job (networks/_netns.py); NM_NETNS_NODES lists them as NAME=PID,NAME=PID,... This agent
 * enters HOST's namespaces and runs the command there, in the holder's working directory.
 *
 * Like ssh, it joins the words with spaces and splits the result as a shell splits words
 * (quotes and backslashes), so a command quoted for a remote shell arrives intact; nothing
 * is expanded, and a command that needs a shell (operators, variables) is refused: no shell
 * ever runs. Options before HOST (ssh's -x, -o X) are skipped.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fail(const char *what, const char *detail)
{
    fprintf(stderr, "nm-netns-agent: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    return 127;
}

/* The holder PID of `host` in NM_NETNS_NODES, or 0. */
static long holder_of(const char *host)
{
    const char *list = getenv("NM_NETNS_NODES");
    size_t n = strlen(host);
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        if (!end) end = p + strlen(p);
        if ((size_t)(end - p) > n + 1 && !strncmp(p, host, n) && p[n] == '=') return strtol(p + n + 1, NULL, 10);
        p = *end ? end + 1 : end;
    }
    return 0;
}

/* Split `s` in place into words, as a POSIX shell does without expansions. -1: a character
 * only a shell could act on, outside quotes. */
static int split_words(char *s, char **words, int max)
{
    int n = 0;
    char *out = s;
    while (*s) {
        while (*s == ' ' || *s == '\t' || *s == '\n') s++;
        if (!*s) break;
        if (n == max - 1) return -1;
        words[n++] = out;
        while (*s && *s != ' ' && *s != '\t' && *s != '\n') {
            if (*s == '\'') {
                for (s++; *s && *s != '\''; s++) *out++ = *s;
                if (!*s) return -1;
                s++;
            } else if (*s == '"') {
                for (s++; *s && *s != '"'; s++) {
                    if (*s == '$' || *s == '`') return -1;
                    if (*s == '\\' && (s[1] == '"' || s[1] == '\\' || s[1] == '$' || s[1] == '`')) s++;
                    *out++ = *s;
                }
                if (!*s) return -1;
                s++;
            } else if (*s == '\\' && s[1]) {
                *out++ = s[1];
                s += 2;
            } else if (strchr(";&|<>()$`*?[]{}~#", *s)) {
                return -1;
            } else {
                *out++ = *s++;
            }
        }
        int blank = *s != '\0'; /* read before the terminator, which may overwrite it */
        *out++ = '\0';
        s += blank;
    }
    words[n] = NULL;
    return n;
}

int main(int argc, char **argv)
{
    int i = 1;
    while (i < argc && argv[i][0] == '-') i += (!strcmp(argv[i], "-o") || !strcmp(argv[i], "-l")) ? 2 : 1;
    if (i + 1 >= argc) return fail("usage: nm-netns-agent [-x] HOST COMMAND...", NULL);
    const char *host = argv[i++];
    long pid = holder_of(host);
    if (pid <= 0) return fail("no such node in this job", host);

    size_t len = 1;
    for (int k = i; k < argc; k++) len += strlen(argv[k]) + 1;
    char *line = calloc(1, len), **words = calloc(len / 2 + 2, sizeof *words);
    if (!line || !words) return fail("out of memory", NULL);
    for (int k = i; k < argc; k++) {
        if (k > i) strcat(line, " ");
        strcat(line, argv[k]);
    }
    char *shown = strdup(line); /* split_words rewrites line in place */
    if (split_words(line, words, (int)(len / 2 + 2)) <= 0) return fail("a command only a shell could run", shown);

    /* Open every namespace first: /proc/PID is this mount namespace's view. */
    static const char *const kinds[] = {"net", "ipc", "uts", "mnt"};
    int fds[4];
    char path[64], cwd[PATH_MAX];
    for (int k = 0; k < 4; k++) {
        snprintf(path, sizeof path, "/proc/%ld/ns/%s", pid, kinds[k]);
        if ((fds[k] = open(path, O_RDONLY | O_CLOEXEC)) < 0) return fail(path, strerror(errno));
    }
    snprintf(path, sizeof path, "/proc/%ld/cwd", pid);
    ssize_t n = readlink(path, cwd, sizeof cwd - 1);
    cwd[n > 0 ? n : 0] = '\0';
    for (int k = 0; k < 4; k++)
        if (setns(fds[k], 0) != 0) return fail("cannot enter the node's namespaces", strerror(errno));
    if (!cwd[0] || chdir(cwd) != 0) {
        if (chdir("/") != 0) return fail("chdir /", strerror(errno));
    }
    execvp(words[0], words);
    return fail(words[0], strerror(errno));
}
