/* nm-gpu.h: the CUDA driver API through dlopen, and the PTX kernels, for nearmetal's GPU
 * kernels (nm-gpu-stream, nm-gpu-copy, nm-gpu-osu).
 *
 * Why no nvcc and no CUDA runtime: the kernels are PTX, compiled by the driver's own JIT
 * (libnvidia-ptxjitcompiler) when loaded, and the host code is C built by cc. So a kernel
 * needs only what --gpus gives a container (the host's libcuda and its JIT): the same
 * binary runs natively and in every runtime, images need no CUDA toolkit, and it builds on
 * a machine with no GPU and no toolkit (Debian has none; the PyPI nvcc wheel has ptxas and
 * libnvvm, not nvcc). */
#ifndef NM_GPU_H
#define NM_GPU_H
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUmodule;
typedef void *CUfunction;
typedef void *CUstream;
typedef unsigned long long CUdeviceptr;

static struct {
    CUresult (*Init)(unsigned);
    CUresult (*DriverGetVersion)(int *);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DeviceGetName)(char *, int, CUdevice);
    CUresult (*DeviceGetPCIBusId)(char *, int, CUdevice);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*CtxSynchronize)(void);
    CUresult (*ModuleLoadData)(CUmodule *, const void *);
    CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemHostAlloc)(void **, size_t, unsigned);
    CUresult (*MemFreeHost)(void *);
    CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
    CUresult (*MemsetD8)(CUdeviceptr, unsigned char, size_t);
    CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void **, void **);
    CUresult (*GetErrorString)(CUresult, const char **);
} cu;

static void nm_gpu_fail(const char *what, CUresult rc) {
    const char *text = "?";
    if (cu.GetErrorString) cu.GetErrorString(rc, &text);
    fprintf(stderr, "nm-gpu: %s failed: %s (CUDA error %d)\n", what, text ? text : "?", rc);
    exit(3);
}

#define CU(call) do { CUresult rc_ = (call); if (rc_ != 0) nm_gpu_fail(#call, rc_); } while (0)

static void *nm_sym(void *h, const char *name) {
    void *f = dlsym(h, name);
    if (!f) {
        fprintf(stderr, "nm-gpu: libcuda has no %s\n", name);
        exit(3);
    }
    return f;
}

/* Load libcuda, initialise, make device 0 (as CUDA_VISIBLE_DEVICES shows it) current.
 * Prints the `# gpu=` line every kernel's output starts with. Exit 4: no GPU (said so). */
static void nm_gpu_open(const char *program) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) {
        fprintf(stderr, "%s: no GPU: cannot load libcuda.so.1 (%s)\n", program, dlerror());
        exit(4);
    }
    cu.Init = nm_sym(h, "cuInit");
    cu.DriverGetVersion = nm_sym(h, "cuDriverGetVersion");
    cu.DeviceGet = nm_sym(h, "cuDeviceGet");
    cu.DeviceGetName = nm_sym(h, "cuDeviceGetName");
    cu.DeviceGetPCIBusId = nm_sym(h, "cuDeviceGetPCIBusId");
    cu.DevicePrimaryCtxRetain = nm_sym(h, "cuDevicePrimaryCtxRetain");
    cu.CtxSetCurrent = nm_sym(h, "cuCtxSetCurrent");
    cu.CtxSynchronize = nm_sym(h, "cuCtxSynchronize");
    cu.ModuleLoadData = nm_sym(h, "cuModuleLoadData");
    cu.ModuleGetFunction = nm_sym(h, "cuModuleGetFunction");
    cu.MemAlloc = nm_sym(h, "cuMemAlloc_v2");
    cu.MemFree = nm_sym(h, "cuMemFree_v2");
    cu.MemHostAlloc = nm_sym(h, "cuMemHostAlloc");
    cu.MemFreeHost = nm_sym(h, "cuMemFreeHost");
    cu.MemcpyHtoD = nm_sym(h, "cuMemcpyHtoD_v2");
    cu.MemcpyDtoH = nm_sym(h, "cuMemcpyDtoH_v2");
    cu.MemsetD8 = nm_sym(h, "cuMemsetD8_v2");
    cu.LaunchKernel = nm_sym(h, "cuLaunchKernel");
    cu.GetErrorString = nm_sym(h, "cuGetErrorString");
    CUresult rc = cu.Init(0);
    if (rc != 0) {
        const char *text = "?";
        cu.GetErrorString(rc, &text);
        fprintf(stderr, "%s: no GPU: cuInit: %s (CUDA error %d)\n", program, text ? text : "?", rc);
        exit(4);
    }
    CUdevice dev;
    CUcontext ctx;
    CU(cu.DeviceGet(&dev, 0));
    CU(cu.DevicePrimaryCtxRetain(&ctx, dev));
    CU(cu.CtxSetCurrent(ctx));
    char name[128] = "?", bus[64] = "?";
    int version = 0;
    cu.DeviceGetName(name, sizeof name, dev);
    cu.DeviceGetPCIBusId(bus, sizeof bus, dev);
    cu.DriverGetVersion(&version);
    for (char *c = bus; *c; c++) if (*c >= 'A' && *c <= 'F') *c = (char)(*c - 'A' + 'a');
    for (char *c = name; *c; c++) if (*c == ' ') *c = '_';
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    printf("# gpu=%s name=%s cuda=%d.%d visible=%s\n", bus, name, version / 1000, (version % 1000) / 10,
           visible && *visible ? visible : "unset");
}

__attribute__((unused)) static double nm_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#endif
