# nm-iobench's parallel netCDF-4 backend (netcdf4.c): found for the MPI family being built, by the rules of iobench.mk
# (included for each line of backends.def that has a NAME.mk).
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
