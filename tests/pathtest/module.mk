# tests/pathtest/: the test-only path (shim/paths/test/) proves that a path
# is a plug-in.  It is linked only into build/libzcsock-test.so.
TEST_PATH_SRCS := $(wildcard shim/paths/test/*.c)
TEST_PATH_OBJS := $(TEST_PATH_SRCS:%.c=$(BUILD)/obj/%.o)
$(BUILD)/obj/shim/paths/test/%.o: OBJ_EXTRA = -Ishim
TEST_LIB := $(BUILD)/libzcsock-test.so
PATHTEST_BIN := $(BUILD)/tests/pathtest/t_pathtest

$(TEST_LIB): $(LIB_OBJS) $(TEST_PATH_OBJS) $(BUILD)/libzcsock.map
	$(quiet) LD $@
	$(Q)$(CC) -shared -Wl,-z,defs -Wl,-z,now -Wl,--version-script=$(BUILD)/libzcsock.map \
		$(ZC_LDFLAGS) -o $@ $(LIB_OBJS) $(TEST_PATH_OBJS) $(LIB_LIBS)

$(PATHTEST_BIN): tests/pathtest/t_pathtest.c
	@mkdir -p $(@D)
	$(quiet) TEST $@
	$(Q)$(CC) -std=gnu11 -O1 -g -Wall -Wextra -o $@ $< -ldl

TEST_TIERS += pathtest
test-pathtest: $(TEST_LIB) $(LIB) $(PATHTEST_BIN)
	$(Q)$(TEST_ENV) TEST_LIB=$(abspath $(TEST_LIB)) PATHTEST_BIN=$(PATHTEST_BIN) \
		tests/pathtest/run.sh

.PHONY: test-pathtest
