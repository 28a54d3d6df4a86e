# Tier "xchg": page exchange end to end (tests/xchg/t_xchg.c, two processes
# under the library with ZCSOCK_EXCHANGE=1).  Root turns shmem THP to
# `advise` for the tier (restored after); without root the cases that need
# 2 MiB pages are skipped.
XCHG_BIN := $(BUILD)/tests/xchg/t_xchg

$(XCHG_BIN): tests/xchg/t_xchg.c
	@mkdir -p $(@D)
	$(quiet) TEST $@
	$(Q)$(CC) -std=gnu11 -O2 -g -Wall -Wextra -o $@ $< -lpthread -ldl

TEST_TIERS += xchg
test-xchg: $(LIB) $(XCHG_BIN)
	$(Q)$(TEST_ENV) XCHG_BIN=$(abspath $(XCHG_BIN)) tests/xchg/run.sh

.PHONY: test-xchg
