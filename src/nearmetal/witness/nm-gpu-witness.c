/* nm-gpu-witness: which libcuda, driver and GPU did this rank really use?
 *
 * Preloaded into each rank (run --witness with --gpus), it does nothing until the program
 * exits; then, if the process has libcuda mapped or is an MPI program, it writes one line:
 *   nm-gpu-witness: rank=R pid=P program=EXE libcuda=PATH inode=N libcuda_version=V
 *                   driver=V gpu=PCI_BUS_ID|none context=yes|no visible=CUDA_VISIBLE_DEVICES
 * libcuda, inode: the mapping in /proc/self/maps (the file as the rank sees it; its inode
 * is the host's when the host's file is bound in); libcuda_version: from the file's real
 * name (libcuda.so.550.54.15); driver: the kernel module's, /proc/driver/nvidia/version;
 * gpu: the PCI bus id of the current context's device (cuCtxGetDevice), else of device 0
 * as this rank sees it (context=no), through the libcuda already loaded (never loading
 * one); "none" without a GPU or a libcuda, with the CUDA error code when it failed.
 * Same glibc discipline as nm-witness.c: only symbols glibc has had since 2.2.5. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__)
__asm__(".symver dlsym,dlsym@GLIBC_2.2.5");
__asm__(".symver dlopen,dlopen@GLIBC_2.2.5");
#endif

typedef int (*init_fn)(unsigned);
typedef int (*ctx_fn)(void **);
typedef int (*ctxdev_fn)(int *);
typedef int (*devget_fn)(int *, int);
typedef int (*busid_fn)(char *, int, int);

static const char *rank_of(void) {
    const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID", NULL};
    for (int i = 0; vars[i]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return v;
    }
    return "?";
}

/* The first libcuda.so* mapping: its path and inode. */
static int find_libcuda(char *path, size_t size, unsigned long *inode) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return 0;
    static char line[4608];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        char *slash = strchr(line, '/');
        if (!slash) continue;
        char *nl = strchr(slash, '\n');
        if (nl) *nl = '\0';
        const char *base = strrchr(slash, '/') + 1;
        if (strncmp(base, "libcuda.so", 10) != 0) continue;
        /* address perms offset dev inode path: the inode is the fifth field */
        char *p = line;
        for (int field = 0; field < 4 && p < slash; field++) {
            while (*p && *p != ' ') p++;
            while (*p == ' ') p++;
        }
        char *end;
        unsigned long ino = strtoul(p, &end, 10);
        if (end != p && p < slash) {
            snprintf(path, size, "%s", slash);
            *inode = ino;
            found = 1;
        }
    }
    fclose(f);
    return found;
}

static void driver_version(char *out, size_t size) {
    snprintf(out, size, "none");
    FILE *f = fopen("/proc/driver/nvidia/version", "r");
    if (!f) return;
    static char text[1024];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    char *p = strstr(text, "Kernel Module");
    if (!p) return;
    p += strlen("Kernel Module");
    while (*p == ' ') p++;
    if (strncmp(p, "for ", 4) == 0) { /* the open module: "... Open Kernel Module for x86_64  550.54.15" */
        p += 4;
        while (*p && *p != ' ') p++;
        while (*p == ' ') p++;
    }
    size_t len = strspn(p, "0123456789.");
    if (len && len < size)
        snprintf(out, size, "%.*s", (int)len, p);
}

static void used_gpu(char *out, size_t size, const char **context) {
    *context = "no";
    snprintf(out, size, "none");
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h) return;
    init_fn init = (init_fn)dlsym(h, "cuInit");
    ctx_fn current = (ctx_fn)dlsym(h, "cuCtxGetCurrent");
    ctxdev_fn ctxdev = (ctxdev_fn)dlsym(h, "cuCtxGetDevice");
    devget_fn devget = (devget_fn)dlsym(h, "cuDeviceGet");
    busid_fn busid = (busid_fn)dlsym(h, "cuDeviceGetPCIBusId");
    if (!init) {
        snprintf(out, size, "none(no-cuInit)");
        return;
    }
    int rc = init(0);
    if (rc != 0) {
        snprintf(out, size, "none(cuInit=%d)", rc);
        return;
    }
    if (!current || !ctxdev || !devget || !busid) {
        snprintf(out, size, "none(libcuda-incomplete)");
        return;
    }
    void *ctx = NULL;
    int dev = 0;
    if (current(&ctx) == 0 && ctx && ctxdev(&dev) == 0) {
        *context = "yes";
    } else if ((rc = devget(&dev, 0)) != 0) {
        snprintf(out, size, "none(cuDeviceGet=%d)", rc);
        return;
    }
    char bus[64];
    if ((rc = busid(bus, sizeof bus, dev)) != 0) {
        snprintf(out, size, "none(cuDeviceGetPCIBusId=%d)", rc);
        return;
    }
    for (char *c = bus; *c; c++) *c = (*c >= 'A' && *c <= 'F') ? (char)(*c - 'A' + 'a') : *c;
    snprintf(out, size, "%s", bus);
}

__attribute__((destructor)) static void nm_gpu_witness(void) {
    static char lib[4096];
    unsigned long inode = 0;
    int mapped = find_libcuda(lib, sizeof lib, &inode);
    if (!mapped && !dlsym(RTLD_DEFAULT, "PMPI_Comm_rank")) /* not MPI_Init: the evidence library defines it */
        return; /* neither a CUDA nor an MPI program (a shell, the runtime's helpers) */
    char version[64] = "none";
    if (mapped) {
        char real[4096];
        const char *base = realpath(lib, real) ? strrchr(real, '/') + 1 : strrchr(lib, '/') + 1;
        if (strncmp(base, "libcuda.so.", 11) == 0 && strchr(base + 11, '.'))
            snprintf(version, sizeof version, "%s", base + 11);
    } else {
        snprintf(lib, sizeof lib, "none");
    }
    char driver[64], gpu[96];
    const char *context = "no";
    driver_version(driver, sizeof driver);
    if (mapped)
        used_gpu(gpu, sizeof gpu, &context);
    else
        snprintf(gpu, sizeof gpu, "none");
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    char exe[1024];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    static char line[10240];
    int k = snprintf(line, sizeof line,
                     "nm-gpu-witness: rank=%s pid=%ld program=%s libcuda=%s inode=%lu libcuda_version=%s driver=%s "
                     "gpu=%s context=%s visible=%s\n",
                     rank_of(), (long)getpid(), exe, lib, inode, version, driver, gpu, context,
                     visible && *visible ? visible : "unset");
    if (k > (int)sizeof line - 1) k = (int)sizeof line - 1;
    if (k > 0 && write(2, line, (size_t)k) < 0) return;
}
