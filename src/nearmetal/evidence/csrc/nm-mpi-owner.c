/* nm-evidence owns MPI_Init, MPI_Init_thread and MPI_Finalize among nearmetal's preloads (and
 * PMPI_Init/PMPI_Init_thread/PMPI_Finalize, which Open MPI's Fortran bindings call directly,
 * and gfortran's mpi_init_/mpi_init_thread_/mpi_finalize_). Another preload of nearmetal's
 * (the I/O tracer) does not wrap them: it registers a hook (nm_mpi_hook_add) and is told
 * before and after each. The end of the outermost MPI_Init is time-stamped (CLOCK_REALTIME,
 * against the launcher's NM_LAUNCH_NS, and CLOCK_MONOTONIC for the profile's window); the
 * rank and the job's size are asked of MPI right after it; the evidence file is written after MPI_Finalize. */
#include "nm-evidence.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

typedef void (*nm_mpi_hook)(int event, int rc);
enum { BEFORE_INIT = 1, AFTER_INIT = 2, BEFORE_FINALIZE = 3, AFTER_FINALIZE = 4 };
static nm_mpi_hook hooks[8];
static int nhooks;

long long nm_ev_init_end_mono, nm_ev_finalize_mono, nm_ev_init_end_real;
int nm_ev_mpi_rank = -1, nm_ev_mpi_size = -1, nm_ev_mpi_seen;

/* For nearmetal's other preloads: fn(event, rc) before (1) and after (2) MPI_Init, before (3)
 * and after (4) MPI_Finalize. 0: registered; -1: no room. */
__attribute__((visibility("default"))) int nm_mpi_hook_add(nm_mpi_hook fn)
{
    if (nhooks >= (int)(sizeof hooks / sizeof hooks[0])) return -1;
    hooks[nhooks++] = fn;
    return 0;
}

static void tell(int event, int rc)
{
    for (int i = 0; i < nhooks; i++) hooks[i](event, rc);
}

static long long real_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

typedef int (*int_fn)(void *, int *);

static void after_init(int rc, int provided)
{
    nm_ev_init_end_real = real_ns();
    nm_ev_init_end_mono = nm_ev_now();
    nm_ev_mpi_seen = 1;
    nm_ev_multi = provided == 3; /* MPI_THREAD_MULTIPLE in both families */
    if (rc == 0) {
        /* MPI_COMM_WORLD: &ompi_mpi_comm_world in Open MPI, the integer 0x44000000 in MPICH */
        int_fn comm_rank = (int_fn)dlsym(RTLD_DEFAULT, "PMPI_Comm_rank");
        int_fn comm_size = (int_fn)dlsym(RTLD_DEFAULT, "PMPI_Comm_size");
        void *ompi_world = dlsym(RTLD_DEFAULT, "ompi_mpi_comm_world");
        void *world = ompi_world ? ompi_world : (void *)0x44000000L;
        int rank = -1, size = -1;
        nm_ev_depth++;
        if (comm_rank && comm_rank(world, &rank) == 0) nm_ev_mpi_rank = rank;
        /* the job's size as MPI sees it: 1 on every rank of a program whose MPI did not join
         * the launcher's job (evidence/lone.py) */
        if (comm_size && comm_size(world, &size) == 0) nm_ev_mpi_size = size;
        nm_ev_depth--;
    }
    tell(AFTER_INIT, rc);
}

/* The outermost call of an init: hooks and times around it; a nested one (a Fortran binding
 * calling the C function) is forwarded. */
#define INIT_BODY(call, provided_expr)             \
    if (nm_ev_depth) return call;                  \
    tell(BEFORE_INIT, 0);                          \
    nm_ev_depth++;                                 \
    int rc = call;                                 \
    nm_ev_depth--;                                 \
    after_init(rc, provided_expr);                 \
    return rc;

#define REAL(type, name) \
    static type real;    \
    if (!real && !(real = (type)nm_ev_next(name))) return 1;

typedef int (*init_fn)(int *, char ***);
typedef int (*init_thread_fn)(int *, char ***, int, int *);
typedef int (*finalize_fn)(void);

