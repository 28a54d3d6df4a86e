# tests/local/: the shared-memory channel of the local path (shim/paths/local/local_ring.c).
#   unit tests (cmocka, linked with the shim's objects, also under ASan/UBSan):
#     test_local_ring    ring semantics, waiting protocol, corrupted state
#     test_local_stream  two processes, 1 GiB (QUICK/sanitizers: 256 MiB)
#   fuzz-ring            libFuzzer (clang) on the shared-memory parser/reader,
#                        FUZZ_SECONDS (default 20); tier "fuzz" runs ~15 s
#   bench-ring           ring vs TCP loopback, 4 KiB/64 KiB/1 MiB, ping-pong
# Included from tests/module.mk before TEST_TIERS is finalised.

LOCAL_UNIT := test_local_ring test_local_stream
LOCAL_UNIT_BINS := $(LOCAL_UNIT:%=$(BUILD)/tests/local/%)
UNIT_TESTS += $(LOCAL_UNIT_BINS)

# The shim's objects as tests/module.mk links its unit tests (SHIM_UNIT_OBJS:
# without the memory wiring that needs malloc-hooks and the cache).
LOCAL_SHIM_OBJS := $(or $(SHIM_UNIT_OBJS),$(filter-out %/shim_mem.o,$(SHIM_SRCS:%.c=$(BUILD)/obj/%.o)))

$(BUILD)/tests/local/test_%: tests/local/test_%.c tests/local/t_ring.h shim/paths/local/local_ring.h \
		$(LOCAL_SHIM_OBJS)
	@mkdir -p $(@D)
	$(quiet) TEST $@
	$(Q)$(CC) $(ZC_CFLAGS) -Ishim/paths/local -Itests/local -Wno-missing-prototypes $(ZC_LDFLAGS) -o $@ $< \
		$(LOCAL_SHIM_OBJS) -lcmocka -ldl -lpthread

# --- benchmark: the ring module alone plus the real-function resolver ---
LOCAL_RING_OBJS = $(BUILD)/obj/shim/paths/local/local_ring.o $(BUILD)/obj/common/zc_real.o \
	$(BUILD)/obj/common/zc_copy.o

$(BUILD)/bench_ring: tests/local/bench_ring.c tests/local/t_ring.h shim/paths/local/local_ring.h $(LOCAL_RING_OBJS)
	@mkdir -p $(@D)
	$(quiet) LD $@
	$(Q)$(CC) $(ZC_CFLAGS) -Ishim/paths/local -Itests/local -Wno-missing-prototypes $(ZC_LDFLAGS) -o $@ $< \
		$(LOCAL_RING_OBJS) -ldl

bench-ring: $(BUILD)/bench_ring
	$(Q)$(BUILD)/bench_ring $(if $(QUICK),--quick)

BENCH_EXTRA += bench-ring

# --- fuzzing (clang + libFuzzer, own build directory, own flags) ---
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 20
FUZZ_DIR := build/fuzz
FUZZ_FLAGS := -std=gnu11 -O1 -g -D_GNU_SOURCE -Iinclude -Icommon -Ishim/paths/local \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer

$(FUZZ_DIR)/fuzz_ring: tests/local/fuzz_ring.c shim/paths/local/local_ring.c shim/paths/local/local_ring.h common/zc_real.c \
		common/zc_copy.c common/zc_copy.h
	@mkdir -p $(@D)
	$(quiet) FUZZ $@
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ tests/local/fuzz_ring.c shim/paths/local/local_ring.c common/zc_real.c \
		common/zc_copy.c -ldl

fuzz-ring: $(FUZZ_DIR)/fuzz_ring
	$(Q)mkdir -p $(FUZZ_DIR)/corpus-ring
	$(Q)$(FUZZ_DIR)/fuzz_ring -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=1024 \
		-print_final_stats=1 -artifact_prefix=$(FUZZ_DIR)/ $(FUZZ_DIR)/corpus-ring

TEST_TIERS += fuzz
test-fuzz:
	$(Q)$(TEST_ENV) FUZZ_MAKE="$(MAKE) --no-print-directory" tests/local/run_fuzz.sh

CLEAN += $(FUZZ_DIR)
.PHONY: bench-ring fuzz-ring test-fuzz
