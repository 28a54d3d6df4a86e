# tests/fds/: descriptor hygiene (issue 11 §2): a process under the library
# holds no descriptor of it until it pairs, the library's descriptors stay
# above the application's numbers and close-on-exec, children see exactly
# what they are passed.  Included from tests/module.mk.
FDS_BIN := $(BUILD)/tests/fds/t_fds

$(FDS_BIN): tests/fds/t_fds.c
	@mkdir -p $(@D)
	$(quiet) TEST $@
	$(Q)$(CC) -std=gnu11 -O1 -g -Wall -Wextra -o $@ $< -ldl

TEST_TIERS += fds
test-fds: $(LIB) $(FDS_BIN)
	$(Q)$(TEST_ENV) FDS_BIN=$(FDS_BIN) tests/fds/run.sh

.PHONY: test-fds
