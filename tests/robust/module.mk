# tests/robust/: issue 29's failures of real programs reduced to cases of
# our own (tests/robust/run.sh lists them).  Included from tests/module.mk.
TEST_TIERS += robust
ROBUST_BINS := $(BUILD)/tests/robust/t_epoll_race $(BUILD)/tests/robust/t_sigstorm

$(BUILD)/tests/robust/%: tests/robust/%.c
	@mkdir -p $(@D)
	$(quiet) TEST $@
	$(Q)$(CC) -std=gnu11 -O1 -g -Wall -Wextra -pthread -o $@ $<

test-robust: $(LIB) $(ROBUST_BINS)
	$(Q)$(TEST_ENV) ROBUST_BIN=$(BUILD)/tests/robust tests/robust/run.sh

.PHONY: test-robust
