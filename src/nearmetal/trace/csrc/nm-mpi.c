/* nm-trace MPI start and end: the rank, asked of MPI right after the program's own MPI_Init
 * returned, and the phases during which the MPI library's own file I/O is not recorded
 * (inside MPI_Init/MPI_Init_thread/MPI_Finalize). The tracer does not wrap those itself:
 * nm-evidence.so, preloaded before it, owns them (one owner among nearmetal's preloads,
 * nearmetal/evidence/csrc/nm-mpi-owner.c) and calls the hook registered here before and after
 * each. Without it the rank comes from the launcher's variables and the MPI library's own
 * I/O is recorded too. The tracer never calls MPI outside MPI_Init .. MPI_Finalize. Buffers
 * are flushed after MPI_Finalize.
 */
#include "nm-trace.h"

#include <dlfcn.h>

/* The rank, asked of MPI right after the program's own MPI_Init returned. MPI_COMM_WORLD is
 * &ompi_mpi_comm_world in Open MPI, the integer 0x44000000 in MPICH (and its ABI kin). */
static void after_init(int rc)
{
    if (!nm_tracing() || rc != 0) return;
    int saved = errno;
    nm_guard(1);
    int (*comm_rank)(nm_handle, int *) = (int (*)(nm_handle, int *))dlsym(RTLD_DEFAULT, "PMPI_Comm_rank");
    int (*comm_size)(nm_handle, int *) = (int (*)(nm_handle, int *))dlsym(RTLD_DEFAULT, "PMPI_Comm_size");
    void *ompi_world = dlsym(RTLD_DEFAULT, "ompi_mpi_comm_world");
    nm_handle world = ompi_world ? (nm_handle)ompi_world : (nm_handle)0x44000000;
    int rank = -1, size = 0;
    if (comm_rank && comm_rank(world, &rank) != 0) rank = -1;
    if (comm_size && comm_size(world, &size) != 0) size = 0;
    nm_record_rank(rank, size);
    nm_guard(-1);
    errno = saved;
}

/* nm-evidence's events: 1 before MPI_Init, 2 after, 3 before MPI_Finalize, 4 after */
static void on_mpi(int event, int rc)
{
    nm_mpi_phase = event;
    if (event == 2) after_init(rc);
    if (event == 4 && nm_tracing()) nm_flush(0);
}

/* Registered at load: the evidence library is loaded before this one (it is first in LD_PRELOAD). */
__attribute__((constructor)) static void nm_mpi_hook(void)
{
    int (*add)(void (*)(int, int)) = (int (*)(void (*)(int, int)))dlsym(RTLD_DEFAULT, "nm_mpi_hook_add");
    if (add) add(on_mpi);
}
