# nm-iobench's backends (backends.def) and their I/O libraries, detected at build time for the
# MPI family being built (MPI=openmpi|mpich, MPICC), on the host and inside images alike. Defines
#   IOBENCH_BACKENDS the names of backends.def, in its order (iobench/NAME.c each)
#   IOBENCH_CFLAGS  -DNM_HAVE_PNETCDF / -DNM_HAVE_NETCDF4 / -DNM_HAVE_HDF5 + include dirs,
#                   -DNM_MPI_FAMILY / -DNM_MPI_LABEL for the "unavailable" reasons
#   IOBENCH_LIBS    -l flags; -L + RUNPATH for libraries outside the default search path
# Each backend whose library must be found has a fragment iobench/NAME.mk, included below,
# that adds to IOBENCH_CFLAGS and IOBENCH_LIBS with the helpers defined here.
# A library counts only if its pkg-config package exists AND its shared library links this
# family's MPI: Debian's libpnetcdf and libnetcdf_mpi link Open MPI (libmpi.so.40), and
# linking them into an MPICH program would load two MPIs into one process.

IOBENCH_MPI_PC  := $(if $(filter openmpi,$(MPI)),ompi-c,mpich)
IOBENCH_MPI_LIB := $(if $(filter openmpi,$(MPI)),libmpi.so,libmpich.so)
IOBENCH_MPI_LABEL := $(if $(filter openmpi,$(MPI)),Open MPI,MPICH)

# Full path of shared library $(1) (e.g. libpnetcdf.so): first in directory $(2), else where
# the compiler finds it; empty when neither has it.
iobench_lib_path = $(firstword $(wildcard $(addsuffix /$(1),$(2))) \
    $(filter /%,$(shell $(MPICC) -print-file-name=$(1) 2>/dev/null)))
# The SONAME of a shared library, and the sonames it needs.
iobench_soname = $(shell LC_ALL=C readelf -d $(1) 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
iobench_needed = $(shell LC_ALL=C readelf -d $(1) 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')

# This family's MPI soname (libmpi.so.40, libmpich.so.12). MPICH also ships the ABI name
# libmpi.so.<same major>, which a library may link instead.
IOBENCH_MPI_SONAME := $(call iobench_soname,$(call iobench_lib_path,$(IOBENCH_MPI_LIB),$(shell pkg-config --variable=libdir $(IOBENCH_MPI_PC) 2>/dev/null)))
IOBENCH_MPI_SONAMES := $(IOBENCH_MPI_SONAME) $(if $(filter mpich,$(MPI)),$(patsubst libmpich.so.%,libmpi.so.%,$(IOBENCH_MPI_SONAME)))
# yes when library file $(1) exists and needs this family's MPI
iobench_links_family = $(if $(1),$(if $(filter $(IOBENCH_MPI_SONAMES),$(call iobench_needed,$(1))),yes))
# RUNPATH (not RPATH) so that bind mode's LD_LIBRARY_PATH still wins for libmpi; only for
# directories the dynamic loader does not search anyway.
IOBENCH_DEFAULT_LIBDIRS := /lib /usr/lib /lib64 /usr/lib64 /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu
# No -L for those either: a -L/usr/lib/x86_64-linux-gnu ahead of the wrapper's own would let
# -lmpi pick up Debian's alternatives symlink libmpi.so, which may be the other MPI.
iobench_libdir = $(foreach d,$(filter-out $(IOBENCH_DEFAULT_LIBDIRS),$(1)),-L$(d) -Wl,--enable-new-dtags -Wl,-rpath,$(d))
iobench_pc_exists = $(shell pkg-config --exists $(1) 2>/dev/null && echo yes)

IOBENCH_CFLAGS := -DNM_MPI_FAMILY=\"$(MPI)\" -DNM_MPI_LABEL='"$(IOBENCH_MPI_LABEL)"'
IOBENCH_LIBS   :=

# (-E and `.` for the table's opening parenthesis: make counts the parentheses of a call)
IOBENCH_BACKENDS := $(shell sed -nE 's/^NM_IO_BACKEND.([A-Za-z0-9_]+),.*/\1/p' iobench/backends.def)
IOBENCH_FRAGMENTS := $(wildcard $(addprefix iobench/,$(addsuffix .mk,$(IOBENCH_BACKENDS))))
include $(IOBENCH_FRAGMENTS)
