/* nm-gpuvis: give this rank one GPU, then exec a command.
 *
 *   nm-gpuvis --devices 0,1[,...] [--also-prefix APPTAINERENV_] -- COMMAND [ARGS...]
 *
 * CUDA_VISIBLE_DEVICES is set to the device of the list at (local rank mod its length) and
 * CUDA_DEVICE_ORDER to PCI_BUS_ID (indices as nvidia-smi numbers them). The local rank is
 * what the launcher tells each rank: OMPI_COMM_WORLD_LOCAL_RANK (Open MPI's mpirun),
 * MPI_LOCALRANKID (MPICH's hydra), SLURM_LOCALID (srun); without one, the whole list is
 * visible. --also-prefix sets PREFIX+NAME too, for runtimes that start with a clean
 * environment (apptainer --cleanenv honours APPTAINERENV_*). Runs on the host side, before
 * the container runtime, where the launcher's variables are. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *local_rank(void) {
    static const char *names[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", NULL};
    for (int i = 0; names[i]; i++) {
        const char *v = getenv(names[i]);
        if (v && *v) return v;
    }
    return NULL;
}

static int set2(const char *prefix, const char *name, const char *value) {
    if (setenv(name, value, 1) != 0) return -1;
    if (prefix) {
        char full[256];
        if (snprintf(full, sizeof full, "%s%s", prefix, name) >= (int)sizeof full) return -1;
        if (setenv(full, value, 1) != 0) return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *devices = NULL, *prefix = NULL;
    int i;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) { i++; break; }
        if (strcmp(argv[i], "--devices") == 0 && i + 1 < argc) { devices = argv[++i]; continue; }
        if (strcmp(argv[i], "--also-prefix") == 0 && i + 1 < argc) { prefix = argv[++i]; continue; }
        fprintf(stderr, "nm-gpuvis: unknown argument '%s'\n", argv[i]);
        return 2;
    }
    if (!devices || !*devices || i >= argc) {
        fprintf(stderr, "usage: nm-gpuvis --devices D1,D2,... [--also-prefix P] -- COMMAND [ARGS...]\n");
        return 2;
    }
    char chosen[128];
    const char *lr = local_rank();
    if (lr) {
        char *end;
        long rank = strtol(lr, &end, 10);
        if (*end || rank < 0) {
            fprintf(stderr, "nm-gpuvis: local rank '%s' is not a number\n", lr);
            return 2;
        }
        long n = 1;
        for (const char *p = devices; *p; p++) n += (*p == ',');
        long pick = rank % n;
        const char *start = devices;
        for (long k = 0; k < pick; k++) start = strchr(start, ',') + 1;
        size_t len = strcspn(start, ",");
        if (len == 0 || len >= sizeof chosen) {
            fprintf(stderr, "nm-gpuvis: bad device list '%s'\n", devices);
            return 2;
        }
        memcpy(chosen, start, len);
        chosen[len] = '\0';
    } else if (snprintf(chosen, sizeof chosen, "%s", devices) >= (int)sizeof chosen) {
        fprintf(stderr, "nm-gpuvis: device list too long\n");
        return 2;
    }
    if (set2(prefix, "CUDA_VISIBLE_DEVICES", chosen) || set2(prefix, "CUDA_DEVICE_ORDER", "PCI_BUS_ID")) {
        fprintf(stderr, "nm-gpuvis: cannot set the environment\n");
        return 2;
    }
    execvp(argv[i], argv + i);
    fprintf(stderr, "nm-gpuvis: cannot run %s: %s\n", argv[i], strerror(errno));
    return 127;
}
