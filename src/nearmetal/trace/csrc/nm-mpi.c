/* nm-trace MPI start and end: the rank, asked of MPI right after the program's own MPI_Init
 * returned, and the phases during which the MPI library's own file I/O is not recorded
 * (inside MPI_Init/MPI_Init_thread/MPI_Finalize). The PMPI_ names are wrapped too: Open MPI's
 * Fortran bindings call PMPI_Init directly. The tracer never calls MPI outside MPI_Init ..
 * MPI_Finalize. Buffers are flushed after MPI_Finalize.
 */
#include "nm-trace.h"

#include <dlfcn.h>

/* The rank, asked of MPI right after the program's own MPI_Init returned. MPI_COMM_WORLD is
 * &ompi_mpi_comm_world in Open MPI, the integer 0x44000000 in MPICH (and its ABI kin). */
static void after_init(int rc)
{
    nm_mpi_phase = 2;
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

int MPI_Init(int *argc, char ***argv)
{
    static int (*real)(int *, char ***);
    NM_REAL(real, "PMPI_Init", 1);
    nm_mpi_phase = 1;
    int rc = real(argc, argv);
    after_init(rc);
    return rc;
}
int PMPI_Init(int *argc, char ***argv) __attribute__((alias("MPI_Init")));

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    static int (*real)(int *, char ***, int, int *);
    NM_REAL(real, "PMPI_Init_thread", 1);
    nm_mpi_phase = 1;
    int rc = real(argc, argv, required, provided);
    after_init(rc);
    return rc;
}
int PMPI_Init_thread(int *, char ***, int, int *) __attribute__((alias("MPI_Init_thread")));

int MPI_Finalize(void)
{
    static int (*real)(void);
    NM_REAL(real, "PMPI_Finalize", 1);
    nm_mpi_phase = 3;
    int rc = real();
    nm_mpi_phase = 4;
    if (nm_tracing()) nm_flush(0);
    return rc;
}
int PMPI_Finalize(void) __attribute__((alias("MPI_Finalize")));

