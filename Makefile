# Cairn build. `make` builds everything into build/ (`make programs` only
# what `make install` installs); `make SAN=1` builds with
# ASan+UBSan into build-san/; `make test` runs the unit tests. `make install`
# puts the programs, libcairn and its header and cairn.pc, the man pages
# and the bash completion under PREFIX
# (default /usr/local; DESTDIR for staging), and the nbdkit plugin in nbdkit's
# plugin directory when nbdkit-plugin-dev is installed.
CC ?= cc
SAN ?= 0
ifeq ($(SAN),1)
BUILD ?= build-san
SANFLAGS = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
OPT = -O1 -g
else
BUILD ?= build
SANFLAGS =
OPT = -O2 -g
endif
CFLAGS_BASE = -std=c11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -Wall -Wextra -Werror \
	-Wno-unused-parameter -pthread -MMD -MP $(OPT) $(SANFLAGS)
FUSE_CFLAGS := $(shell pkg-config --cflags fuse3 2>/dev/null)
FUSE_LIBS := $(shell pkg-config --libs fuse3 2>/dev/null) -luring
CFLAGS_ALL = $(CFLAGS_BASE) $(CPPFLAGS) $(CFLAGS)
# OpenSSL: TLS (src/rpc/tls.c); ISA-L: disperse's erasure code
# (src/client/ec_codec.c).
LDLIBS_ALL = -pthread -lssl -lcrypto -lisal -lm $(SANFLAGS) $(LDFLAGS)

