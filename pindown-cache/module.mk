# pindown-cache/: the pin-down (registration) cache, linked into libzcsock.so
# (nothing exported).  Unit tests in pindown-cache/tests/, benchmark bench_pdc.

PDC_SRCS := pindown-cache/pdc_cache.c pindown-cache/pdc_range.c \
	pindown-cache/pdc_defer.c pindown-cache/pdc_stats.c pindown-cache/pdc_uring.c
PDC_OBJS := $(PDC_SRCS:%.c=$(BUILD)/obj/%.o)
PDC_LIBS := -luring -lgcc_s -lpthread

LIB_OBJS += $(PDC_OBJS)
# liburing linked in, hidden: with no liburing.so of ours in the process, an
# application's own dlopen of it (an FFI binding) is a new object the local
# path sees (pairing.c, lp_uring_loaded)
LIB_LIBS += -Wl,-Bstatic -luring -Wl,-Bdynamic -Wl,--exclude-libs,liburing.a -static-libgcc

PDC_FAKE_OBJ := $(BUILD)/obj/pindown-cache/tests/pdc_fake.o
PDC_TESTS := test_pdc_range test_pdc_cache test_pdc_stress test_pdc_uring
PDC_TEST_BINS := $(PDC_TESTS:%=$(BUILD)/tests/pdc/%)
PDC_TEST_OBJS := $(PDC_TESTS:%=$(BUILD)/obj/pindown-cache/tests/%.o) $(PDC_FAKE_OBJ) \
	$(BUILD)/obj/pindown-cache/bench_pdc.o

$(PDC_TEST_OBJS): OBJ_EXTRA = -Ipindown-cache -Ipindown-cache/tests -Wno-missing-prototypes

# Syscalls the unit tests mock.
$(BUILD)/tests/pdc/test_pdc_cache: PDC_WRAP = -Wl,--wrap=getrlimit -Wl,--wrap=capget

$(BUILD)/tests/pdc/%: $(BUILD)/obj/pindown-cache/tests/%.o $(PDC_FAKE_OBJ) $(PDC_OBJS)
	@mkdir -p $(@D)
	$(quiet) LD $@
	$(Q)$(CC) $(ZC_LDFLAGS) $(PDC_WRAP) -o $@ $^ -lcmocka $(PDC_LIBS)

$(BUILD)/bench_pdc: $(BUILD)/obj/pindown-cache/bench_pdc.o $(PDC_FAKE_OBJ) $(PDC_OBJS)
	@mkdir -p $(@D)
	$(quiet) LD $@
	$(Q)$(CC) $(ZC_LDFLAGS) -o $@ $^ $(PDC_LIBS)

UNIT_TESTS += $(PDC_TEST_BINS)
BENCH_EXTRA += bench-pdc

bench-pdc: $(BUILD)/bench_pdc
	$(Q)$(BUILD)/bench_pdc $(if $(QUICK),--quick)

.PHONY: bench-pdc
