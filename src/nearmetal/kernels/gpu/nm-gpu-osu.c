/* nm-gpu-osu: OSU-style latency and bandwidth between two ranks' device buffers (each rank
 * on the GPU it sees first: nm-gpuvis gives each local rank its own). When the MPI is
 * CUDA-aware (Open MPI's MPIX_Query_cuda_support) device pointers go to MPI directly;
 * otherwise every message is staged through pinned host memory (cuMemcpy before the send and
 * after the receive), and the output says which:
 *   # path=cuda-aware | path=staged (the MPI is not CUDA-aware)
 *   lat BYTES MICROSECONDS        (half the round trip, OSU's osu_latency)
 *   bw BYTES MB/s                 (window of 64 sends, one ack; 1 MB = 1e6 bytes, OSU's osu_bw)
 *   nm-gpu-osu [-m MAX_BYTES] [-i ITERS] [-x WARMUP]   (default 4 MiB, 1000, 10) */
#include <mpi.h>
#if defined(OPEN_MPI) && defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif
#endif
#include <stdint.h>

#include "nm-gpu.h"

#define WINDOW 64

static int cuda_aware(void) {
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    return MPIX_Query_cuda_support();
#else
    return 0;
#endif
}

static int aware;
static char *host;

/* stage: copy the device buffer to host memory first (staged path); a window of sends shares
 * one copy, since a pending send's buffer must not be written */
static void send_dev(CUdeviceptr d, size_t n, int to, MPI_Request *req, int stage) {
    if (aware) { MPI_Isend((void *)(uintptr_t)d, (int)n, MPI_CHAR, to, 1, MPI_COMM_WORLD, req); return; }
    if (stage) CU(cu.MemcpyDtoH(host, d, n));
    MPI_Isend(host, (int)n, MPI_CHAR, to, 1, MPI_COMM_WORLD, req);
}

static void recv_dev(CUdeviceptr d, size_t n, int from) {
    if (aware) { MPI_Recv((void *)(uintptr_t)d, (int)n, MPI_CHAR, from, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE); return; }
    MPI_Recv(host, (int)n, MPI_CHAR, from, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CU(cu.MemcpyHtoD(d, host, n));
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    size_t max = 4UL << 20;
    int iters = 1000, warm = 10;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) max = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "-i") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-x") && i + 1 < argc) warm = atoi(argv[++i]);
        else { if (!rank) fprintf(stderr, "usage: nm-gpu-osu [-m MAX_BYTES] [-i ITERS] [-x WARMUP]\n"); MPI_Abort(MPI_COMM_WORLD, 2); }
    }
    if (size != 2) { if (!rank) fprintf(stderr, "nm-gpu-osu: needs exactly 2 ranks\n"); MPI_Abort(MPI_COMM_WORLD, 2); }
    if (rank != 0) { FILE *devnull = freopen("/dev/null", "w", stdout); (void)devnull; }
    nm_gpu_open("nm-gpu-osu");
    aware = cuda_aware();
    CUdeviceptr buf;
    CU(cu.MemAlloc(&buf, max));
    CU(cu.MemsetD8(buf, 'a', max));
    CU(cu.MemHostAlloc((void **)&host, max, 0));
    int peer = 1 - rank;
    printf(aware ? "# path=cuda-aware\n" : "# path=staged (the MPI is not CUDA-aware)\n");
    printf("# lat BYTES us, bw BYTES MB/s\n");
    for (size_t n = 1; n <= max; n *= 2) {
        int it = n > 65536 ? iters / 10 + 1 : iters, wu = n > 65536 ? warm / 2 + 1 : warm;
        double t0 = 0;
        MPI_Barrier(MPI_COMM_WORLD);
        for (int i = 0; i < it + wu; i++) {
            if (i == wu) t0 = MPI_Wtime();
            MPI_Request req;
            if (rank == 0) {
                send_dev(buf, n, peer, &req, 1);
                MPI_Wait(&req, MPI_STATUS_IGNORE);
                recv_dev(buf, n, peer);
            } else {
                recv_dev(buf, n, peer);
                send_dev(buf, n, peer, &req, 1);
                MPI_Wait(&req, MPI_STATUS_IGNORE);
            }
        }
        if (rank == 0) printf("lat %zu %.2f\n", n, (MPI_Wtime() - t0) * 1e6 / (2.0 * it));
    }
    for (size_t n = 1; n <= max; n *= 2) {
        int it = n > 65536 ? iters / 50 + 1 : iters / 10 + 1, wu = 2;
        double t0 = 0;
        MPI_Barrier(MPI_COMM_WORLD);
        for (int i = 0; i < it + wu; i++) {
            if (i == wu) t0 = MPI_Wtime();
            if (rank == 0) {
                MPI_Request reqs[WINDOW];
                for (int w = 0; w < WINDOW; w++) send_dev(buf, n, peer, &reqs[w], w == 0);
                MPI_Waitall(WINDOW, reqs, MPI_STATUSES_IGNORE);
                MPI_Recv(NULL, 0, MPI_CHAR, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                for (int w = 0; w < WINDOW; w++) recv_dev(buf, n, peer);
                MPI_Send(NULL, 0, MPI_CHAR, peer, 2, MPI_COMM_WORLD);
            }
        }
        if (rank == 0) printf("bw %zu %.2f\n", n, n * (double)WINDOW * it / (MPI_Wtime() - t0) / 1e6);
    }
    MPI_Finalize();
    return 0;
}
