# nm-iobench's high-level I/O libraries, detected at build time for the MPI family being
# built (MPI=openmpi|mpich, MPICC), on the host and inside images alike. Defines
#   IOBENCH_CFLAGS  -DNM_HAVE_PNETCDF / -DNM_HAVE_NETCDF4 / -DNM_HAVE_HDF5 + include dirs,
#                   -DNM_MPI_FAMILY / -DNM_MPI_LABEL for the "unavailable" reasons
#   IOBENCH_LIBS    -l flags; -L + RUNPATH for libraries outside the default search path
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

# --- PnetCDF (pkg pnetcdf; its .pc libdir may be wrong, so the compiler's search decides)
ifeq ($(call iobench_pc_exists,pnetcdf),yes)
IOBENCH_PNETCDF_SO := $(call iobench_lib_path,libpnetcdf.so,$(shell pkg-config --variable=libdir pnetcdf))
ifeq ($(call iobench_links_family,$(IOBENCH_PNETCDF_SO)),yes)
IOBENCH_PNETCDF_DIR := $(patsubst %/,%,$(dir $(realpath $(IOBENCH_PNETCDF_SO))))
IOBENCH_CFLAGS += -DNM_HAVE_PNETCDF $(shell pkg-config --cflags-only-I pnetcdf)
IOBENCH_LIBS   += $(call iobench_libdir,$(IOBENCH_PNETCDF_DIR)) -lpnetcdf
else
IOBENCH_CFLAGS += -DNM_PNETCDF_OTHER_MPI
endif
endif

# --- parallel netCDF-4 (pkg netcdf-mpi). Its .pc includedir points at /usr/include, which
# has no netcdf.h; the headers sit under the prefix (Debian: .../netcdf/mpi/include).
ifeq ($(call iobench_pc_exists,netcdf-mpi),yes)
IOBENCH_NETCDF4_SO := $(call iobench_lib_path,libnetcdf_mpi.so,$(shell pkg-config --variable=libdir netcdf-mpi))
IOBENCH_NETCDF4_INC := $(patsubst %/netcdf_par.h,%,$(firstword $(wildcard \
    $(addsuffix /netcdf_par.h,$(shell pkg-config --variable=includedir netcdf-mpi) \
        $(shell pkg-config --variable=prefix netcdf-mpi)/include \
        /usr/lib/x86_64-linux-gnu/netcdf/mpi/include))))
ifeq ($(call iobench_links_family,$(IOBENCH_NETCDF4_SO))$(if $(IOBENCH_NETCDF4_INC),,no),yes)
IOBENCH_NETCDF4_DIR := $(patsubst %/,%,$(dir $(realpath $(IOBENCH_NETCDF4_SO))))
IOBENCH_CFLAGS += -DNM_HAVE_NETCDF4 -I$(IOBENCH_NETCDF4_INC)
IOBENCH_LIBS   += $(call iobench_libdir,$(IOBENCH_NETCDF4_DIR)) -lnetcdf_mpi
else ifeq ($(IOBENCH_NETCDF4_INC),)
IOBENCH_CFLAGS += -DNM_NETCDF4_NO_HEADERS
else
IOBENCH_CFLAGS += -DNM_NETCDF4_OTHER_MPI
endif
endif

# --- parallel HDF5 (pkg hdf5-openmpi / hdf5-mpich: one build per MPI family). Only its own
# -I/-L flags are taken: the .pc also lists the MPI's, which the wrapper supplies.
IOBENCH_HDF5_PC := hdf5-$(MPI)
ifeq ($(call iobench_pc_exists,$(IOBENCH_HDF5_PC)),yes)
iobench_hdf5_only = $(foreach f,$(1),$(if $(findstring hdf5,$(f)),$(f)))
IOBENCH_HDF5_INC := $(call iobench_hdf5_only,$(shell pkg-config --cflags-only-I $(IOBENCH_HDF5_PC)))
IOBENCH_HDF5_DIR := $(patsubst -L%,%,$(firstword $(call iobench_hdf5_only,$(shell pkg-config --libs-only-L $(IOBENCH_HDF5_PC)))))
IOBENCH_HDF5_SO := $(call iobench_lib_path,libhdf5.so,$(IOBENCH_HDF5_DIR))
ifeq ($(call iobench_links_family,$(IOBENCH_HDF5_SO)),yes)
IOBENCH_CFLAGS += -DNM_HAVE_HDF5 $(IOBENCH_HDF5_INC)
IOBENCH_LIBS   += $(call iobench_libdir,$(IOBENCH_HDF5_DIR)) -lhdf5
else
IOBENCH_CFLAGS += -DNM_HDF5_OTHER_MPI
endif
endif
