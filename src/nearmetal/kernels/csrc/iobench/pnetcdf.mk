# nm-iobench's PnetCDF backend (pnetcdf.c): found for the MPI family being built, by the rules of iobench.mk
# (included for each line of backends.def that has a NAME.mk).
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
