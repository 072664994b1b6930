# nm-metadata's tree: METADATA_FILES small text files and METADATA_LIBS copies of one tiny
# shared library under $(SHAREDIR)/metadata (see data/metadata/gen.c for the layout).
# Built with $(CC) (the image's gcc inside an image); the library is compiled once and
# copied, so the tree takes well under a second to generate.
METADATA_FILES ?= 1000
METADATA_LIBS  ?= 100
METADATA_DIR   := $(SHAREDIR)/metadata
METADATA_TMP   := $(SHAREDIR)/.metadata.tmp

data: $(METADATA_DIR)/MANIFEST

$(METADATA_DIR)/MANIFEST: data/metadata/gen.c data/metadata/lib.c data/metadata.mk | $(SHAREDIR)
	rm -rf $(METADATA_TMP) $(METADATA_DIR)
	mkdir -p $(METADATA_TMP)
	$(CC) -O2 -o $(METADATA_TMP)/gen data/metadata/gen.c
	$(CC) -O2 -fPIC -shared -o $(METADATA_TMP)/libnmmd.so data/metadata/lib.c -ldl
	$(METADATA_TMP)/gen $(METADATA_TMP)/tree $(METADATA_FILES) $(METADATA_LIBS) $(METADATA_TMP)/libnmmd.so
	mv $(METADATA_TMP)/tree $(METADATA_DIR)
	rm -rf $(METADATA_TMP)
