# zcsock top-level Makefile.
#
# Targets
#   all (default)   build/libzcsock.so, build/zcsock (launcher), build/zcbench
#   test            the default run, what CI runs (21 minutes here): every
#                   tier but page exchange's variants on other page kinds, at
#                   QUICK=1 sizes (QUICK=0: full ones); closes with one
#                   "N passed, N failed, N skipped" line
#   test-full       every tier at full sizes and repetitions (about an hour)
#   test-unit       cmocka unit tests only (honours SANITIZE)
#   test-<tier>     one tier (ARCHITECTURE.md lists them)
#   soak            long runs: 32 GiB paired streams, the MPI cases 100 times
#   soak-programs   the real servers that failed only sometimes, 20 times each
#   bench           benchmarks: kernel versus zcsock in one run, ratios, SVG
#   bench-mpi       MPI over TCP, with and without zcsock, against MPI's own
#                   shared memory: NetPIPE and collectives, ratios, SVG
#   check-symbols   fail when libzcsock.so exports anything not declared, or
#                   its code calls one of its own exported hooks
#   install         PREFIX (/usr/local) and DESTDIR honoured
#   deps            install the Debian packages (scripts/deps.sh)
#   clean
#
# Knobs (all optional)
#   CC, CFLAGS, LDFLAGS  yours; project flags live in ZC_CFLAGS and are merged
#   SANITIZE=address|undefined|thread  sanitizer build in build/san-<name>/,
#                        a checked one (ZC_CHECKS: invariants abort)
#   V=1                  show full commands
#   QUICK=1              shorter benchmark and test runs (make test's default)
#   PREFIX, DESTDIR, LIBDIR, BINDIR, INCLUDEDIR
#   TEST_TIMEOUT=secs    per-test timeout (default 300)

CC      ?= cc
CFLAGS  ?= -O2 -g
LDFLAGS ?=
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
LIBDIR  ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
DOCDIR  ?= $(PREFIX)/share/doc/zcsock
MANDIR  ?= $(PREFIX)/share/man
TEST_TIMEOUT ?= 300
VERSION := 0.1.0

ifeq ($(SANITIZE),)
BUILD   := build
SAN_FLAGS :=
else
BUILD   := build/san-$(SANITIZE)
SAN_FLAGS := -fsanitize=$(SANITIZE) -fno-omit-frame-pointer
# checked builds: invariants that count and go on in a release build abort
# here (ZC_CHECKS: the local path's state table, shim/paths/local/state.c)
SAN_FLAGS += -DZC_CHECKS
ifeq ($(SANITIZE),undefined)
SAN_FLAGS += -fno-sanitize-recover=all
endif
endif

ZC_CFLAGS = -std=gnu11 -Icommon -Wall -Wextra -Wstrict-prototypes -Wmissing-prototypes \
	-fPIC -fvisibility=hidden -ftls-model=initial-exec -D_GNU_SOURCE \
	-DZCSOCK_VERSION='"$(VERSION)"' -Iinclude -MMD -MP $(SAN_FLAGS) $(CFLAGS)
ZC_LDFLAGS = $(SAN_FLAGS) $(LDFLAGS)

ifeq ($(V),1)
Q :=
quiet = @true
else
Q := @
quiet = @printf '  %-8s %s\n'
endif

LIB       := $(BUILD)/libzcsock.so
LIB_OBJS  :=
LIB_LIBS  := -ldl -lpthread
EXPORTS   :=
UNIT_TESTS :=
TEST_TIERS :=
CLEAN     :=

all: lib

# malloc-hooks is always linked in (shim/shim_mem.c wires it to the cache).
MH ?= 1

# MPI implementations whose compiler wrapper is installed (mpicc.<name>):
# the MPI benchmark (examples/) and the MPI test cases (tests/programs/)
# are built for each.
MPI_IMPLS := $(foreach m,openmpi mpich,$(if $(shell command -v mpicc.$(m) 2>/dev/null),$(m)))

include common/module.mk
include shim/module.mk
-include malloc-hooks/module.mk
-include pindown-cache/module.mk
-include launcher/module.mk
-include examples/module.mk
-include docs/module.mk
include tests/module.mk

lib: $(LIB)

# Module micro-benchmarks (pin-down cache, allocator hooks) run before the
# socket benchmark table.
bench: $(BENCH_EXTRA)

# Rebuild everything when the flags change.
$(BUILD)/.flags: FORCE
	@mkdir -p $(@D)
	@echo '$(CC) $(ZC_CFLAGS) $(ZC_LDFLAGS)' | cmp -s - $@ || echo '$(CC) $(ZC_CFLAGS) $(ZC_LDFLAGS)' > $@

$(BUILD)/obj/%.o: %.c $(BUILD)/.flags
	@mkdir -p $(@D)
	$(quiet) CC $<
	$(Q)$(CC) $(ZC_CFLAGS) $(OBJ_EXTRA) -c -o $@ $<

# The version script is made from every module's exports.txt.
$(BUILD)/libzcsock.map: $(EXPORTS)
	@mkdir -p $(@D)
	$(Q){ echo '{ global:'; grep -hv '^#' $(EXPORTS) | sed '/^$$/d; s/$$/;/'; echo 'local: *; };'; } > $@

$(LIB): $(LIB_OBJS) $(BUILD)/libzcsock.map
	$(quiet) LD $@
	$(Q)$(CC) -shared -Wl,-z,defs -Wl,-z,now -Wl,--version-script=$(BUILD)/libzcsock.map \
		$(ZC_LDFLAGS) -o $@ $(LIB_OBJS) $(LIB_LIBS)

check-symbols: $(LIB)
	$(Q)scripts/check-symbols.sh $(LIB) $(EXPORTS)
	$(Q)scripts/check-self-calls.sh $(LIB)

deps:
	scripts/deps.sh

clean:
	rm -rf build $(CLEAN)

# pkg-config paths relative to ${prefix} when under PREFIX (relocatable).
PC_LIBDIR = $(patsubst $(PREFIX)/%,$${prefix}/%,$(LIBDIR))
PC_INCLUDEDIR = $(patsubst $(PREFIX)/%,$${prefix}/%,$(INCLUDEDIR))

install: all
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(BINDIR) $(DESTDIR)$(INCLUDEDIR) \
		$(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(DOCDIR) $(DESTDIR)$(MANDIR)/man1
	install -m 755 $(LIB) $(DESTDIR)$(LIBDIR)/libzcsock.so
	install -m 644 include/zcsock.h $(DESTDIR)$(INCLUDEDIR)/zcsock.h
	sed -e 's|@PREFIX@|$(PREFIX)|; s|@LIBDIR@|$(PC_LIBDIR)|; s|@INCLUDEDIR@|$(PC_INCLUDEDIR)|; s|@VERSION@|$(VERSION)|' \
		zcsock.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/zcsock.pc
	install -m 644 README.md ARCHITECTURE.md $(DESTDIR)$(DOCDIR)/
	install -m 644 docs/zcsock.1 $(DESTDIR)$(MANDIR)/man1/zcsock.1
	$(INSTALL_EXTRA)

.PHONY: all lib test test-unit bench bench-mpi check-symbols deps clean install FORCE
FORCE:

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
