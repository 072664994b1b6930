/* nm-gpu-stream: STREAM (copy, scale, add, triad) in device memory, on the GPU this process
 * sees first (CUDA_VISIBLE_DEVICES). Output: the `# gpu=` line, then STREAM's rows
 *   Copy:  0  BEST_GB/s  AVG_S  MIN_S  MAX_S
 * (1 GB = 1e9 bytes; the first of NTIMES iterations is left out, as STREAM does).
 *   nm-gpu-stream [-n ELEMENTS] [-t NTIMES]      (default 2^26 doubles per array, 20) */
#include "nm-gpu.h"

#ifndef NM_PTX
#error "build with -DNM_PTX='\"/path/stream.ptx\"'"
#endif
__asm__(".section .rodata\n.global nm_stream_ptx\nnm_stream_ptx:\n.incbin \"" NM_PTX "\"\n.byte 0\n.previous");
extern const char nm_stream_ptx[];

int main(int argc, char **argv) {
    unsigned long long n = 1ULL << 26;
    int ntimes = 20;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc) n = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) ntimes = atoi(argv[++i]);
        else { fprintf(stderr, "usage: nm-gpu-stream [-n ELEMENTS] [-t NTIMES]\n"); return 2; }
    }
    if (n < 1024 || ntimes < 2) { fprintf(stderr, "nm-gpu-stream: -n at least 1024, -t at least 2\n"); return 2; }
    nm_gpu_open("nm-gpu-stream");
    CUmodule mod;
    CU(cu.ModuleLoadData(&mod, nm_stream_ptx));
    const char *names[4] = {"nm_copy", "nm_scale", "nm_add", "nm_triad"};
    const char *labels[4] = {"Copy:", "Scale:", "Add:", "Triad:"};
    const double bytes[4] = {2.0 * 8 * n, 2.0 * 8 * n, 3.0 * 8 * n, 3.0 * 8 * n};
    CUfunction fn[4];
    for (int k = 0; k < 4; k++) CU(cu.ModuleGetFunction(&fn[k], mod, names[k]));
    CUdeviceptr a, b, c;
    size_t size = (size_t)n * sizeof(double);
    CU(cu.MemAlloc(&a, size));
    CU(cu.MemAlloc(&b, size));
    CU(cu.MemAlloc(&c, size));
    double *host = malloc(size);
    if (!host) { fprintf(stderr, "nm-gpu-stream: out of host memory\n"); return 3; }
    for (unsigned long long i = 0; i < n; i++) host[i] = 1.0;
    CU(cu.MemcpyHtoD(a, host, size));
    for (unsigned long long i = 0; i < n; i++) host[i] = 2.0;
    CU(cu.MemcpyHtoD(b, host, size));
    CU(cu.MemsetD8(c, 0, size));
    double scalar = 3.0;
    void *params[] = {&a, &b, &c, &scalar, &n};
    unsigned threads = 256, blocks = (unsigned)((n + threads - 1) / threads);
    double best[4], sum[4] = {0}, worst[4] = {0};
    for (int k = 0; k < 4; k++) best[k] = 1e30;
    for (int t = 0; t < ntimes; t++) {
        for (int k = 0; k < 4; k++) {
            double t0 = nm_now();
            CU(cu.LaunchKernel(fn[k], blocks, 1, 1, threads, 1, 1, 0, NULL, params, NULL));
            CU(cu.CtxSynchronize());
            double dt = nm_now() - t0;
            if (t == 0) continue;
            sum[k] += dt;
            if (dt < best[k]) best[k] = dt;
            if (dt > worst[k]) worst[k] = dt;
        }
    }
    /* check, as STREAM does: every element follows the same recurrence */
    double ea = 1.0, eb = 2.0, ec = 0.0;
    for (int t = 0; t < ntimes; t++) { ec = ea; eb = scalar * ec; ec = ea + eb; ea = eb + scalar * ec; }
    CU(cu.MemcpyDtoH(host, a, size));
    double err = host[n - 1] > ea ? host[n - 1] - ea : ea - host[n - 1];
    if (err > 1e-8 * ea) {
        fprintf(stderr, "nm-gpu-stream: wrong result: a[n-1]=%g, expected %g\n", host[n - 1], ea);
        return 5;
    }
    printf("# n=%llu ntimes=%d bytes_per_array=%zu\n", n, ntimes, size);
    for (int k = 0; k < 4; k++)
        printf("%-7s 0  %.1f  %.6f  %.6f  %.6f\n", labels[k], bytes[k] / best[k] / 1e9, sum[k] / (ntimes - 1), best[k],
               worst[k]);
    return 0;
}