LIB_SRC := $(wildcard src/lib/*.c) $(wildcard src/rpc/*.c)
BRICK_SRC := $(wildcard src/brick/*.c)
CLIENT_SRC := $(wildcard src/client/*.c)
FUSE_SRC := $(wildcard src/fuse/*.c)
MGMT_SRC := $(wildcard src/mgmt/*.c)
CLI_SRC := $(wildcard src/cli/*.c)
SHD_SRC := $(wildcard src/shd/*.c)
LIBCAIRN_SRC := $(wildcard src/libcairn/*.c)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

LIB_OBJ := $(call obj,$(LIB_SRC))
BRICK_OBJ := $(call obj,$(filter-out src/brick/main.c,$(BRICK_SRC)))
CLIENT_OBJ := $(call obj,$(CLIENT_SRC))
MGMT_OBJ := $(call obj,$(filter-out src/mgmt/main.c,$(MGMT_SRC)))
LIBCAIRN_OBJ := $(call obj,$(LIBCAIRN_SRC))
# Only the unit tests' pattern rule uses these: keep them between builds.
.SECONDARY: $(LIBCAIRN_OBJ)

# libcairn.so: the client stack and the library, compiled position
# independent; only the cairn_* calls of include/cairn/cairn.h are exported
# (src/libcairn/libcairn.map). The soname's number changes only when a call
# changes incompatibly.
LIBCAIRN_SONAME := libcairn.so.1
LIBCAIRN_REAL := libcairn.so.1.0.0
pic = $(patsubst %.c,$(BUILD)/pic/%.o,$(1))
LIBCAIRN_PIC := $(call pic,$(LIB_SRC) $(CLIENT_SRC) $(LIBCAIRN_SRC))
LIBCAIRN := $(BUILD)/lib/$(LIBCAIRN_REAL)
# Programs on the library see its public header only, and find the library
# beside their bin/ or examples/ directory.
LIBCAIRN_USER_CFLAGS = -std=c11 -Wall -Wextra -Werror -pedantic -O2 -g -pthread $(SANFLAGS) -Iinclude
LIBCAIRN_USER_LIBS = -L$(BUILD)/lib -lcairn -Wl,-rpath,'$$ORIGIN/../lib' -pthread $(SANFLAGS)

BINS := $(BUILD)/bin/cairnd $(BUILD)/bin/cairn-brickd $(BUILD)/bin/cairn $(BUILD)/bin/cairn-fuse \
	$(BUILD)/bin/cairn-shd
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_REPLAY := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%-replay,$(FUZZ_SRC))

# Test tools on the library (tests/libcairn/cairn_X.c -> bin/cairn-X).
LIBCAIRN_PROGS := $(BUILD)/examples/cairn-example $(BUILD)/bin/cairn-copy $(BUILD)/bin/cairn-shell

# The nbdkit plugin (src/nbd/, docs/nbd.md) needs nbdkit's plugin header
# (Debian: nbdkit-plugin-dev); without it the build says so and goes on.
NBDKIT_PLUGINDIR ?= $(shell pkg-config --variable=plugindir nbdkit 2>/dev/null)
NBD_PLUGIN := $(BUILD)/lib/nbdkit-cairn-plugin.so
ifneq ($(NBDKIT_PLUGINDIR),)
NBD_TARGET := $(NBD_PLUGIN)
else
NBD_TARGET := nbd-plugin-skipped
endif
# nbdkit provides the nbdkit_* symbols when it loads the plugin: no -z defs.
NBD_CFLAGS = -std=c11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -Wall -Wextra -Werror \
	-Wno-unused-parameter $(OPT) -fPIC -shared -pthread $(SANFLAGS) -Iinclude \
	$(shell pkg-config --cflags nbdkit 2>/dev/null)

all: programs $(UNIT_BINS) $(FUZZ_REPLAY) $(LIBCAIRN_PROGS) $(BUILD)/bench/placement \
	$(BUILD)/bench/ec-speed

# What `make install` installs (the Debian package builds only this).
programs: $(BINS) $(BUILD)/bin/mount.cairn $(BUILD)/lib/libcairn.so $(NBD_TARGET)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(FUSE_CFLAGS) -c $< -o $@

$(BUILD)/pic/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -fPIC -fvisibility=hidden -c $< -o $@

$(LIBCAIRN): $(LIBCAIRN_PIC) src/libcairn/libcairn.map
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,$(LIBCAIRN_SONAME) -Wl,--version-script=src/libcairn/libcairn.map \
		-Wl,-z,defs -o $@ $(LIBCAIRN_PIC) $(LDLIBS_ALL)

$(BUILD)/lib/libcairn.so: $(LIBCAIRN)
	ln -sf $(LIBCAIRN_REAL) $(BUILD)/lib/$(LIBCAIRN_SONAME)
	ln -sf $(LIBCAIRN_SONAME) $@

$(BUILD)/examples/cairn-example: examples/cairn_example.c include/cairn/cairn.h $(BUILD)/lib/libcairn.so
	@mkdir -p $(dir $@)
	$(CC) $(LIBCAIRN_USER_CFLAGS) -o $@ $< $(LIBCAIRN_USER_LIBS)

$(BUILD)/bin/cairn-%: tests/libcairn/cairn_%.c include/cairn/cairn.h $(BUILD)/lib/libcairn.so
	@mkdir -p $(dir $@)
	$(CC) $(LIBCAIRN_USER_CFLAGS) -D_GNU_SOURCE -o $@ $< $(LIBCAIRN_USER_LIBS)

# Beside libcairn.so in the build tree; `make install` links it again to
# find libcairn in LIBDIR.
$(NBD_PLUGIN): src/nbd/nbdkit-cairn-plugin.c include/cairn/cairn.h $(BUILD)/lib/libcairn.so
	$(CC) $(NBD_CFLAGS) -o $@ $< -L$(BUILD)/lib -lcairn -Wl,-rpath,'$$ORIGIN' $(SANFLAGS)

nbd-plugin-skipped:
	@echo "nbdkit-cairn-plugin.so: skipped, nbdkit's plugin header is missing" \
		"(apt-get install nbdkit-plugin-dev)"

$(BUILD)/bin/cairn-brickd: $(BUILD)/obj/src/brick/main.o $(BRICK_OBJ) $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDLIBS_ALL)

# cairnd takes the distribute layer's pure name hash for volume import and its
# placement code for volumes' placements (GETVOL), and
# libsystemd for its readiness report (sd_notify; only main.c calls it), and
# the client side's TLS settings for its connections to TLS bricks.
$(BUILD)/bin/cairnd: $(BUILD)/obj/src/mgmt/main.o $(MGMT_OBJ) $(LIB_OBJ) $(BUILD)/obj/src/client/dht_layout.o \
	$(BUILD)/obj/src/client/dht_place.o \
	$(BUILD)/obj/src/client/tls.o
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ -lraft -luv -lsystemd $(LDLIBS_ALL)

$(BUILD)/bin/cairn: $(call obj,$(CLI_SRC)) $(CLIENT_OBJ) $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDLIBS_ALL)

$(BUILD)/bin/cairn-shd: $(call obj,$(SHD_SRC)) $(CLIENT_OBJ) $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDLIBS_ALL)

$(BUILD)/bin/cairn-fuse: $(call obj,$(FUSE_SRC)) $(CLIENT_OBJ) $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(FUSE_LIBS) $(LDLIBS_ALL)

$(BUILD)/bin/mount.cairn: src/fuse/mount.cairn
	@mkdir -p $(dir $@)
	install -m 755 $< $@

# Unit tests link every library object; each test_X.c has its own main().
$(BUILD)/tests/%: tests/unit/%.c $(LIB_OBJ) $(BRICK_OBJ) $(CLIENT_OBJ) $(MGMT_OBJ) $(LIBCAIRN_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(FUSE_CFLAGS) -o $@ $^ $(FUSE_LIBS) -lraft -luv $(LDLIBS_ALL)

# The placement study (docs/notes/2026-12-07-placement.md): the real placement code over a
# million names.
$(BUILD)/bench/placement: bench/placement.c $(BUILD)/obj/src/client/dht_place.o \
		$(BUILD)/obj/src/client/dht_layout.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDLIBS_ALL)

# The erasure code's speed (docs/notes/2026-12-07-disperse-plan.md).
$(BUILD)/bench/ec-speed: bench/ec_speed.c $(BUILD)/obj/src/client/ec_codec.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $^ $(LDLIBS_ALL)

# Fuzz targets: built as corpus replayers with gcc (tests/fuzz/replay.c
# provides main); `make fuzz` builds libFuzzer binaries with clang.
$(BUILD)/fuzz/%-replay: tests/fuzz/%.c tests/fuzz/replay.c $(LIB_OBJ) $(BRICK_OBJ) $(CLIENT_OBJ) $(MGMT_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -o $@ $^ -lraft -luv $(LDLIBS_ALL)

# The sources are compiled once (coverage and sanitizers, no fuzzer main)
# into build-fuzz/obj/ and linked into every target.
FUZZ_CC ?= clang
FUZZ_FLAGS = -std=c11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -g -O1 -pthread -MMD -MP
FUZZ_OBJ := $(patsubst %.c,build-fuzz/obj/%.o,$(LIB_SRC) $(filter-out src/brick/main.c,$(BRICK_SRC)) \
	$(CLIENT_SRC) $(filter-out src/mgmt/main.c,$(MGMT_SRC)))
.SECONDARY: $(FUZZ_OBJ)
fuzz: $(patsubst tests/fuzz/%.c,build-fuzz/%,$(FUZZ_SRC))
build-fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link,address,undefined -c $< -o $@
build-fuzz/%: tests/fuzz/%.c $(FUZZ_OBJ)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer,address,undefined -o $@ $< $(filter %.o,$^) \
		-lraft -luv -lssl -lcrypto -lisal -lm

test: all
	@set -e; for t in $(UNIT_BINS); do echo "== $$t"; $$t; done

PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
MANDIR ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions

install: programs
	install -d $(DESTDIR)$(PREFIX)/sbin $(DESTDIR)/sbin $(DESTDIR)$(LIBDIR) \
		$(DESTDIR)$(INCLUDEDIR)/cairn $(DESTDIR)$(PKGCONFIGDIR)
	install -m 755 $(BINS) $(DESTDIR)$(PREFIX)/sbin/
	install -m 755 $(BUILD)/bin/mount.cairn $(DESTDIR)/sbin/mount.cairn
	install -m 755 $(LIBCAIRN) $(DESTDIR)$(LIBDIR)/$(LIBCAIRN_REAL)
	ln -sf $(LIBCAIRN_REAL) $(DESTDIR)$(LIBDIR)/$(LIBCAIRN_SONAME)
	ln -sf $(LIBCAIRN_SONAME) $(DESTDIR)$(LIBDIR)/libcairn.so
	install -m 644 include/cairn/cairn.h $(DESTDIR)$(INCLUDEDIR)/cairn/cairn.h
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
		src/libcairn/cairn.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/cairn.pc
	chmod 644 $(DESTDIR)$(PKGCONFIGDIR)/cairn.pc
	install -d $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(BASHCOMPDIR)
	install -m 644 man/*.8 $(DESTDIR)$(MANDIR)/man8/
	install -m 644 extras/bash-completion/cairn $(DESTDIR)$(BASHCOMPDIR)/cairn
ifneq ($(NBDKIT_PLUGINDIR),)
	install -d $(DESTDIR)$(NBDKIT_PLUGINDIR) $(BUILD)/install
	$(CC) $(NBD_CFLAGS) -o $(BUILD)/install/nbdkit-cairn-plugin.so src/nbd/nbdkit-cairn-plugin.c \
		-L$(BUILD)/lib -lcairn -Wl,-rpath,$(LIBDIR) $(SANFLAGS)
	install -m 755 $(BUILD)/install/nbdkit-cairn-plugin.so \
		$(DESTDIR)$(NBDKIT_PLUGINDIR)/nbdkit-cairn-plugin.so
else
	@echo "nbdkit-cairn-plugin.so: not installed, nbdkit's plugin header is missing"
endif

clean:
	rm -rf build build-san build-fuzz

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

# Fails, naming the files, when any source differs from .clang-format.
format-check:
	clang-format --dry-run -Werror $$(git ls-files '*.c' '*.h')

.PHONY: all programs test install clean format format-check fuzz nbd-plugin-skipped
-include $(shell find $(BUILD) build-fuzz -name '*.d' 2>/dev/null)
