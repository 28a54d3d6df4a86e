# malloc-hooks/: allocator and mapping hooks (memory events, large-buffer
# placement in memfd arenas).  See malloc-hooks/README.md.
#
# MH=1 (default) links the hooks into libzcsock.so; MH=0 leaves them out
# (built and unit-tested only).

MH ?= 1
MH_SRCS := $(wildcard malloc-hooks/mh_*.c)
MH_OBJS := $(MH_SRCS:%.c=$(BUILD)/obj/%.o)
MH_UNIT_OBJS := $(filter-out %/mh_alloc.o %/mh_map.o %/mh_init.o,$(MH_OBJS))

$(BUILD)/obj/malloc-hooks/%.o: OBJ_EXTRA = -fno-builtin-malloc -fno-builtin-free \
	-fno-builtin-calloc -fno-builtin-realloc

ifeq ($(MH),1)
LIB_OBJS += $(MH_OBJS)
EXPORTS  += malloc-hooks/exports.txt
TEST_TIERS += mh
endif

# --- unit tests (cmocka): arena/size classes/pool and event dispatch, linked
# directly (no exported hooks, so ASan keeps its own malloc). ---
MH_UNIT := test_mh_arena test_mh_event
MH_UNIT_BINS := $(MH_UNIT:%=$(BUILD)/tests/mh/%)
UNIT_TESTS += $(MH_UNIT_BINS)

$(BUILD)/tests/mh/test_%: malloc-hooks/tests/test_%.c $(MH_UNIT_OBJS) $(BUILD)/obj/common/zc_real.o $(BUILD)/obj/common/zc_fd.o
	@mkdir -p $(@D)
	$(quiet) TEST $@
	$(Q)$(CC) $(ZC_CFLAGS) -Imalloc-hooks $(ZC_LDFLAGS) -o $@ $< \
		$(MH_UNIT_OBJS) $(BUILD)/obj/common/zc_real.o $(BUILD)/obj/common/zc_fd.o -lcmocka -ldl -lpthread

# --- preload tier "mh": small programs run under LD_PRELOAD=$(LIB) (or
# MH_LIB=... to test the standalone libmhtest.so). ---
MH_T_SRCS := $(wildcard malloc-hooks/tests/t_*.c)
MH_T_BINS := $(MH_T_SRCS:malloc-hooks/tests/%.c=$(BUILD)/tests/mh/%)
MH_TESTLIB := $(BUILD)/tests/mh/libmhtest.so
MH_DLLIB := $(BUILD)/tests/mh/libmhdl.so
MH_NOMUNMAP := $(BUILD)/tests/mh/libmhnomunmap.so

$(BUILD)/tests/mh/t_%: malloc-hooks/tests/t_%.c malloc-hooks/tests/t_mh.h
	@mkdir -p $(@D)
	$(quiet) TEST $@
	$(Q)$(CC) $(ZC_CFLAGS) -fno-builtin-malloc -Imalloc-hooks $(ZC_LDFLAGS) -o $@ $< -ldl -lpthread

$(MH_DLLIB): malloc-hooks/tests/mh_dllib.c
	@mkdir -p $(@D)
	$(quiet) LD $@
	$(Q)$(CC) $(ZC_CFLAGS) -shared $(ZC_LDFLAGS) -o $@ $<

$(MH_NOMUNMAP): malloc-hooks/tests/mh_nomunmap.c
	@mkdir -p $(@D)
	$(quiet) LD $@
	$(Q)$(CC) $(ZC_CFLAGS) -shared $(ZC_LDFLAGS) -o $@ $<

# Standalone preload library: the hooks plus the resolver plus a tiny
# constructor, for testing the hooks without the shim.
$(MH_TESTLIB): malloc-hooks/tests/mh_testlib.c $(MH_OBJS) $(BUILD)/obj/common/zc_real.o $(BUILD)/obj/common/zc_fd.o
	@mkdir -p $(@D)
	$(quiet) LD $@
	$(Q)$(CC) $(ZC_CFLAGS) -Imalloc-hooks -shared -Wl,-z,defs $(ZC_LDFLAGS) -o $@ $< \
		$(MH_OBJS) $(BUILD)/obj/common/zc_real.o $(BUILD)/obj/common/zc_fd.o -ldl -lpthread

MH_LIB ?= $(abspath $(LIB))
test-mh: $(LIB) $(MH_T_BINS) $(MH_DLLIB) $(MH_TESTLIB) $(MH_NOMUNMAP)
	$(Q)$(TEST_ENV) MH_LIB=$(MH_LIB) MH_BIN=$(BUILD)/tests/mh malloc-hooks/tests/run.sh

test-mh-standalone: $(MH_T_BINS) $(MH_DLLIB) $(MH_TESTLIB) $(MH_NOMUNMAP)
	$(Q)$(TEST_ENV) MH_LIB=$(abspath $(MH_TESTLIB)) MH_BIN=$(BUILD)/tests/mh malloc-hooks/tests/run.sh

# --- benchmark ---
$(BUILD)/bench_mh: malloc-hooks/bench_mh.c
	@mkdir -p $(@D)
	$(quiet) CC $@
	$(Q)$(CC) $(ZC_CFLAGS) -fno-builtin-malloc $(ZC_LDFLAGS) -o $@ $< -ldl

bench-mh: $(LIB) $(BUILD)/bench_mh $(MH_TESTLIB)
	$(Q)MH_LIB=$(abspath $(LIB)) MH_TESTLIB=$(abspath $(MH_TESTLIB)) QUICK=$(QUICK) malloc-hooks/bench_mh.sh $(BUILD)/bench_mh

BENCH_EXTRA += bench-mh
.PHONY: test-mh test-mh-standalone bench-mh
