# tests/live/: `zcsock stat` reads running programs under the library
# (issue 34: live statistics).  Included from tests/module.mk.
TEST_TIERS += live
test-live: $(LIB) $(BUILD)/zcsock
	$(Q)$(TEST_ENV) tests/live/run.sh

.PHONY: test-live
