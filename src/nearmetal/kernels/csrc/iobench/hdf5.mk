# nm-iobench's parallel HDF5 backend (hdf5.c): found for the MPI family being built, by the rules of iobench.mk
# (included for each line of backends.def that has a NAME.mk).
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
