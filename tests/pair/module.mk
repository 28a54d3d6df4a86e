# tests/pair/: pairing of same-host zcsock connections (shim/paths/local/local_pair.c).
#   test_pair CASE   one program, one case per run (tests/pair/README.md)
#   test-pair        tier "pair": every case through tests/lib/harness.sh
# Included from tests/module.mk after SHIM_UNIT_OBJS is defined.

PAIR_SHIM_OBJS := $(or $(SHIM_UNIT_OBJS),$(filter-out %/shim_mem.o,$(SHIM_SRCS:%.c=$(BUILD)/obj/%.o)))
PAIR_BIN := $(BUILD)/tests/pair/test_pair

$(PAIR_BIN): tests/pair/test_pair.c tests/pair/pair_util.h shim/paths/local/local_pair.h shim/paths/local/local_ring.h $(PAIR_SHIM_OBJS)
	@mkdir -p $(@D)
	$(quiet) TEST $@
	$(Q)$(CC) $(ZC_CFLAGS) -Ishim/paths/local -Wno-missing-prototypes $(ZC_LDFLAGS) -o $@ $< \
		$(PAIR_SHIM_OBJS) -ldl -lpthread

TEST_TIERS += pair
test-pair: $(PAIR_BIN) $(BUILD)/conn_rate $(LIB)
	$(Q)$(TEST_ENV) PAIR_BIN=$(PAIR_BIN) CONN_RATE_BIN=$(BUILD)/conn_rate tests/pair/run.sh

.PHONY: test-pair