#define DEF_INIT(sym)                                          \
    __attribute__((visibility("default"))) int sym(int *argc, char ***argv) \
    {                                                          \
        REAL(init_fn, #sym)                                    \
        INIT_BODY(real(argc, argv), 0)                         \
    }
#define DEF_INIT_THREAD(sym)                                                                  \
    __attribute__((visibility("default"))) int sym(int *argc, char ***argv, int req, int *provided) \
    {                                                                                         \
        REAL(init_thread_fn, #sym)                                                            \
        INIT_BODY(real(argc, argv, req, provided), provided ? *provided : req)                \
    }
DEF_INIT(MPI_Init)
DEF_INIT(PMPI_Init)
DEF_INIT_THREAD(MPI_Init_thread)
DEF_INIT_THREAD(PMPI_Init_thread)

static int finalize_with(int (*call)(void *), void *real)
{
    if (nm_ev_depth) return call(real);
    nm_ev_finalize_mono = nm_ev_now();
    tell(BEFORE_FINALIZE, 0);
    nm_ev_depth++;
    int rc = call(real);
    nm_ev_depth--;
    tell(AFTER_FINALIZE, rc);
    nm_ev_write("finalize");
    return rc;
}

static int call_c_finalize(void *real) { return ((finalize_fn)real)(); }

#define DEF_FINALIZE(sym)                                                        \
    __attribute__((visibility("default"))) int sym(void)                        \
    {                                                                            \
        REAL(finalize_fn, #sym)                                                  \
        return finalize_with(call_c_finalize, (void *)real);                     \
    }
DEF_FINALIZE(MPI_Finalize)
DEF_FINALIZE(PMPI_Finalize)

/* gfortran's bindings: ierr is the last argument; mpi_init_thread_(required, provided, ierr) */
typedef void (*f_init_fn)(int *);
typedef void (*f_init_thread_fn)(int *, int *, int *);
__attribute__((visibility("default"))) void mpi_init_(int *ierr)
{
    static f_init_fn real;
    if (!real && !(real = (f_init_fn)nm_ev_next("mpi_init_"))) return;
    if (nm_ev_depth) { real(ierr); return; }
    tell(BEFORE_INIT, 0);
    nm_ev_depth++;
    real(ierr);
    nm_ev_depth--;
    after_init(*ierr, 0);
}
__attribute__((visibility("default"))) void mpi_init_thread_(int *required, int *provided, int *ierr)
{
    static f_init_thread_fn real;
    if (!real && !(real = (f_init_thread_fn)nm_ev_next("mpi_init_thread_"))) return;
    if (nm_ev_depth) { real(required, provided, ierr); return; }
    tell(BEFORE_INIT, 0);
    nm_ev_depth++;
    real(required, provided, ierr);
    nm_ev_depth--;
    after_init(*ierr, *provided);
}
static int call_f_finalize(void *real)
{
    int ierr = 0;
    ((f_init_fn)real)(&ierr);
    return ierr;
}
__attribute__((visibility("default"))) void mpi_finalize_(int *ierr)
{
    static f_init_fn real;
    if (!real && !(real = (f_init_fn)nm_ev_next("mpi_finalize_"))) return;
    *ierr = finalize_with(call_f_finalize, (void *)real);
}

/* The MPI library (the first that defines PMPI_Comm_rank): its path as this rank sees it (dladdr), its
 * inode, and its DT_SONAME (dl_iterate_phdr, the object loaded at that base). */
struct soname_search { void *base; char *soname; int room; };

static int find_soname(struct dl_phdr_info *info, size_t size, void *data)
{
    struct soname_search *s = data;
    (void)size;
    if ((void *)info->dlpi_addr != s->base) return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type != PT_DYNAMIC) continue;
        ElfW(Dyn) *dyn = (ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
        const char *strtab = NULL;
        long soname = -1;
        for (; dyn->d_tag != DT_NULL; dyn++) {
            if (dyn->d_tag == DT_STRTAB) strtab = (const char *)dyn->d_un.d_ptr; /* relocated by ld.so */
            if (dyn->d_tag == DT_SONAME) soname = (long)dyn->d_un.d_val;
        }
        if (strtab && soname >= 0) snprintf(s->soname, s->room, "%s", strtab + soname);
    }
    return 1;
}

void nm_ev_mpi_library(char *path, int room, char *soname, int soroom, unsigned long *inode)
{
    path[0] = soname[0] = '\0';
    *inode = 0;
    void *addr = dlsym(RTLD_DEFAULT, "PMPI_Comm_rank");
    Dl_info info;
    if (!addr || !dladdr(addr, &info) || !info.dli_fname || !*info.dli_fname) return;
    snprintf(path, room, "%s", info.dli_fname);
    *inode = nm_ev_inode(path);
    struct soname_search s = {info.dli_fbase, soname, soroom};
    dl_iterate_phdr(find_soname, &s);
}
