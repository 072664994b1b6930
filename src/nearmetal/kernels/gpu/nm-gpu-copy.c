/* nm-gpu-copy: host<->device copy bandwidth, pinned (cuMemHostAlloc) and pageable (malloc)
 * host memory, for sizes from 64 KiB to MAX doubling. Output: the `# gpu=` line, then
 *   HtoD pinned BYTES BEST_GB/s AVG_GB/s
 * rows (directions HtoD and DtoH; 1 GB = 1e9 bytes; best and mean of ITERS copies after one
 * warm-up).   nm-gpu-copy [-m MAX_BYTES] [-i ITERS]      (default 64 MiB, 10) */
#include "nm-gpu.h"

static void measure(const char *dir, const char *kind, void *host, CUdeviceptr dev, size_t bytes, int iters) {
    double best = 1e30, total = 0;
    for (int i = 0; i <= iters; i++) {
        double t0 = nm_now();
        if (dir[0] == 'H') CU(cu.MemcpyHtoD(dev, host, bytes));
        else CU(cu.MemcpyDtoH(host, dev, bytes));
        double dt = nm_now() - t0;
        if (i == 0) continue; /* warm-up */
        total += dt;
        if (dt < best) best = dt;
    }
    printf("%s %s %zu %.2f %.2f\n", dir, kind, bytes, bytes / best / 1e9, bytes * iters / total / 1e9);
}

int main(int argc, char **argv) {
    size_t max = 64UL << 20;
    int iters = 10;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) max = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "-i") && i + 1 < argc) iters = atoi(argv[++i]);
        else { fprintf(stderr, "usage: nm-gpu-copy [-m MAX_BYTES] [-i ITERS]\n"); return 2; }
    }
    if (max < (64UL << 10) || iters < 1) { fprintf(stderr, "nm-gpu-copy: -m at least 65536, -i at least 1\n"); return 2; }
    nm_gpu_open("nm-gpu-copy");
    CUdeviceptr dev;
    void *pinned, *pageable = malloc(max);
    CU(cu.MemAlloc(&dev, max));
    CU(cu.MemHostAlloc(&pinned, max, 0));
    if (!pageable) { fprintf(stderr, "nm-gpu-copy: out of host memory\n"); return 3; }
    memset(pageable, 1, max);
    memset(pinned, 1, max);
    printf("# direction kind bytes best_GB/s avg_GB/s iters=%d\n", iters);
    for (size_t bytes = 64UL << 10; bytes <= max; bytes *= 2) {
        measure("HtoD", "pinned", pinned, dev, bytes, iters);
        measure("DtoH", "pinned", pinned, dev, bytes, iters);
        measure("HtoD", "pageable", pageable, dev, bytes, iters);
        measure("DtoH", "pageable", pageable, dev, bytes, iters);
    }
    cu.MemFreeHost(pinned);
    cu.MemFree(dev);
    return 0;
}
